//go:build linux && (amd64 || arm64)

package ggml

import (
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// rssBytes is the process's resident set (ggml's C allocations included).
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func heapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestNoGrowthOverManyIterations runs 10,000 iterations of sequences coming
// and going (random prompt chunks and decode lengths, blocks freed and
// reused) and checks that nothing accumulates: the ggml buffers keep their
// size once the largest batch has been seen, and neither the Go heap nor the
// process's resident memory (ggml's per-iteration contexts are malloc'd)
// grows.
func TestNoGrowthOverManyIterations(t *testing.T) {
	const (
		numBlocks = 32
		maxTokens = 12
		iters     = 10_000
	)
	m := model.Random(model.Config{VocabSize: model.ByteVocabSize, Dim: 32, Layers: 1, Heads: 2, KVHeads: 1, FFN: 64}, 3)
	e := newTestExec(t, m, numBlocks)
	rng := rand.New(rand.NewPCG(5, 6))

	type live struct {
		seq          batch.Seq
		prompt, left int
	}
	free := contiguous(0, numBlocks)
	var seqs []*live
	nextID := uint64(0)
	b := &batch.Batch{BlockSize: testBlockSize}
	out := &batch.Output{}
	step := func() {
		// Admit new sequences while blocks last; each needs at most 6 blocks.
		for len(seqs) < 4 && len(free) >= 6 {
			s := &live{prompt: 1 + rng.IntN(12), left: 1 + rng.IntN(10)}
			s.seq.SeqID, nextID = nextID, nextID+1
			s.seq.Blocks, free = append([]kvcache.BlockID(nil), free[:6]...), free[6:]
			seqs = append(seqs, s)
		}
		b.Seqs, b.NumTokens = b.Seqs[:0], 0
		for _, s := range seqs {
			sq := s.seq
			if sq.Pos < s.prompt {
				n := min(s.prompt-sq.Pos, 1+rng.IntN(maxTokens/4))
				sq.Tokens = make([]int32, n)
			} else {
				sq.Tokens = make([]int32, 1)
			}
			for i := range sq.Tokens {
				sq.Tokens[i] = int32(rng.IntN(m.Config.VocabSize))
			}
			sq.Sample = sq.Pos+len(sq.Tokens) >= s.prompt
			b.Seqs = append(b.Seqs, sq)
			b.NumTokens += len(sq.Tokens)
		}
		out.Logits = append(out.Logits[:0], make([][]float32, len(b.Seqs))...)
		if err := e.Execute(t.Context(), b, out); err != nil {
			t.Fatal(err)
		}
		kept := seqs[:0]
		for i, s := range seqs {
			s.seq.Pos += len(b.Seqs[i].Tokens)
			if b.Seqs[i].Sample {
				s.left--
			}
			if s.left == 0 {
				free = append(free, s.seq.Blocks...)
				rng.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
				continue
			}
			kept = append(kept, s)
		}
		seqs = kept
	}
	// The largest graphs first, so the compute buffer reaches its final size
	// before the baseline: 12 tokens over every slot (attention in place),
	// and 12 tokens over the most blocks attention gathers rather than
	// reads in place (15, the highest being block 31: see prepare).
	big := batch.Seq{Tokens: make([]int32, maxTokens), Pos: numBlocks*testBlockSize - maxTokens, Blocks: contiguous(0, numBlocks), Sample: true}
	execute(t, e, []batch.Seq{big})
	gathered := append([]kvcache.BlockID{numBlocks - 1}, contiguous(0, numBlocks/2-2)...)
	execute(t, e, []batch.Seq{{Tokens: make([]int32, maxTokens), Pos: len(gathered)*testBlockSize - maxTokens, Blocks: gathered, Sample: true}})
	for range 500 {
		step()
	}
	_, _, compute0 := e.BufferBytes()
	heap0, rss0 := heapBytes(), rssBytes(t)
	for range iters {
		step()
	}
	_, _, compute1 := e.BufferBytes()
	heap1, rss1 := heapBytes(), rssBytes(t)
	t.Logf("compute buffer %d → %d bytes, Go heap %d → %d, RSS %d → %d", compute0, compute1, heap0, heap1, rss0, rss1)
	if compute1 != compute0 {
		t.Errorf("compute buffer grew from %d to %d bytes", compute0, compute1)
	}
	if heap1 > heap0+1<<20 {
		t.Errorf("Go heap grew from %d to %d bytes over %d iterations", heap0, heap1, iters)
	}
	// One leaked per-iteration context is ~100 KiB: 10,000 would be a GiB.
	if rss1 > rss0+32<<20 {
		t.Errorf("resident memory grew from %d to %d bytes over %d iterations", rss0, rss1, iters)
	}
}
