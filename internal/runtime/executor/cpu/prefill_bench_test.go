package cpu

import (
	"context"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// firstTokens records each finished request's time to first token by ID.
type firstTokens map[string]time.Duration

func (firstTokens) CacheConfig(int, int)             {}
func (firstTokens) Iteration(*engine.IterationStats) {}
func (f firstTokens) RequestFinished(st *engine.RequestStats) {
	f[st.ID] = st.FirstToken.Sub(st.Arrival)
}

// BenchmarkShortBesideLongPrefill is the engine's benchmark of that name
// (internal/scheduler/engine, on the sim executor) at a small scale on this
// executor, in wall-clock time: the built-in tiny model, a 1,950-token
// prompt, a 144-token request arriving with it (together) or when it is
// half done (mid), 128 tokens an iteration: the sim's 31,178 and 2,303
// tokens at 2,048 scaled by 1/16. It reports the short request's TTFT beside
// the long prefill over its TTFT alone, each the fastest of b.N runs (use
// -benchtime=5x or more), and the long one's over its own alone.
func BenchmarkShortBesideLongPrefill(b *testing.B) {
	const long, short, budget = 1_950, 144, 128
	m, err := model.Builtin("tiny")
	if err != nil {
		b.Fatal(err)
	}
	run := func(threshold, longLen, shortLen, arriveAfter int) firstTokens {
		const blockSize = 16
		blocks := 2 * m.Config.ContextLen / blockSize
		x, err := New(m, blocks, blockSize, Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer x.Close()
		obs := firstTokens{}
		e, err := engine.New(engine.Config{
			MaxNumSeqs: 16, MaxNumBatchedTokens: budget, MaxModelLen: m.Config.ContextLen, VocabSize: m.Config.VocabSize,
			LongPrefillTokenThreshold: threshold,
			KV:                        kvcache.Config{NumBlocks: blocks, BlockSize: blockSize, EnablePrefixCache: true},
			EOS:                       m.Config.EOS, Decoder: m.Tokenizer, Observer: obs,
		}, x)
		if err != nil {
			b.Fatal(err)
		}
		submit := func(id string, n, seed int) {
			p := make([]int32, n)
			for i := range p {
				p[i] = int32(32 + (i*seed+i/7)%200)
			}
			if _, err := e.Submit(context.Background(), &engine.Request{ID: id, Prompt: p, Params: engine.Params{MaxTokens: 4, IgnoreEOS: true}}); err != nil {
				b.Fatal(err)
			}
		}
		if longLen > 0 {
			submit("long", longLen, 7)
		}
		for i := 0; ; i++ {
			if i == arriveAfter && shortLen > 0 {
				submit("short", shortLen, 13)
			}
			if r, w := e.Pending(); r == 0 && w == 0 && i >= arriveAfter {
				return obs
			}
			e.Step(context.Background())
		}
	}
	mid := long / budget / 2
	for _, arm := range []struct {
		name      string
		threshold int
	}{
		{name: "threshold off", threshold: -1},
		{name: "default (a quarter of the budget)"},
	} {
		b.Run(arm.name, func(b *testing.B) {
			best := map[string]time.Duration{}
			keep := func(name string, d time.Duration) {
				if old, ok := best[name]; !ok || d < old {
					best[name] = d
				}
			}
			for range b.N {
				keep("short alone", run(arm.threshold, 0, short, 0)["short"])
				keep("long alone", run(arm.threshold, long, 0, 0)["long"])
				together := run(arm.threshold, long, short, 0)
				keep("short together", together["short"])
				keep("long together", together["long"])
				keep("short mid", run(arm.threshold, long, short, mid)["short"])
			}
			ratio := func(a, b string) float64 { return float64(best[a]) / float64(best[b]) }
			b.ReportMetric(ratio("short together", "short alone"), "short-x-together")
			b.ReportMetric(ratio("short mid", "short alone"), "short-x-mid")
			b.ReportMetric(ratio("long together", "long alone"), "long-x-together")
			b.ReportMetric(best["short alone"].Seconds()*1000, "short-alone-ms")
			b.ReportMetric(best["long alone"].Seconds()*1000, "long-alone-ms")
		})
	}
}
