package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// workItem is one request of the equivalence workload.
type workItem struct {
	r      *Request
	arrive int // iteration at which it is submitted
}

// workload builds n requests of varied lengths, priorities and arrival
// times; a third share a common prefix so the prefix cache is exercised.
func workload(n int, seed uint64) []workItem {
	rng := rand.New(rand.NewPCG(seed, 1))
	shared := prompt(24, seed+1000)
	items := make([]workItem, n)
	for i := range items {
		p := prompt(1+rng.IntN(60), seed+uint64(i))
		if i%3 == 0 {
			p = append(append([]int32{}, shared...), p[:rng.IntN(len(p))]...)
		}
		r := req(fmt.Sprintf("r%02d", i), p, 1+rng.IntN(40))
		r.Priority = Priority(rng.IntN(3))
		r.Params.IgnoreEOS = i%5 == 0
		items[i] = workItem{r: r, arrive: rng.IntN(30)}
	}
	return items
}

type result struct {
	Tokens []int32
	Text   string
	Reason string
}

// runAlone serves each request on an engine of its own with ample KV.
func runAlone(t *testing.T, items []workItem, logits bool) map[string]result {
	out := map[string]result{}
	for _, it := range items {
		o := defaultOpts()
		o.numBlocks, o.maxSeqs, o.maxBatched, o.logits = 512, 1, 512, logits
		env := newEnv(t, o)
		s := mustSubmit(t, env.e, it.r)
		env.runUntilIdle(t, 1000)
		toks, text, f := collect(t, s)
		out[it.r.ID] = result{toks, text, f.FinishReason.String()}
	}
	return out
}

// runTogether serves all requests on one engine, submitting each at its
// arrival iteration, and drains streams as a server would.
func runTogether(t *testing.T, items []workItem, o envOpts) (map[string]result, *testEnv) {
	env := newEnv(t, o)
	streams := map[string]*Stream{}
	acc := map[string]*result{}
	next := 0
	for iter := 0; iter < 5000; iter++ {
		for _, it := range items {
			if it.arrive == iter {
				streams[it.r.ID] = mustSubmit(t, env.e, it.r)
				acc[it.r.ID] = &result{}
			}
		}
		if iter >= 30 {
			if run, wait := env.e.Pending(); run == 0 && wait == 0 {
				break
			}
		}
		env.step(t)
		for id, s := range streams {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
				c, err := s.Next(ctx)
				cancel()
				if err != nil {
					break
				}
				acc[id].Tokens = append(acc[id].Tokens, c.TokenIDs...)
				acc[id].Text += string(c.Text)
				if c.Done {
					acc[id].Reason = c.FinishReason.String()
					next++
				}
			}
		}
	}
	if next != len(items) {
		t.Fatalf("%d of %d requests finished", next, len(items))
	}
	out := map[string]result{}
	for id, r := range acc {
		out[id] = *r
	}
	if used := env.e.KV().Stats().Used; used != 0 {
		t.Errorf("%d blocks still used after all requests finished", used)
	}
	return out, env
}

// TestContinuousBatchingEquivalence is the property that defines continuous
// batching: requests batched together, admitted at step boundaries, prefilled
// in chunks, preempted and recomputed, and sharing prefix-cache blocks
// produce exactly the tokens each produces alone.
func TestContinuousBatchingEquivalence(t *testing.T) {
	items := workload(40, 42)
	for _, tc := range []struct {
		name          string
		opts          envOpts
		logits        bool
		wantPreempt   bool
		wantPrefixHit bool
	}{
		{name: "ample cache", opts: envOpts{numBlocks: 512, blockSize: 4, maxSeqs: 16, maxBatched: 64, maxQueue: 100, maxModelLen: 512, prefix: true}, wantPrefixHit: true},
		{name: "preemption pressure", opts: envOpts{numBlocks: 40, blockSize: 4, maxSeqs: 16, maxBatched: 32, maxQueue: 100, maxModelLen: 512, prefix: true}, wantPreempt: true},
		{name: "no prefix cache, tiny budget", opts: envOpts{numBlocks: 64, blockSize: 8, maxSeqs: 4, maxBatched: 8, maxQueue: 100, maxModelLen: 512}},
		{name: "logits and sampler", opts: envOpts{numBlocks: 48, blockSize: 4, maxSeqs: 8, maxBatched: 24, maxQueue: 100, maxModelLen: 512, prefix: true, logits: true}, logits: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alone := runAlone(t, items, tc.logits)
			together, env := runTogether(t, items, tc.opts)
			if diff := cmp.Diff(alone, together); diff != "" {
				t.Errorf("batched output differs from solo output (-alone +together):\n%s", diff)
			}
			preempted, hits := env.obs.preempts, env.obs.last.KV.Hits
			if tc.wantPreempt && preempted == 0 {
				t.Errorf("expected preemptions under a %d-block cache", tc.opts.numBlocks)
			}
			if tc.wantPrefixHit && hits == 0 {
				t.Errorf("expected prefix-cache hits")
			}
			t.Logf("preemptions %d, prefix hit tokens %d", preempted, hits)
		})
	}
}
