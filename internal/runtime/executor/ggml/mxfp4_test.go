//go:build linux && (amd64 || arm64)

package ggml

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
)

// TestMXFP4EncodesAsGgml: model.EncodeMXFP4 writes ggml's own MXFP4
// blocks (ggml_quantize_chunk), byte for byte, over blocks of every
// magnitude: normal weights, tiny and huge ones, an all-zero block, exact
// grid values and their midpoints (ties).
func TestMXFP4EncodesAsGgml(t *testing.T) {
	lib, err := Open(testLibDir(t))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 39))
	const cols = 256
	var src []float32
	for _, scale := range []float64{1, 1e-3, 1e-30, 300, 1e30} {
		for range 4 * cols {
			src = append(src, float32(scale*rng.NormFloat64()))
		}
	}
	src = append(src, make([]float32, cols)...) // zeros
	for i := range cols {                       // the grid at d = 0.5 and the midpoints between its values
		src = append(src, float32(i%25)*0.25*float32(1-2*(i%2)))
	}
	rows := len(src) / cols
	want, err := lib.Quantize(model.MXFP4, src, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	got, err := model.EncodeMXFP4(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		for b := 0; b < len(got); b += model.MXFP4BlockBytes {
			if !bytes.Equal(got[b:b+model.MXFP4BlockBytes], want[b:b+model.MXFP4BlockBytes]) {
				t.Fatalf("block %d: %x, ggml's %x (weights %v)", b/model.MXFP4BlockBytes, got[b:b+model.MXFP4BlockBytes], want[b:b+model.MXFP4BlockBytes],
					src[b/model.MXFP4BlockBytes*32:][:32])
			}
		}
	}
}

// TestMXFP4ExpertsParityWithLlamaCpp: the gpt-oss parity model with its
// experts in MXFP4 (F16 elsewhere), the layout of gpt-oss as released,
// holds to llama.cpp as TestGreedyParityWithLlamaCpp's cases do: the
// engine generates llama.cpp's tokens and the executor's logits are
// within parityLogitsTol, after the short and the long prompt.
func TestMXFP4ExpertsParityWithLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llama.cpp in node: not in -short (race) runs")
	}
	lib := testLibDir(t)
	if testDevice() != DeviceCPU {
		t.Skipf("llama.cpp runs on the CPU here, not %s", testDevice())
	}
	dir := llamacpp.Node(t)
	c := gptossParity()
	f16, err := parityModel(c.cfg, c.seed).Convert(model.F16)
	if err != nil {
		t.Fatal(err)
	}
	mx, err := f16.WithMXFP4Experts()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gpt-oss-mxfp4.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteGGUF(f, mx); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := model.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	n := 0
	for _, tn := range m.Weights.Tensors() {
		if tn.Type == model.MXFP4 {
			n++
		}
	}
	if n != 3*c.cfg.Layers {
		t.Fatalf("%d MXFP4 tensors, want the %d expert stacks", n, 3*c.cfg.Layers)
	}
	lc := startLlamaCpp(t, "llama-cpp-greedy.mjs", dir, path, 1, kvcache.DTypeF16)
	t.Cleanup(lc.close)
	opts := Options{LibDir: lib, Device: DeviceCPU, Threads: 1, KVCacheDType: kvcache.DTypeF16}
	blocks := parityMaxModelLen / parityBlockSize
	eng := parityEngine(t, m, newParityExec(t, m, blocks, opts), blocks)
	teacher := newParityExec(t, m, blocks, opts)
	t.Logf("%s", teacher.Weights())
	for _, n := range []int{parityShortPrompt, parityLongPrompt} {
		rng := rand.New(rand.NewPCG(41, uint64(n)))
		prompt := make([]int32, n)
		for i := range prompt {
			prompt[i] = int32(rng.IntN(m.Config.VocabSize))
		}
		checkGreedyParity(t, lc, eng, teacher, blocks, prompt)
	}
}
