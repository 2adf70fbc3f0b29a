//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/cpu"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// kvTolerance is, per KV cache type, how far ggml's logits may be from the
// cpu executor's (F32 cache) relative to their scale, and the top-2 margin
// (relative to the scale) above which their greedy tokens must agree (0:
// every token). The cache rounds every key and value once: F16 keeps 11
// significant bits (relative error ≤ 2⁻¹¹), BF16 8 (≤ 2⁻⁸), Q8_0 an int8
// per element scaled to its 32-element block's largest (error ≤ 1/254 of
// that). Measured on the CPU with these models (4 prompts, 20 greedy
// tokens, flash and plain attention), the largest differences were F32
// 5.0e-7, F16 7.7e-4, BF16 2.8e-3, Q8_0 9.4e-3: the tolerances are about
// three times those. On CUDA, F32 products of several rows run in TF32
// (see TestGreedyMatchesCPU): F32 is held to F16's bounds there.
var kvTolerance = map[kvcache.DType]struct{ logits, margin float64 }{
	kvcache.DTypeF32:  {1e-4, 0},
	kvcache.DTypeF16:  {3e-3, 0.01},
	kvcache.DTypeBF16: {1e-2, 0.02},
	kvcache.DTypeQ8_0: {3e-2, 0.02},
}

// TestKVTypesMatchCPU: with F32 weights, ggml's logits with each KV cache
// type stay within kvTolerance of the cpu executor's, and their greedy
// tokens agree wherever the cpu executor's top-2 margin is clear (F32:
// everywhere, token for token).
func TestKVTypesMatchCPU(t *testing.T) {
	for _, d := range allKVTypes {
		withKV(t, d, func(t *testing.T) { bothAttentions(t, func(t *testing.T) { testKVTypeMatchesCPU(t, d) }) })
	}
}

func testKVTypeMatchesCPU(t *testing.T, d kvcache.DType) {
	const gen = 20
	tol := kvTolerance[d]
	if d == kvcache.DTypeF32 && testDevice() != DeviceCPU {
		tol = kvTolerance[kvcache.DTypeF16]
	}
	for name, cfg := range wideHeads() {
		t.Run(name, func(t *testing.T) {
			m := randomModel(t, cfg, model.F32, 21)
			ref, err := cpu.New(m, 64, testBlockSize, cpu.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			g := newTestExec(t, m, 64)
			if got := g.KV().DType; got != d {
				t.Fatalf("executor keeps a %s cache, asked for %s", got, d)
			}
			rng := rand.New(rand.NewPCG(7, 8))
			worst, checked := 0.0, 0
			for i, p := range prompts(rng, cfg.VocabSize) {
				want, got, n := agreeOnMargins(t, ref, g, i, p, gen, tol.margin)
				checked += n
				diff := maxRelDiff(want, got)
				worst = max(worst, diff)
				if diff > tol.logits {
					t.Errorf("prompt %d: logits differ by %.3g of their scale, tolerance %.0e", i, diff, tol.logits)
				}
			}
			t.Logf("%s cache: logits within %s of the cpu executor's; %d of %d tokens had a clear margin and agree", d, fmt.Sprintf("%.3g", worst), checked, 4*gen)
			if checked < 2*gen {
				t.Errorf("only %d positions had a clear margin", checked)
			}
		})
	}
}
