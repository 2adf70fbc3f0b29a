package engine

import (
	"context"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"time"
)

// nopExec produces a fixed non-EOS token for every sequence: it isolates
// the engine's own per-iteration cost.
type nopExec struct{}

func (nopExec) Execute(_ context.Context, b *batch.Batch, out *batch.Output) error {
	for i := range b.Seqs {
		if b.Seqs[i].Sample {
			out.Tokens[i] = 1
			out.Sampled[i] = true
		}
	}
	return nil
}

// countingObserver keeps totals only, like a metrics adapter: with it the
// benchmark covers the engine's observer bookkeeping too.
type countingObserver struct{ iterations, itl, finished int }

func (o *countingObserver) CacheConfig(int, int) {}
func (o *countingObserver) Iteration(st *IterationStats) {
	o.iterations++
	o.itl += len(st.InterTokenLatency)
}
func (o *countingObserver) RequestFinished(*RequestStats) { o.finished++ }

// BenchmarkIterationOverhead measures planning and bookkeeping per
// iteration (executor excluded) with 256 sequences decoding and 10,000
// waiting, an observer attached: the target is ≤ 20 µs and 0 allocations
// per iteration.
func BenchmarkIterationOverhead(b *testing.B) {
	const running, waiting = 256, 10_000
	// Sequences are recycled (outside the timer) before they outgrow
	// their share of the KV cache, however large b.N gets.
	const maxSteps = 16_384
	clk := clock.NewVirtual(time.Unix(0, 0))
	e, err := New(Config{
		MaxNumSeqs: running, MaxNumBatchedTokens: 8192, MaxQueue: waiting + running, MaxModelLen: 1 << 20,
		KV:  kvcache.Config{NumBlocks: running * (maxSteps + 1024) / 16, BlockSize: 16, EnablePrefixCache: true},
		EOS: []int32{0}, Decoder: letters{eos: 0}, Clock: clk, Observer: &countingObserver{},
	}, nopExec{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	drain, cancel := context.WithCancel(ctx)
	cancel()
	var streams []*Stream
	drainAll := func() {
		for _, s := range streams[:running] {
			for {
				if _, err := s.Next(drain); err != nil {
					break
				}
			}
		}
	}
	// fill submits a fresh set of requests and runs to steady state:
	// prefill done, buffers grown.
	fill := func() {
		for _, s := range streams {
			s.Cancel()
		}
		for {
			if r, w := e.Pending(); r == 0 && w == 0 {
				break
			}
			e.Step(ctx)
		}
		streams = streams[:0]
		for i := range running + waiting {
			p := make([]int32, 64)
			for j := range p {
				p[j] = int32(1 + (i*31+j)%50)
			}
			st, err := e.Submit(ctx, &Request{Prompt: p, Params: Params{MaxTokens: 1 << 19, IgnoreEOS: true}})
			if err != nil {
				b.Fatal(err)
			}
			streams = append(streams, st)
		}
		for i := range 600 {
			e.Step(ctx)
			if i%32 == 0 {
				drainAll()
			}
		}
		if r, w := e.Pending(); r != running || w != waiting {
			b.Fatalf("running %d waiting %d", r, w)
		}
	}
	fill()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if r := e.Step(ctx); r.Sampled != running {
			b.Fatalf("sampled %d", r.Sampled)
		}
		switch {
		case i%maxSteps == maxSteps-1:
			b.StopTimer()
			fill()
			b.StartTimer()
		case i%32 == 31:
			b.StopTimer()
			drainAll()
			b.StartTimer()
		}
	}
}
