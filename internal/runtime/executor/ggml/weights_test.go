//go:build linux && (amd64 || arm64)

package ggml

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// TestWeightsInExtraBufferTypes: where the device offers ggml's repacked
// CPU buffer (x86 with AVX2, Arm with NEON), Q4_0 and Q4_K matrices from a
// mapped GGUF file go there (the tied head as a copy, the embedding and the
// norms stay in the file's mapping), and the logits match the executor
// with every weight in plain buffers: the repacked kernels quantize the
// activations as the plain ones do and only sum in another order (within
// 1e-3 of the logits' scale, greedy tokens equal wherever the margin
// exceeds 1%). A mixture of experts' stacked matrices go there too, as
// llama.cpp puts them (mul_mat_id runs from the repacked buffer).
func TestWeightsInExtraBufferTypes(t *testing.T) {
	if testDevice() != DeviceCPU {
		t.Skip("extra weight buffer types are the CPU backend's")
	}
	lib, err := Open(testLibDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg model.Config
		// per layer: attention's 4 matrices, then the MLP's (qwen3moe: the
		// router and 3 stacks of experts).
		perLayer int
	}{
		{model.Config{Arch: model.ArchQwen2, VocabSize: 320, Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 512, QKVBias: true, TiedEmbeddings: true, RopeTheta: 1e6}, 7},
		{model.Config{Arch: model.ArchQwen3MoE, VocabSize: 320, Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 512, TiedEmbeddings: true, RopeTheta: 1e6,
			Experts: 8, ExpertsUsed: 2, ExpertFFN: 256}, 8},
	} {
		t.Run(tc.cfg.Arch, func(t *testing.T) { testWeightsInExtraBufferTypes(t, lib, tc.cfg, tc.perLayer, tc.cfg.Experts == 0) })
	}
}

// testWeightsInExtraBufferTypes checks cfg's placement and, with
// compare, its logits against plain buffers'. A mixture of experts'
// logits are not compared: a router's near-tie, summed in another order,
// picks another expert and moves them by a percent or more;
// TestQuantizedExpertsMatchLlamaCpp holds them to llama.cpp's, which
// repacks them too.
func testWeightsInExtraBufferTypes(t *testing.T, lib *Library, cfg model.Config, perLayer int, compare bool) {
	for _, typ := range []model.DType{model.Q4_0, model.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			q, err := lib.QuantizeModel(model.Random(cfg, 3), typ)
			if err != nil {
				t.Fatal(err)
			}
			loaded := exectest.WriteAndLoad(t, q)
			g := newTestExec(t, loaded, 32)
			if !strings.Contains(g.Weights(), "CPU_REPACK") {
				if !strings.Contains(strings.Join(g.placed.bufts, ","), "CPU_REPACK") {
					t.Skipf("this CPU's ggml backend offers no repacked buffer: %s", g.Weights())
				}
				t.Fatalf("%s matrices not repacked although the buffer type is offered: %s", typ, g.Weights())
			}
			t.Logf("%s", g.Weights())
			if n, want := g.placed.tensors["CPU_REPACK"]+g.placed.tensors["CPU_REPACK (tied head's copy)"], cfg.Layers*perLayer+1; n != want {
				t.Errorf("%d tensors repacked, want the %d matrices (%d a layer and the head's copy): %s", n, want, perLayer, g.Weights())
			}
			if n := g.placed.tensors["CPU (file mapping)"]; n == 0 || len(g.mappedBufs) != n {
				t.Errorf("%d tensors kept in the file mapping, %d mapped buffers", n, len(g.mappedBufs))
			}
			if !compare {
				return
			}
			plainWeights = true
			ref := newTestExec(t, loaded, 32)
			plainWeights = false
			if strings.Contains(ref.Weights(), "CPU_REPACK") {
				t.Fatalf("PlainWeights repacked: %s", ref.Weights())
			}
			rng := rand.New(rand.NewPCG(5, 6))
			in := make([]int32, 11)
			for i := range in {
				in[i] = int32(rng.IntN(cfg.VocabSize))
			}
			want, got, checked := agreeOnMargins(t, ref, g, 0, in, 12, 0.01)
			if d := maxRelDiff(want, got); d > 2e-2 {
				t.Errorf("repacked logits differ by %.3g of their scale from plain buffers', tolerance 2e-2", d)
			} else {
				t.Logf("repacked logits within %.3g of plain buffers'; argmax compared at %d of 12 positions", d, checked)
			}
		})
	}
}
