//go:build linux && (amd64 || arm64)

package ggml

import (
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// newWindowExec is newTestExec's executor with the window cache on, its
// rings of chunk tokens beside the window (0: paged, as newTestExec's).
func newWindowExec(t testing.TB, m *model.Model, numBlocks, chunk int) *Executor {
	t.Helper()
	opts := Options{LibDir: testLibDir(t), Device: testDevice(), Threads: 1, PlainAttention: plainAttention, KVCacheDType: testKV,
		WindowCache: chunk > 0, WindowChunk: chunk, StateSlots: 4}
	if flashAttention && testDevice() != DeviceCPU {
		opts.FlashMaxSeqs = 1 << 30
	}
	e, err := New(m, numBlocks, testBlockSize, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// windowSteps are two sequences' iterations in slots 1 and 3: their
// prompts (30 and 21 tokens) in chunks of at most chunk tokens, side by
// side, then steps decoded together.
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
// (every position kept, the window masked), with flash attention per
// sequence and with the plain chain over the gathered rings, and the
// paged cache holds only the full layers.
func TestWindowCacheMatchesPaged(t *testing.T) {
	m := randomModel(t, gptossNarrow(), model.F32, 5)
	const chunk = 4
	steps := windowSteps(m, chunk, 10)
	bothAttentions(t, func(t *testing.T) {
		paged, ring := newWindowExec(t, m, 64, 0), newWindowExec(t, m, 64, chunk)
		if got, want := ring.KV().Layers, paged.KV().Layers-2; got != want {
			t.Errorf("the window cache pages %d layers, want %d (the full ones)", got, want)
		}
		if ring.MaxSeqTokens() != chunk || paged.MaxSeqTokens() != 0 {
			t.Errorf("MaxSeqTokens: %d with the window cache, %d without; want %d and 0", ring.MaxSeqTokens(), paged.MaxSeqTokens(), chunk)
		}
		want, got := runSteps(t, paged, steps), runSteps(t, ring, steps)
		d := maxDiff(want, got)
		t.Logf("window cache vs paged: max |diff| %.3g over %d iterations", d, len(steps))
		if d > 1e-4 {
			t.Errorf("the window cache's logits differ from the paged cache's by %.3g", d)
		}
	})
}
