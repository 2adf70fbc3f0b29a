package engine

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

const testVocab = 64

type testEnv struct {
	e    *Engine
	x    *kvExec
	clk  *clock.Virtual
	obs  *recorder
	opts envOpts
}

type envOpts struct {
	numBlocks, blockSize, maxSeqs, maxBatched, maxQueue, maxModelLen int
	prefix                                                           bool
	logits                                                           bool
	hostBlocks                                                       int
	dropEvicted                                                      bool
	// overlap: the executor overlaps copies with iterations (overlapExec),
	// copyBudget blocks each way per iteration (0: no limit).
	overlap    bool
	copyBudget int
	timeout    time.Duration
	logger     *slog.Logger
	// longPrefill, maxPartial and maxLongPartial are the Config's
	// LongPrefillTokenThreshold, MaxNumPartialPrefills and
	// MaxLongPartialPrefills (0: their defaults).
	longPrefill, maxPartial, maxLongPartial int
}

func defaultOpts() envOpts {
	return envOpts{numBlocks: 256, blockSize: 4, maxSeqs: 16, maxBatched: 64, maxQueue: 1000, maxModelLen: 512, prefix: true}
}

func newEnv(t testing.TB, o envOpts) *testEnv {
	t.Helper()
	x := newKVExec(o.numBlocks, o.blockSize, testVocab)
	x.logits = o.logits
	clk := clock.NewVirtual(time.Unix(1_700_000_000, 0))
	obs := &recorder{}
	var exec batch.Executor = x
	if o.overlap {
		exec = overlapExec{x, o.copyBudget}
	}
	e, err := New(Config{
		MaxNumSeqs: o.maxSeqs, MaxNumBatchedTokens: o.maxBatched, MaxQueue: o.maxQueue,
		MaxModelLen: o.maxModelLen, VocabSize: testVocab,
		KV: kvcache.Config{NumBlocks: o.numBlocks, BlockSize: o.blockSize, EnablePrefixCache: o.prefix, HostBlocks: o.hostBlocks,
			DropEvicted: o.dropEvicted},
		EOS: []int32{x.eos}, Decoder: letters{eos: x.eos}, Clock: clk, Observer: obs,
		IterationTimeout: o.timeout, Logger: o.logger,
		LongPrefillTokenThreshold: o.longPrefill, MaxNumPartialPrefills: o.maxPartial, MaxLongPartialPrefills: o.maxLongPartial,
	}, exec)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{e: e, x: x, clk: clk, obs: obs, opts: o}
}

// step runs one iteration and checks the invariants that must hold after
// every iteration.
func (env *testEnv) step(t testing.TB) StepResult {
	t.Helper()
	env.clk.Advance(time.Millisecond)
	r := env.e.Step(context.Background())
	if err := env.e.KV().CheckInvariants(); err != nil {
		t.Fatalf("after step: %v", err)
	}
	if env.x.checkErr != nil {
		t.Fatalf("executor saw: %v", env.x.checkErr)
	}
	return r
}

// runUntilIdle steps until nothing is running or waiting.
func (env *testEnv) runUntilIdle(t testing.TB, maxSteps int) {
	t.Helper()
	for range maxSteps {
		if run, wait := env.e.Pending(); run == 0 && wait == 0 {
			return
		}
		env.step(t)
	}
	run, wait := env.e.Pending()
	t.Fatalf("not idle after %d steps: %d running, %d waiting", maxSteps, run, wait)
}

func prompt(n int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 7))
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(r.IntN(testVocab - 1))
	}
	return p
}

func req(id string, p []int32, maxTokens int) *Request {
	return &Request{ID: id, Prompt: p, Params: Params{MaxTokens: maxTokens}, Priority: PriorityNormal}
}

func mustSubmit(t testing.TB, e *Engine, r *Request) *Stream {
	t.Helper()
	s, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatalf("submit %s: %v", r.ID, err)
	}
	return s
}

func collect(t testing.TB, s *Stream) ([]int32, string, Chunk) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	toks, text, final, err := s.Wait(ctx)
	if err != nil {
		t.Fatalf("stream %s: %v", s.ID(), err)
	}
	return toks, text, final
}

