package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

func TestStartTwiceAndSubmitAfterStop(t *testing.T) {
	env := newEnv(t, defaultOpts())
	ctx := context.Background()
	if err := env.e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.e.Start(ctx); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Start: %v, want ErrAlreadyRunning", err)
	}
	if err := env.e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := env.e.Submit(ctx, req("late", prompt(3, 1), 2)); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("submit after stop: %v", err)
	}
}

func TestLoopServesAndStopDrains(t *testing.T) {
	o := defaultOpts()
	o.maxSeqs = 4
	env := newEnv(t, o)
	env.x.eosMod = 0
	env.e.cfg.WarmupIterations = 2
	ctx := context.Background()
	if err := env.e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if env.x.calls != 2 {
		t.Errorf("warmup ran %d executor calls, want 2", env.x.calls)
	}
	var streams []*Stream
	for i := range 10 {
		streams = append(streams, mustSubmit(t, env.e, req("r", prompt(5, uint64(i)), 20)))
	}
	stopped := make(chan error, 1)
	go func() { stopped <- env.e.Stop(context.Background()) }()
	// While draining, new work is refused (once Stop, on its goroutine,
	// has begun the drain).
	poll.Until(t, 5*time.Second, "submit refused while draining", func() bool {
		_, err := env.e.Submit(ctx, req("x", prompt(3, 1), 2))
		return errors.Is(err, ErrDraining) || errors.Is(err, ErrNotRunning)
	})
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, s := range streams {
		toks, _, f := collect(t, s)
		if f.FinishReason != completion.Length || len(toks) != 20 {
			t.Errorf("drained request: %v, %d tokens", f.FinishReason, len(toks))
		}
	}
}

func TestStopDeadlineAbortsWhatIsLeft(t *testing.T) {
	env := newEnv(t, defaultOpts())
	env.x.block = make(chan struct{}) // the executor hangs until cancelled
	if err := env.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := mustSubmit(t, env.e, req("stuck", prompt(5, 1), 20))
	w := mustSubmit(t, env.e, req("waiting", prompt(5, 2), 20))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := env.e.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v, want deadline exceeded", err)
	}
	for _, st := range []*Stream{s, w} {
		_, _, f := collect(t, st)
		if f.FinishReason != completion.Cancelled || !errors.Is(f.Err, ErrStopped) {
			t.Errorf("%s: reason %v err %v: want cancelled with ErrStopped", st.ID(), f.FinishReason, f.Err)
		}
	}
	if used := env.e.KV().Stats().Used; used != 0 {
		t.Errorf("%d blocks leaked after abort", used)
	}
}

func TestIterationTimeoutFailsTheBatch(t *testing.T) {
	o := defaultOpts()
	o.timeout = 20 * time.Millisecond
	env := newEnv(t, o)
	env.x.block = make(chan struct{})
	s := mustSubmit(t, env.e, req("slow", prompt(5, 1), 5))
	r := env.e.Step(context.Background())
	if !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("step error %v, want deadline exceeded", r.Err)
	}
	_, _, f := collect(t, s)
	if f.FinishReason != completion.Error {
		t.Errorf("reason %v, want error", f.FinishReason)
	}
	// The next iteration gets a fresh deadline.
	close(env.x.block)
	env.x.block = nil
	s2 := mustSubmit(t, env.e, req("fast", prompt(5, 2), 5))
	env.runUntilIdle(t, 50)
	if _, _, f := collect(t, s2); f.FinishReason == completion.Error {
		t.Errorf("request after a timeout failed: %v", f.Err)
	}
}

func TestIdleLoopDoesNotSpin(t *testing.T) {
	env := newEnv(t, defaultOpts())
	if err := env.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer env.e.Stop(context.Background())
	// Sleeps on purpose: a loop that does not spin shows no event to wait
	// on, only iterations that do not happen while time passes.
	time.Sleep(50 * time.Millisecond)
	before := env.e.iterations()
	time.Sleep(100 * time.Millisecond)
	if n := env.e.iterations() - before; n != 0 {
		t.Errorf("idle loop ran %d iterations", n)
	}
	s := mustSubmit(t, env.e, req("wake", prompt(3, 1), 3))
	if _, _, f := collect(t, s); f.Usage.CompletionTokens == 0 {
		t.Errorf("submit did not wake the loop")
	}
}
