//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// newWindowExec is newTestExec's executor with the window cache on, its
// rings of chunk tokens beside the window (0: paged, as newTestExec's).
func newWindowExec(t testing.TB, m *model.Model, numBlocks, chunk int) *Executor {
	t.Helper()
	windowChunk = chunk
	defer func() { windowChunk = 0 }()
	return newTestExec(t, m, numBlocks)
}

// withWindowCache runs f with newTestExec's window cache on, rings of
// chunk tokens beside the window.
func withWindowCache(t *testing.T, chunk int, f func(t *testing.T)) {
	t.Run(fmt.Sprintf("window-chunk=%d", chunk), func(t *testing.T) {
		windowChunk = chunk
		defer func() { windowChunk = 0 }()
		f(t)
	})
}

// windowSteps are two sequences' iterations in state slots 1 and 3 (an
// executor that keeps no states ignores them), the second over scattered
// blocks: their prompts (30 and 21 tokens) in chunks of at most chunk
// tokens, side by side, then steps decoded together.
func windowSteps(m *model.Model, chunk, steps int) [][]batch.Seq {
	a := contiguous(0, 16)
	b := []kvcache.BlockID{40, 17, 33, 20, 25, 30, 18, 35, 21, 44, 19, 50, 23, 27, 31, 22}
	prompt := func(n, salt int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32((i*37 + salt*11) % m.Config.VocabSize)
		}
		return p
	}
	pa, pb := prompt(30, 1), prompt(21, 2)
	var out [][]batch.Seq
	for i := 0; i < len(pa); i += chunk {
		it := []batch.Seq{{Tokens: pa[i:min(i+chunk, len(pa))], Pos: i, Blocks: a, State: 1, Sample: i+chunk >= len(pa)}}
		if i < len(pb) {
			it = append(it, batch.Seq{Tokens: pb[i:min(i+chunk, len(pb))], Pos: i, Blocks: b, State: 3, Sample: i+chunk >= len(pb)})
		}
		out = append(out, it)
	}
	for i := range steps {
		out = append(out, []batch.Seq{
			{Tokens: []int32{int32(3 + i)}, Pos: len(pa) + i, Blocks: a, State: 1, Sample: true},
			{Tokens: []int32{int32(90 + i)}, Pos: len(pb) + i, Blocks: b, State: 3, Sample: true},
		})
	}
	return out
}

// runSteps runs steps on e and returns every iteration's logits.
func runSteps(t *testing.T, e *Executor, steps [][]batch.Seq) [][][]float32 {
	t.Helper()
	var out [][][]float32
	for _, seqs := range steps {
		out = append(out, execute(t, e, seqs))
	}
	return out
}

// TestWindowCacheMatchesPaged: with the window cache, gpt-oss's sliding
// layers (a window of 8) keep rings of 8 + 4 cells, which two sequences'
// 30- and 21-token prompts, prefilled 4 tokens an iteration, and 10
// decoded steps wrap several times; their logits are the paged cache's
// (every position kept, the window masked) to the bit, F32 and F16
// caches, with flash attention per sequence; with the plain chain over
// the gathered windows within 1e-3 (its softmax sums another span: 2e-6
// apart with an F32 cache, 2e-4 with F16);
// and the paged cache holds only the full layers.
func TestWindowCacheMatchesPaged(t *testing.T) {
	m := randomModel(t, gptossNarrow(), model.F32, 5)
	const chunk = 4
	steps := windowSteps(m, chunk, 10)
	for _, d := range []kvcache.DType{kvcache.DTypeF32, kvcache.DTypeF16} {
		withKV(t, d, func(t *testing.T) {
			bothAttentions(t, func(t *testing.T) {
				paged, ring := newWindowExec(t, m, 64, 0), newWindowExec(t, m, 64, chunk)
				if got, want := ring.KV().Layers, paged.KV().Layers-2; got != want {
					t.Errorf("the window cache pages %d layers, want %d (the full ones)", got, want)
				}
				if ring.MaxSeqTokens() != chunk || paged.MaxSeqTokens() != 0 {
					t.Errorf("MaxSeqTokens: %d with the window cache, %d without; want %d and 0", ring.MaxSeqTokens(), paged.MaxSeqTokens(), chunk)
				}
				tol := 0.0
				if plainAttention {
					tol = 1e-3
				}
				if testDevice() != DeviceCPU {
					// A GPU's kernels tile the ring's span and the paged
					// one differently (and multiply F32 in TF32): 2.5e-3
					// (flash) and 5.1e-3 (plain) on an H200.
					tol = 1e-2
				}
				want, got := runSteps(t, paged, steps), runSteps(t, ring, steps)
				diff := maxDiff(want, got)
				t.Logf("window cache vs paged: max |diff| %.3g over %d iterations", diff, len(steps))
				if diff > tol {
					t.Errorf("the window cache's logits differ from the paged cache's by %.3g, more than %g", diff, tol)
				}
			})
		})
	}
}