func TestSubmitRejectsRequestsThatCanNeverRun(t *testing.T) {
	env := newEnv(t, envOpts{numBlocks: 8, blockSize: 4, maxSeqs: 4, maxBatched: 32, maxQueue: 10, maxModelLen: 64})
	cases := []struct {
		name  string
		r     *Request
		field string
	}{
		{"empty prompt", req("a", nil, 4), "prompt"},
		{"zero max tokens", req("a", prompt(3, 1), 0), "max_tokens"},
		{"beyond context", req("a", prompt(40, 1), 30), "max_tokens"},
		{"beyond whole KV cache", req("a", prompt(20, 1), 20), "max_tokens"},
		{"token outside vocab", req("a", []int32{1, testVocab}, 2), "prompt"},
		{"negative temperature", &Request{Prompt: []int32{1}, Params: Params{MaxTokens: 1, Temperature: -1}}, "temperature"},
		{"top_p above 1", &Request{Prompt: []int32{1}, Params: Params{MaxTokens: 1, TopP: 1.5}}, "top_p"},
		{"min above max", &Request{Prompt: []int32{1}, Params: Params{MaxTokens: 1, MinTokens: 2}}, "min_tokens"},
		{"empty stop string", &Request{Prompt: []int32{1}, Params: Params{MaxTokens: 1, Stop: []string{""}}}, "stop"},
		{"unknown priority", &Request{Prompt: []int32{1}, Params: Params{MaxTokens: 1}, Priority: 7}, "priority"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.e.Submit(context.Background(), tc.r)
			var ie *InvalidRequestError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want *InvalidRequestError", err)
			}
			if ie.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", ie.Field, tc.field, err)
			}
		})
	}
	if _, w := env.e.Pending(); w != 0 {
		t.Errorf("%d rejected requests were queued", w)
	}
}

func TestQueueFull(t *testing.T) {
	o := defaultOpts()
	o.maxQueue = 3
	env := newEnv(t, o)
	for i := range 3 {
		mustSubmit(t, env.e, req("ok", prompt(4, uint64(i)), 4))
	}
	_, err := env.e.Submit(context.Background(), req("over", prompt(4, 9), 4))
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("got %v, want ErrQueueFull", err)
	}
	env.step(t) // admits the three
	if _, err := env.e.Submit(context.Background(), req("again", prompt(4, 9), 4)); err != nil {
		t.Fatalf("after admission the queue has room: %v", err)
	}
}

func TestChunkedPrefillRespectsTokenBudget(t *testing.T) {
	o := defaultOpts()
	o.maxBatched = 16
	env := newEnv(t, o)
	env.x.eosMod = 0
	long := mustSubmit(t, env.e, req("long", prompt(100, 1), 3))
	var steps, sampledAt int
	for steps = 1; steps < 20; steps++ {
		r := env.step(t)
		if r.Tokens > 16 {
			t.Fatalf("step %d processed %d tokens, budget 16", steps, r.Tokens)
		}
		if r.Sampled > 0 && sampledAt == 0 {
			sampledAt = steps
		}
		if run, _ := env.e.Pending(); run == 0 {
			break
		}
	}
	if sampledAt != 7 { // ceil(100/16) chunks, the last one samples
		t.Errorf("first token after %d steps, want 7", sampledAt)
	}
	toks, _, final := collect(t, long)
	if len(toks) != 3 || final.FinishReason != completion.Length {
		t.Errorf("got %d tokens, reason %v", len(toks), final.FinishReason)
	}
}

func TestPriorityOrderWithOneSlot(t *testing.T) {
	o := defaultOpts()
	o.maxSeqs = 1
	env := newEnv(t, o)
	env.x.eosMod = 0
	var order []string
	streams := map[string]*Stream{}
	for _, p := range []Priority{PriorityLow, PriorityNormal, PriorityHigh, PriorityNormal} {
		r := req(p.String()+"-"+string(rune('0'+len(streams))), prompt(3, uint64(len(streams))), 2)
		r.Priority = p
		streams[r.ID] = mustSubmit(t, env.e, r)
	}
	done := map[string]bool{}
	for range 50 {
		env.step(t)
		for id, s := range streams {
			if done[id] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			for {
				c, err := s.Next(ctx)
				if err != nil {
					break
				}
				if c.Done {
					done[id] = true
					order = append(order, id)
					break
				}
			}
			cancel()
		}
	}
	want := []string{"high-2", "normal-1", "normal-3", "low-0"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("completion order (-want +got):\n%s", diff)
	}
}

func TestAgingLetsLowPriorityOvertake(t *testing.T) {
	o := defaultOpts()
	o.maxSeqs = 1
	env := newEnv(t, o)
	env.x.eosMod = 0
	// Occupy the only slot so the others wait.
	busy := mustSubmit(t, env.e, req("busy", prompt(2, 1), 3))
	env.step(t)
	low := req("low", prompt(2, 2), 1)
	low.Priority = PriorityLow
	lowS := mustSubmit(t, env.e, low)
	env.clk.Advance(30 * time.Second) // 0.1 levels/s × 30 s = 3 levels: beats a fresh high
	high := req("high", prompt(2, 3), 1)
	high.Priority = PriorityHigh
	highS := mustSubmit(t, env.e, high)
	env.runUntilIdle(t, 50)
	collect(t, busy)
	_, _, lf := collect(t, lowS)
	_, _, hf := collect(t, highS)
	if lf.Usage.CompletionTokens != 1 || hf.Usage.CompletionTokens != 1 {
		t.Fatal("both should finish")
	}
	if !lowS.seq.t.firstTok.Before(highS.seq.t.firstTok) {
		t.Errorf("aged low request should run before the new high one")
	}
}

