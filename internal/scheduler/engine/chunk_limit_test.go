package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// chunkExec is kvExec bounding a sequence's tokens an iteration
// (batch.ChunkLimiter), which it checks of every batch.
type chunkExec struct {
	*kvExec
	chunk int
	// widest is the most tokens a sequence took in one iteration.
	widest int
}

func (x *chunkExec) MaxSeqTokens() int { return x.chunk }

var _ batch.ChunkLimiter = (*chunkExec)(nil)

func (x *chunkExec) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	for _, sq := range b.Seqs {
		x.widest = max(x.widest, len(sq.Tokens))
		if x.chunk > 0 && len(sq.Tokens) > x.chunk {
			return fmt.Errorf("sequence %d: %d tokens, more than the chunk of %d", sq.SeqID, len(sq.Tokens), x.chunk)
		}
	}
	return x.kvExec.Execute(ctx, b, out)
}

// TestChunkLimiterBoundsEverySequence: an executor's MaxSeqTokens cuts
// every sequence's share of an iteration (a long prompt's chunks, one
// extended with the budget others left, the warm-up's), and the outputs
// stay those of an engine without the bound.
func TestChunkLimiterBoundsEverySequence(t *testing.T) {
	run := func(chunk int) (outs [][]int32, widest int) {
		x := &chunkExec{kvExec: newKVExec(256, 4, testVocab), chunk: chunk}
		e, err := New(Config{
			MaxNumSeqs: 4, MaxNumBatchedTokens: 64, MaxModelLen: 512, VocabSize: testVocab, WarmupIterations: 1,
			KV:  kvcache.Config{NumBlocks: 256, BlockSize: 4, EnablePrefixCache: true},
			EOS: []int32{x.eos}, Decoder: letters{eos: x.eos}, Logger: slog.New(slog.DiscardHandler),
		}, x)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.warmup(context.Background()); err != nil {
			t.Fatal(err)
		}
		var ss []*Stream
		for i, n := range []int{300, 37, 5} {
			ss = append(ss, mustSubmit(t, e, req(fmt.Sprint("r", i), prompt(n, uint64(i+1)), 6)))
		}
		for range 1000 {
			if run, wait := e.Pending(); run == 0 && wait == 0 {
				break
			}
			e.Step(context.Background())
		}
		for _, s := range ss {
			toks, _, _ := collect(t, s)
			outs = append(outs, toks)
		}
		return outs, x.widest
	}
	want, wideOpen := run(0)
	got, widest := run(7)
	if widest > 7 {
		t.Errorf("a sequence took %d tokens in one iteration, more than the executor's 7", widest)
	}
	if wideOpen <= 7 {
		t.Errorf("without a bound the widest share was %d tokens: the test does not reach the bound", wideOpen)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d: %v with the bound, %v without", i, got[i], want[i])
		}
	}
}