// TestWindowCacheEngineBatchingEquivalence is TestEngineBatchingEquivalence
// for gpt-oss (a window of 8) with the window cache, its rings 8 + 16
// cells (prompts prefilled at most 16 tokens an iteration), which prompts
// of up to 42 tokens and their outputs wrap: batched, preempted and
// resumed from checkpoints at prefix hits, every request's tokens are
// those it gets alone; F16 and Q8_0 caches (a ring's cells copied in
// whole Q8_0 rows), both attentions.
func TestWindowCacheEngineBatchingEquivalence(t *testing.T) {
	for _, d := range []kvcache.DType{kvcache.DTypeF16, kvcache.DTypeQ8_0} {
		withKV(t, d, func(t *testing.T) {
			withWindowCache(t, 16, func(t *testing.T) {
				bothAttentions(t, func(t *testing.T) { testEngineBatchingEquivalence(t, gptossNarrow()) })
			})
		})
	}
}

// TestWindowCacheParityWithLlamaCpp is TestGreedyParityWithLlamaCpp's
// gpt-oss case (a window of 32) with the window cache, F16 and Q8_0
// weights, an F16 cache: with rings of 32 + 512 cells (the default
// chunk), which the prompts (12 and 300 tokens) and their 64 steps never
// wrap, and of 32 + 300, which the long prompt's steps wrap from the 33rd
// on. The engine generates llama.cpp's tokens and the teacher's logits
// equal llama.cpp's to the bit (llama.cpp's prompt is one batch, so the
// chunk must hold it: a prompt prefilled in smaller chunks rounds
// otherwise, in the paged cache as in the rings).
func TestWindowCacheParityWithLlamaCpp(t *testing.T) {
	lib, dir := parityReference(t)
	c := gptossParity()
	if ring := c.cfg.SlidingWindow + parityLongPrompt; parityLongPrompt+paritySteps <= ring {
		t.Fatalf("the long prompt and its steps (%d positions) do not wrap a ring of %d cells", parityLongPrompt+paritySteps, ring)
	}
	for _, chunk := range []int{DefaultWindowChunk, parityLongPrompt} {
		for _, typ := range []model.DType{model.F16, model.Q8_0} {
			t.Run(fmt.Sprintf("chunk=%d/%s", chunk, typ), func(t *testing.T) {
				m, lc := parityPair(t, dir, c, typ)
				opts := Options{LibDir: lib, Device: DeviceCPU, Threads: 1, KVCacheDType: kvcache.DTypeF16, WindowCache: true, WindowChunk: chunk}
				blocks := parityMaxModelLen / parityBlockSize
				x, err := New(m, blocks, parityBlockSize, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(x.Close)
				teacher, err := New(m, blocks, parityBlockSize, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(teacher.Close)
				if teacher.MaxSeqTokens() != chunk || teacher.KV().Layers != 1 {
					t.Fatalf("chunk %d and %d paged layers, want %d and 1 (gpt-oss's one full layer of 3)", teacher.MaxSeqTokens(), teacher.KV().Layers, chunk)
				}
				eng := parityEngine(t, m, x, blocks)
				for _, n := range []int{parityShortPrompt, parityLongPrompt} {
					if d := checkGreedyParityWithin(t, lc, eng, teacher, blocks, parityPrompt(n, m.Config.VocabSize)); d != 0 {
						t.Errorf("prompt %d tokens: logits differ from llama.cpp's by up to %.3g", n, d)
					}
				}
			})
		}
	}
}

// TestWindowCacheRefusesWideChunks: with the window cache a sequence may
// take at most its chunk of tokens an iteration (more would overwrite
// cells its own tokens still read), and two sequences no one ring.
func TestWindowCacheRefusesWideChunks(t *testing.T) {
	m := randomModel(t, gptossNarrow(), model.F32, 5)
	x := newWindowExec(t, m, 16, 4)
	for _, c := range []struct {
		name string
		seqs []batch.Seq
		want string
	}{
		{"chunk", []batch.Seq{{Tokens: []int32{1, 2, 3, 4, 5}, Blocks: contiguous(0, 2), State: 0, Sample: true}}, "more than the window cache's chunk of 4"},
		{"shared ring", []batch.Seq{{Tokens: []int32{1}, Blocks: contiguous(0, 2), State: 2}, {Tokens: []int32{1}, Blocks: contiguous(2, 2), State: 2}}, "another sequence's"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &batch.Batch{Seqs: c.seqs, BlockSize: testBlockSize}
			for _, s := range c.seqs {
				b.NumTokens += len(s.Tokens)
			}
			out := &batch.Output{Logits: make([][]float32, len(c.seqs)), Tokens: make([]int32, len(c.seqs)), Sampled: make([]bool, len(c.seqs))}
			if err := x.Execute(context.Background(), b, out); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestRingSpans: a checkpoint's copy takes the cells of the window before
// its position, in one run or, where the window wraps, two.
func TestRingSpans(t *testing.T) {
	for _, c := range []struct {
		pos, window, cells int
		want               [2][2]int
	}{
		{pos: 5, window: 8, cells: 12, want: [2][2]int{{0, 5}}},
		{pos: 12, window: 8, cells: 12, want: [2][2]int{{4, 8}}},
		{pos: 16, window: 8, cells: 12, want: [2][2]int{{8, 4}, {0, 4}}},
		{pos: 21, window: 8, cells: 12, want: [2][2]int{{1, 8}}},
	} {
		if got := ringSpans(c.pos, c.window, c.cells); got != c.want {
			t.Errorf("ringSpans(%d, %d, %d) = %v, want %v", c.pos, c.window, c.cells, got, c.want)
		}
	}
}
