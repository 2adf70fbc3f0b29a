//go:build linux && (amd64 || arm64)

package ggml

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestSequenceAttentionIgnoresItsBatch: a sequence's logits are bit for bit
// the same whether its blocks are consecutive (read in place) or spread
// over the cache (gathered),
// and whether it decodes alone or beside other sequences (a prefill, and
// decodes whose blocks lie among its own), with every KV cache type.
//
// Beside a prefill the batch has more rows, and on a GPU ggml picks its
// matrix kernels by the number of rows (on CUDA, a matrix-vector kernel for
// a few rows, tiled kernels and cuBLAS, in other precisions, for more), so
// there the sequence is compared with itself beside another prefill of the
// same length in other blocks: the same kernels, other neighbours. The
// CPU's kernels give every row the same arithmetic, and it is compared with
// the sequence alone too.
func TestSequenceAttentionIgnoresItsBatch(t *testing.T) {
	m := randomModel(t, wideHeads()["llama"], model.Q8_0, 31)
	prompt := make([]int32, 22)
	for i := range prompt {
		prompt[i] = int32(i*37%300 + 1)
	}
	other := make([]int32, 17)
	for i := range other {
		other[i] = int32(i*53%290 + 3)
	}
	// next decodes token 9 after the prompt, in blocks, next to others.
	next := func(e *Executor, blocks []kvcache.BlockID, others ...batch.Seq) []float32 {
		execute(t, e, []batch.Seq{{Tokens: prompt, Blocks: blocks, Sample: true}})
		for i, o := range others {
			if o.Pos > 0 { // a decoding neighbour needs its context first
				execute(t, e, []batch.Seq{{Tokens: prompt[:o.Pos], Blocks: o.Blocks, Sample: true}})
				others[i].Tokens = []int32{int32(5 + i)}
			}
		}
		return execute(t, e, append([]batch.Seq{{Tokens: []int32{9}, Pos: len(prompt), Blocks: blocks, Sample: true}}, others...))[0]
	}
	spread := []kvcache.BlockID{90, 7, 41, 3, 77, 12}
	for _, d := range allKVTypes {
		withKV(t, d, func(t *testing.T) {
			check := func(name string, want, got []float32) {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (max relative %.3g)", name, maxRelDiff([][]float32{want}, [][]float32{got}))
				}
			}
			alone := next(newTestExec(t, m, 128), contiguous(0, 6))
			// On the CPU the spread blocks of an F16 or BF16 cache are
			// gathered as I32 words (retype.go), not widened and cast back.
			if e := newTestExec(t, m, 128); e.onCPU() && e.rawGather != (d == kvcache.DTypeF16 || d == kvcache.DTypeBF16) && d != kvcache.DTypeQ8_0 {
				t.Fatalf("rawGather %v with a %s cache on the CPU", e.rawGather, d)
			}
			for name, got := range map[string][]float32{
				"spread":                        next(newTestExec(t, m, 128), spread),
				"spread, beside two decodes":    next(newTestExec(t, m, 128), spread, batch.Seq{Pos: 13, Blocks: []kvcache.BlockID{8, 40, 91, 4}, Sample: true}, batch.Seq{Pos: 21, Blocks: contiguous(100, 6), Sample: true}),
				"consecutive, far in the cache": next(newTestExec(t, m, 128), contiguous(120, 6)),
				"every other block":             next(newTestExec(t, m, 128), []kvcache.BlockID{0, 2, 4, 6, 8, 10}),
				"one block further on":          next(newTestExec(t, m, 128), []kvcache.BlockID{0, 1, 2, 3, 4, 11}),
			} {
				check(name+": logits differ from the sequence alone in blocks 0-5", alone, got)
			}
			besidePrefill := next(newTestExec(t, m, 128), contiguous(0, 6), batch.Seq{Tokens: prompt[:17], Blocks: contiguous(20, 5), Sample: true})
			check("beside a prefill: logits differ from those beside another prefill of its length",
				next(newTestExec(t, m, 128), spread, batch.Seq{Tokens: other, Blocks: contiguous(60, 5), Sample: true}), besidePrefill)
			if testDevice() == DeviceCPU {
				check("beside a prefill: logits differ from the sequence alone in blocks 0-5", alone, besidePrefill)
			} else {
				t.Logf("beside a prefill, against the sequence alone: max relative %.3g (not compared on %s)", maxRelDiff([][]float32{alone}, [][]float32{besidePrefill}), testDevice())
			}
		})
	}
}
