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
		// Long prefills held to a threshold beside short ones, one long
		// prefill at a time, and the threshold off.
		{name: "long prefills beside short ones", opts: envOpts{numBlocks: 512, blockSize: 4, maxSeqs: 16, maxBatched: 32, maxQueue: 100, maxModelLen: 512, prefix: true, longPrefill: 8, maxPartial: 3, maxLongPartial: 1}, wantPrefixHit: true},
		{name: "long prefill threshold off", opts: envOpts{numBlocks: 512, blockSize: 4, maxSeqs: 16, maxBatched: 32, maxQueue: 100, maxModelLen: 512, prefix: true, longPrefill: -1}, wantPrefixHit: true},
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

// agentProgram is one program of the pause/resume workload: each step's
// prompt is the previous step's prompt and output plus a tool result.
type agentProgram struct {
	first    []int32
	tools    [][]int32
	maxToks  []int
	thinkFor []int // iterations the tool runs before the next step
}

func agentPrograms(n, steps int, seed uint64) []agentProgram {
	rng := rand.New(rand.NewPCG(seed, 7))
	system := prompt(12, seed+500)
	progs := make([]agentProgram, n)
	for i := range progs {
		p := &progs[i]
		p.first = append(append([]int32{}, system...), prompt(4+rng.IntN(30), seed+uint64(i))...)
		for s := range steps {
			p.tools = append(p.tools, prompt(1+rng.IntN(10), seed+uint64(1000*i+s)))
			p.maxToks = append(p.maxToks, 2+rng.IntN(16))
			p.thinkFor = append(p.thinkFor, 1+rng.IntN(25))
		}
	}
	return progs
}

func stepID(prog, step int) string { return fmt.Sprintf("p%02d/s%d", prog, step) }

// nextPrompt is the prompt of the step after one that had prompt p and
// produced out.
func (a *agentProgram) nextPrompt(p, out []int32, step int) []int32 {
	next := append(append(append([]int32{}, p...), out...), a.tools[step]...)
	return next
}

// runProgramsAlone runs each program's steps one after the other, each
// request on an engine of its own.
func runProgramsAlone(t *testing.T, progs []agentProgram, steps int) map[string]result {
	out := map[string]result{}
	for i := range progs {
		a := &progs[i]
		p := a.first
		for s := range steps {
			o := defaultOpts()
			o.numBlocks, o.maxSeqs, o.maxBatched = 512, 1, 512
			env := newEnv(t, o)
			st := mustSubmit(t, env.e, req(stepID(i, s), p, a.maxToks[s]))
			env.runUntilIdle(t, 1000)
			toks, text, f := collect(t, st)
			out[stepID(i, s)] = result{toks, text, f.FinishReason.String()}
			p = a.nextPrompt(p, toks, s)
		}
	}
	return out
}

// runProgramsTogether runs all programs on one engine. A program pauses
// after each step: its context is offloaded (OffloadPrefix) while its tool
// runs and other programs take the device blocks; on resume, every other
// program first restores its blocks (RestorePrefix), the rest find them on
// the host when their request is admitted.
func runProgramsTogether(t *testing.T, progs []agentProgram, steps int, o envOpts) (map[string]result, *testEnv) {
	env := newEnv(t, o)
	type state struct {
		step     int
		prompt   []int32
		stream   *Stream
		acc      result
		resumeAt int
	}
	sts := make([]state, len(progs))
	for i := range sts {
		sts[i] = state{prompt: progs[i].first, resumeAt: i % 5}
	}
	out := map[string]result{}
	for iter := 0; iter < 20000 && len(out) < len(progs)*steps; iter++ {
		for i := range sts {
			s := &sts[i]
			if s.stream != nil || s.step == steps || iter < s.resumeAt {
				continue
			}
			if i%2 == 0 {
				env.e.RestorePrefix(s.prompt)
			}
			s.stream = mustSubmit(t, env.e, req(stepID(i, s.step), s.prompt, progs[i].maxToks[s.step]))
			s.acc = result{}
		}
		env.step(t)
		for i := range sts {
			s := &sts[i]
			for s.stream != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
				c, err := s.stream.Next(ctx)
				cancel()
				if err != nil {
					break
				}
				s.acc.Tokens = append(s.acc.Tokens, c.TokenIDs...)
				s.acc.Text += string(c.Text)
				if !c.Done {
					continue
				}
				s.acc.Reason = c.FinishReason.String()
				out[stepID(i, s.step)] = s.acc
				s.stream = nil
				// Pause at the tool call: the context leaves the device.
				ctxTokens := append(append([]int32{}, s.prompt...), s.acc.Tokens...)
				env.e.OffloadPrefix(ctxTokens)
				s.prompt = progs[i].nextPrompt(s.prompt, s.acc.Tokens, s.step)
				s.resumeAt = iter + progs[i].thinkFor[s.step]
				s.step++
			}
		}
	}
	if len(out) != len(progs)*steps {
		t.Fatalf("%d of %d steps finished", len(out), len(progs)*steps)
	}
	if used := env.e.KV().Stats().Used; used != 0 {
		t.Errorf("%d blocks still used after all requests finished", used)
	}
	return out, env
}

