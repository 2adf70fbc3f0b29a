//go:build linux && (amd64 || arm64)

package ggml

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// dequantize decodes a typ matrix with ggml itself (get_rows of every row),
// since the model package decodes only the types the cpu executor runs.
func dequantize(t *testing.T, e *Executor, src *model.Tensor) *model.Tensor {
	t.Helper()
	if len(src.Shape) != 2 || src.Type == model.F32 {
		return src
	}
	a := e.a
	rows, cols := src.Rows(), src.Cols()
	ctx := a.initCtx(initParams{MemSize: a.tensorOverhead()*8 + a.graphOverhead(8, false), NoAlloc: true})
	defer a.freeCtx(ctx)
	w := a.newTensor2d(ctx, int32(src.Type), int64(cols), int64(rows))
	idx := a.newTensor1d(ctx, typeI32, int64(rows))
	out := a.getRows(ctx, w, idx)
	g := a.newGraphCustom(ctx, 8, false)
	a.buildForward(g, out)
	buf := a.allocCtxTensors(ctx, e.be.h)
	if buf == 0 {
		t.Fatal("allocate the dequantization graph")
	}
	defer a.bufferFree(buf)
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(i)
	}
	a.tensorSet(w, unsafe.Pointer(&src.Data[0]), 0, uintptr(len(src.Data)))
	a.tensorSet(idx, unsafe.Pointer(&ids[0]), 0, uintptr(4*rows))
	if st := a.graphCompute(e.be.h, g); st != gStatusSuccess {
		t.Fatalf("dequantize %s: status %d", src.Name, st)
	}
	f := make([]float32, rows*cols)
	a.tensorGet(out, unsafe.Pointer(&f[0]), 0, uintptr(4*len(f)))
	data, err := model.Encode(model.F32, f)
	if err != nil {
		t.Fatal(err)
	}
	return &model.Tensor{Name: src.Name, Type: model.F32, Shape: src.Shape, Data: data}
}

// TestBlockQuantizedTypesRun runs the types only ggml executes (Q4_0 and the
// K-quants users download: Q4_K, Q5_K, Q6_K), quantized by ggml's own
// quantizers, against the same weights decoded to F32 (by ggml): what
// remains is ggml quantizing the activations for these dot products (to
// Q8_0 for Q4_0, Q8_K for the K-quants), about 2% here. Logits must agree
// within 5% of their scale and the argmax wherever the F32 twin's top-2
// margin exceeds 5% of it.
func TestBlockQuantizedTypesRun(t *testing.T) {
	cfg := model.Config{Arch: model.ArchLlama, VocabSize: 320, Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 256}
	f32 := model.Random(cfg, 8)
	lib, err := Open(testLibDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []model.DType{model.Q4_0, model.Q4_K, model.Q5_K, model.Q6_K} {
		t.Run(typ.String(), func(t *testing.T) {
			q, err := lib.QuantizeModel(f32, typ)
			if err != nil {
				t.Fatal(err)
			}
			if q.Weights.Layers[0].Q.Type != typ {
				t.Fatalf("layer 0 q has type %s", q.Weights.Layers[0].Q.Type)
			}
			g := newTestExec(t, q, 32)
			twin := &model.Model{Config: q.Config, Tokenizer: q.Tokenizer, ChatTemplate: q.ChatTemplate}
			w, tw := &q.Weights, &twin.Weights
			tw.TokenEmbedding, tw.OutputNorm, tw.Output = dequantize(t, g, w.TokenEmbedding), w.OutputNorm, dequantize(t, g, w.Output)
			for _, l := range w.Layers {
				tw.Layers = append(tw.Layers, model.Layer{
					AttnNorm: l.AttnNorm, FFNNorm: l.FFNNorm,
					Q: dequantize(t, g, l.Q), K: dequantize(t, g, l.K), V: dequantize(t, g, l.V), O: dequantize(t, g, l.O),
					Gate: dequantize(t, g, l.Gate), Up: dequantize(t, g, l.Up), Down: dequantize(t, g, l.Down),
				})
			}
			ref := newTestExec(t, twin, 32)
			rng := rand.New(rand.NewPCG(13, 14))
			in := make([]int32, 9)
			for i := range in {
				in[i] = int32(rng.IntN(cfg.VocabSize))
			}
			want, got, checked := agreeOnMargins(t, ref, g, 0, in, 16, 0.05)
			if d := maxRelDiff(want, got); d > 0.05 {
				t.Errorf("logits differ by %.3g of their scale, tolerance 0.05", d)
			} else {
				t.Logf("logits within %.3g of their scale; argmax compared at %d of 16 positions", d, checked)
			}
			if checked == 0 {
				t.Error("no position had a margin large enough to compare the argmax")
			}
		})
	}
}
