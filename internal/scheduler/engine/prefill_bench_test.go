package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// ttfts records each finished request's time to first token by ID.
type ttfts map[string]time.Duration

func (ttfts) CacheConfig(int, int)      {}
func (ttfts) Iteration(*IterationStats) {}
func (t ttfts) RequestFinished(st *RequestStats) {
	t[st.ID] = st.FirstToken.Sub(st.Arrival)
}

// beside is one run of the long-prefill scenario on the sim executor.
type beside struct {
	threshold, partial, longPartial int
	// long and short are the prompt lengths (0: no such request); the
	// short one arrives when the long one has run arriveAfter iterations.
	long, short, arriveAfter int
	// every: another short request arrives every this many iterations
	// while the long one prefills (0: none).
	every int
}

// run serves the scenario through the engine on a simulated H100 running
// llama-3.1-8b in virtual time and returns the requests' TTFTs.
func (sc beside) run(tb testing.TB) ttfts {
	acc, err := sim.LookupAccelerator("H100-SXM")
	if err != nil {
		tb.Fatal(err)
	}
	geo, err := sim.LookupGeometry("llama-3.1-8b")
	if err != nil {
		tb.Fatal(err)
	}
	const blockSize = 16
	blocks, err := sim.KVBlocksForDevice(acc, geo, 1, 0.9, blockSize)
	if err != nil {
		tb.Fatal(err)
	}
	clk := clock.NewVirtual(time.Unix(0, 0))
	x, err := sim.New(sim.Options{Accelerator: acc, Geometry: geo, Virtual: clk})
	if err != nil {
		tb.Fatal(err)
	}
	obs := ttfts{}
	e, err := New(Config{
		MaxNumSeqs: 256, MaxNumBatchedTokens: 2048, MaxModelLen: 65536,
		LongPrefillTokenThreshold: sc.threshold, MaxNumPartialPrefills: sc.partial, MaxLongPartialPrefills: sc.longPartial,
		KV:  kvcache.Config{NumBlocks: blocks, BlockSize: blockSize, EnablePrefixCache: true},
		EOS: []int32{x.EOS()}, Decoder: x.Vocabulary(), Clock: clk, Observer: obs,
	}, x)
	if err != nil {
		tb.Fatal(err)
	}
	submit := func(id string, n int, seed uint64) *Stream {
		p := make([]int32, n)
		for i := range p {
			seed = seed*6364136223846793005 + 1442695040888963407
			p[i] = int32((seed >> 33) % uint64(x.Vocabulary().Size()-1))
		}
		st, err := e.Submit(context.Background(), &Request{ID: id, Prompt: p, Params: Params{MaxTokens: 8, IgnoreEOS: true}})
		if err != nil {
			tb.Fatal(err)
		}
		return st
	}
	var longSt *Stream
	if sc.long > 0 {
		longSt = submit("long", sc.long, 1)
	}
	for i := 0; ; i++ {
		if i == sc.arriveAfter && sc.short > 0 {
			submit("short", sc.short, 2)
		}
		if sc.every > 0 && i%sc.every == 0 && longSt != nil && produced(e, longSt) == 0 {
			submit(fmt.Sprintf("bg%d", i), sc.short, uint64(3+i))
		}
		if r, w := e.Pending(); r == 0 && w == 0 && i >= sc.arriveAfter {
			break
		}
		if i == 10_000 {
			tb.Fatal("not done after 10,000 iterations")
		}
		e.Step(context.Background())
	}
	return obs
}

// BenchmarkShortBesideLongPrefill: opencode sends a 2,303-token title
// request beside its 31,178-token first turn. On a simulated H100 with
// llama-3.1-8b (virtual time, so the numbers are deterministic) it reports
// the title's time to first token beside the long prefill over its time
// alone, arriving with the long prompt (title-x-together) and when the long
// one is half done (title-x-mid); the same for a 300-token request
// (small-x-*); and what it costs the long prompt: its TTFT over its time
// alone beside the title (long-x-title) and beside a 300-token request
// arriving every iteration until its first token (long-x-stream). Arms are
// settings of the long-prefill threshold, by name; "default" is what a zero
// Config takes.
func BenchmarkShortBesideLongPrefill(b *testing.B) {
	const long, title, small = 31_178, 2_303, 300
	mid := long / 2048 / 2 // iterations: half of the long prompt at the full budget
	arms := []struct {
		name                            string
		threshold, partial, longPartial int
	}{
		{name: "threshold off", threshold: -1},
		{name: "threshold 256", threshold: 256},
		{name: "default (threshold 512)"},
		{name: "threshold 1024", threshold: 1024},
		{name: "default, one long prefill at a time", longPartial: 1},
	}
	for _, arm := range arms {
		b.Run(arm.name, func(b *testing.B) {
			sc := beside{threshold: arm.threshold, partial: arm.partial, longPartial: arm.longPartial}
			with := func(long, short, arriveAfter, every int) ttfts {
				r := sc
				r.long, r.short, r.arriveAfter, r.every = long, short, arriveAfter, every
				return r.run(b)
			}
			m := map[string]float64{}
			for range b.N {
				longAlone := with(long, 0, 0, 0)["long"]
				for _, short := range []struct {
					name string
					n    int
				}{{"title", title}, {"small", small}} {
					alone := with(0, short.n, 0, 0)["short"]
					together := with(long, short.n, 0, 0)
					m[short.name+"-x-together"] = float64(together["short"]) / float64(alone)
					m[short.name+"-x-mid"] = float64(with(long, short.n, mid, 0)["short"]) / float64(alone)
					if short.n == title {
						m["long-x-title"] = float64(together["long"]) / float64(longAlone)
					}
				}
				m["long-x-stream"] = float64(with(long, small, 0, 1)["long"]) / float64(longAlone)
			}
			for unit, v := range m {
				b.ReportMetric(v, unit)
			}
		})
	}
}
