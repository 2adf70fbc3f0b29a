package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
)

// recorder is an Observer that keeps totals and every finished request.
type recorder struct {
	blockSize, numBlocks, configCalls int

	iterations, executed                    int
	tokens, promptTokens, sampled, preempts int
	finishedInIterations                    int
	ttft, itl                               []time.Duration
	last                                    IterationStats
	requests                                []RequestStats
}

var _ Observer = (*recorder)(nil)

func (r *recorder) CacheConfig(blockSize, numBlocks int) {
	r.blockSize, r.numBlocks = blockSize, numBlocks
	r.configCalls++
}

func (r *recorder) Iteration(st *IterationStats) {
	r.iterations++
	if st.Scheduled > 0 {
		r.executed++
	}
	r.tokens += st.Tokens
	r.promptTokens += st.PromptTokens
	r.sampled += st.Sampled
	r.preempts += st.Preempted
	r.finishedInIterations += st.Finished
	r.ttft = append(r.ttft, st.TimeToFirstToken...)
	r.itl = append(r.itl, st.InterTokenLatency...)
	r.last = *st
	r.last.TimeToFirstToken, r.last.InterTokenLatency = nil, nil
}

func (r *recorder) RequestFinished(st *RequestStats) { r.requests = append(r.requests, *st) }

// TestObserverSeesIterationsAndRequests checks every field the observer is
// handed against a run whose timing is fixed by the virtual clock (each
// step advances it 1 ms).
func TestObserverSeesIterationsAndRequests(t *testing.T) {
	env := newEnv(t, defaultOpts())
	rec := env.obs
	env.x.eosMod = 0
	if rec.configCalls != 1 || rec.blockSize != 4 || rec.numBlocks != 256 {
		t.Fatalf("CacheConfig: %d calls, block size %d, blocks %d; want 1, 4, 256", rec.configCalls, rec.blockSize, rec.numBlocks)
	}
	start := env.clk.Now()
	p := prompt(20, 1)
	a := req("a", p, 3)
	a.ProgramID = "prog"
	mustSubmit(t, env.e, a)
	env.runUntilIdle(t, 50)
	mustSubmit(t, env.e, req("b", p, 3)) // prefix hit: 16 of 20 tokens
	env.runUntilIdle(t, 50)

	if rec.sampled != 6 || rec.promptTokens != 40 || rec.executed != 6 {
		t.Errorf("sampled %d, prompt tokens %d, executed iterations %d; want 6, 40, 6", rec.sampled, rec.promptTokens, rec.executed)
	}
	ms := time.Millisecond
	if diff := cmp.Diff([]time.Duration{ms, ms}, rec.ttft); diff != "" {
		t.Errorf("TTFT (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{ms, ms, ms, ms}, rec.itl); diff != "" {
		t.Errorf("inter-token latency (-want +got):\n%s", diff)
	}
	if rec.last.Running != 0 || rec.last.Waiting != 0 || rec.last.KV.Hits != 16 {
		t.Errorf("last snapshot %+v: want nothing running or waiting and 16 prefix-hit tokens", rec.last)
	}
	at := func(steps int) time.Time { return start.Add(time.Duration(steps) * ms) }
	want := []RequestStats{
		{ID: "a", ProgramID: "prog", FinishReason: completion.Length, PromptTokens: 20, GenerationTokens: 3, MaxTokens: 3,
			Arrival: start, Scheduled: at(1), FirstToken: at(1), LastToken: at(3), Finished: at(3)},
		{ID: "b", FinishReason: completion.Length, PromptTokens: 20, GenerationTokens: 3, CachedTokens: 16, MaxTokens: 3,
			Arrival: at(3), Scheduled: at(4), FirstToken: at(4), LastToken: at(6), Finished: at(6)},
	}
	if diff := cmp.Diff(want, rec.requests); diff != "" {
		t.Errorf("finished requests (-want +got):\n%s", diff)
	}
}

// TestObserverSeesCancelledWaitingRequest: a request cancelled before it
// ever ran is reported once, with no scheduled or token times.
func TestObserverSeesCancelledWaitingRequest(t *testing.T) {
	env := newEnv(t, defaultOpts())
	s := mustSubmit(t, env.e, req("gone", prompt(8, 1), 4))
	s.Cancel()
	env.step(t)
	if len(env.obs.requests) != 1 {
		t.Fatalf("%d finished requests reported, want 1", len(env.obs.requests))
	}
	got := env.obs.requests[0]
	if got.FinishReason != completion.Cancelled || !got.Scheduled.IsZero() || !got.FirstToken.IsZero() || got.Finished.IsZero() {
		t.Errorf("cancelled request stats %+v", got)
	}
	if env.obs.iterations == 0 || env.obs.last.Waiting != 0 {
		t.Errorf("an idle step must still publish a snapshot: %d iterations, last %+v", env.obs.iterations, env.obs.last)
	}
}

// TestObserverIterationCountsMatchStepResults: under preemption pressure
// the observer's totals equal what the steps returned (preemptions happen
// in planning and are reported even by an iteration that ran nothing).
func TestObserverIterationCountsMatchStepResults(t *testing.T) {
	o := defaultOpts()
	o.numBlocks, o.maxBatched = 12, 16
	env := newEnv(t, o)
	env.x.eosMod = 0
	for i := range 6 {
		mustSubmit(t, env.e, req(string(rune('a'+i)), prompt(6, uint64(i+1)), 10))
	}
	var preempted, sampled, finished int
	for range 400 {
		r := env.step(t)
		preempted += r.Preempted
		sampled += r.Sampled
		finished += r.Finished
		if run, wait := env.e.Pending(); run == 0 && wait == 0 {
			break
		}
	}
	if preempted == 0 {
		t.Fatal("the workload was meant to preempt")
	}
	if env.obs.preempts != preempted || env.obs.sampled != sampled || env.obs.finishedInIterations != finished {
		t.Errorf("observer saw preempted %d sampled %d finished %d; steps returned %d, %d, %d",
			env.obs.preempts, env.obs.sampled, env.obs.finishedInIterations, preempted, sampled, finished)
	}
	if len(env.obs.requests) != 6 {
		t.Errorf("%d requests reported finished, want 6", len(env.obs.requests))
	}
}