func TestCancelFreesBlocksWithinOneIteration(t *testing.T) {
	env := newEnv(t, defaultOpts())
	env.x.eosMod = 0
	s := mustSubmit(t, env.e, req("c", prompt(30, 1), 100))
	for range 3 {
		env.step(t)
	}
	if env.e.KV().Stats().Used == 0 {
		t.Fatal("running request should hold blocks")
	}
	s.Cancel()
	env.step(t)
	if used := env.e.KV().Stats().Used; used != 0 {
		t.Fatalf("%d blocks still used one iteration after cancel", used)
	}
	toks, _, final := collect(t, s)
	if final.FinishReason != completion.Cancelled {
		t.Errorf("reason %v, want cancelled", final.FinishReason)
	}
	if final.Usage.CompletionTokens != len(toks) {
		t.Errorf("usage %d tokens, stream %d", final.Usage.CompletionTokens, len(toks))
	}
}

func TestCancelWhileWaitingAndByContext(t *testing.T) {
	env := newEnv(t, defaultOpts())
	s := mustSubmit(t, env.e, req("w", prompt(4, 1), 4))
	s.Cancel()
	_, _, final := collect(t, s)
	if final.FinishReason != completion.Cancelled {
		t.Errorf("reason %v", final.FinishReason)
	}
	if _, w := env.e.Pending(); w != 0 {
		t.Errorf("cancelled request still queued")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s2, err := env.e.Submit(ctx, req("ctx", prompt(4, 2), 50))
	if err != nil {
		t.Fatal(err)
	}
	env.step(t)
	cancel()
	// The context's watcher goroutine marks the stream.
	poll.Until(t, 5*time.Second, "the cancelled request's stream marked", s2.cancelled.Load)
	env.step(t)
	if used := env.e.KV().Stats().Used; used != 0 {
		t.Fatalf("%d blocks used after context cancel", used)
	}
	_, _, f2 := collect(t, s2)
	if f2.FinishReason != completion.Cancelled {
		t.Errorf("reason %v", f2.FinishReason)
	}
}

func TestExecutorErrorFailsBatchAndLoopGoesOn(t *testing.T) {
	env := newEnv(t, defaultOpts())
	env.x.eosMod = 0
	env.x.failOn = map[int]bool{2: true}
	a := mustSubmit(t, env.e, req("a", prompt(5, 1), 5))
	env.step(t) // call 1
	b := mustSubmit(t, env.e, req("b", prompt(5, 2), 5))
	r := env.step(t) // call 2 fails: a and b
	if r.Err == nil {
		t.Fatal("step should report the executor error")
	}
	c := mustSubmit(t, env.e, req("c", prompt(5, 3), 5))
	env.runUntilIdle(t, 50)
	for _, s := range []*Stream{a, b} {
		_, _, f := collect(t, s)
		if f.FinishReason != completion.Error || f.Err == nil {
			t.Errorf("%s: reason %v err %v, want error", s.ID(), f.FinishReason, f.Err)
		}
	}
	toks, _, f := collect(t, c)
	if f.FinishReason != completion.Length || len(toks) != 5 {
		t.Errorf("c after the failure: %v %d tokens", f.FinishReason, len(toks))
	}
	if used := env.e.KV().Stats().Used; used != 0 {
		t.Errorf("%d blocks leaked", used)
	}
}

func TestStopStringsAndText(t *testing.T) {
	env := newEnv(t, defaultOpts())
	env.x.eosMod = 0
	// Run once to learn the text, then stop on a piece of it.
	s := mustSubmit(t, env.e, req("learn", prompt(6, 11), 30))
	env.runUntilIdle(t, 100)
	_, text, _ := collect(t, s)
	if len(text) != 30 {
		t.Fatalf("text %q", text)
	}
	stop := text[10:13]
	r := req("stop", prompt(6, 11), 30)
	r.Params.Stop = []string{stop}
	s2 := mustSubmit(t, env.e, r)
	env.runUntilIdle(t, 100)
	_, text2, f := collect(t, s2)
	want := text[:strings.Index(text, stop)]
	if text2 != want || f.FinishReason != completion.Stop || f.StopMatched != stop {
		t.Errorf("got %q (%v, %q), want %q truncated before %q", text2, f.FinishReason, f.StopMatched, want, stop)
	}
}

func TestMinTokensMasksEOSInSampler(t *testing.T) {
	o := defaultOpts()
	o.logits = true
	env := newEnv(t, o)
	env.x.eosMod = 1 // the executor wants EOS at every step
	r := req("min", prompt(4, 1), 10)
	r.Params.MinTokens = 5
	s := mustSubmit(t, env.e, r)
	env.runUntilIdle(t, 50)
	toks, _, f := collect(t, s)
	if len(toks) != 6 || toks[5] != env.x.eos || f.FinishReason != completion.Stop {
		t.Errorf("tokens %v reason %v: want 5 non-EOS then EOS", toks, f.FinishReason)
	}
}