// TestEquivalenceThroughHostTier: programs paused through the host tier (their
// KV copied out while they wait, copied back when they resume) produce
// exactly the tokens each step produces alone, from scratch. The test
// executor's KV really moves between its device and host slots, so a wrong
// copy, a copy in the wrong order or a restored block with the wrong
// contents changes the output.
func TestEquivalenceThroughHostTier(t *testing.T) {
	const steps = 3
	progs := agentPrograms(12, steps, 9)
	alone := runProgramsAlone(t, progs, steps)
	for _, tc := range []struct {
		name         string
		opts         envOpts
		wantHostHits bool
	}{
		{name: "device holds a few programs", opts: envOpts{numBlocks: 48, blockSize: 4, maxSeqs: 8, maxBatched: 32, maxQueue: 100, maxModelLen: 512, prefix: true, hostBlocks: 400}, wantHostHits: true},
		// Offloads evict each other: most restores come from RestorePrefix
		// right after the pause, few from admission.
		{name: "host tier smaller than the paused programs", opts: envOpts{numBlocks: 48, blockSize: 4, maxSeqs: 8, maxBatched: 32, maxQueue: 100, maxModelLen: 512, prefix: true, hostBlocks: 24}},
		{name: "logits, chunked prefill", opts: envOpts{numBlocks: 40, blockSize: 4, maxSeqs: 4, maxBatched: 8, maxQueue: 100, maxModelLen: 512, prefix: true, logits: true, hostBlocks: 200}, wantHostHits: true},
	} {
		// Serial copies; overlapping ones, all at once; two blocks each
		// way per iteration, so restores span many iterations.
		for _, budget := range []int{-1, 0, 2} {
			overlap := budget >= 0
			tc.opts.overlap, tc.opts.copyBudget = overlap, budget
			t.Run(fmt.Sprintf("%s, overlap=%v, budget=%d", tc.name, overlap, budget), func(t *testing.T) {
				together, env := runProgramsTogether(t, progs, steps, tc.opts)
				if diff := cmp.Diff(alone, together); diff != "" {
					t.Errorf("output through the host tier differs from solo output (-alone +together):\n%s", diff)
				}
				st := env.e.KV().Stats()
				if st.Offloaded == 0 || st.Restored == 0 || (tc.wantHostHits && st.HostHits == 0) || env.x.copiedIn == 0 || env.x.copiedOut == 0 {
					t.Errorf("host tier not exercised: %+v, executor copied %d out, %d in", st, env.x.copiedOut, env.x.copiedIn)
				}
				if overlap && env.x.overlapped == 0 {
					t.Errorf("no copy ran beside an iteration: %+v", st)
				}
				t.Logf("%+v; executor copied %d blocks out, %d in, %d of them beside an iteration", st, env.x.copiedOut, env.x.copiedIn, env.x.overlapped)
			})
		}
	}
}
