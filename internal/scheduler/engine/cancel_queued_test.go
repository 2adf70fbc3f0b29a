package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
)

// TestCancelQueued: only a request that was never scheduled is cancelled,
// with ErrDraining; a scheduled one is left to finish.
func TestCancelQueued(t *testing.T) {
	o := defaultOpts()
	o.maxSeqs = 1
	env := newEnv(t, o)
	running := mustSubmit(t, env.e, req("running", prompt(8, 1), 4))
	queued := mustSubmit(t, env.e, req("queued", prompt(8, 2), 4))
	env.e.Step(context.Background()) // schedules the first only
	if running.CancelQueued() {
		t.Error("cancelled a scheduled request")
	}
	if !queued.CancelQueued() {
		t.Fatal("did not cancel a queued request")
	}
	if queued.CancelQueued() {
		t.Error("cancelled twice")
	}
	_, _, final, err := queued.Wait(context.Background())
	if err != nil || final.FinishReason != completion.Cancelled || !errors.Is(final.Err, ErrDraining) {
		t.Errorf("queued request's end: %+v, %v; want cancelled with ErrDraining", final, err)
	}
	for range 20 {
		env.e.Step(context.Background())
	}
	if _, _, final, err := running.Wait(context.Background()); err != nil || final.FinishReason == completion.Cancelled {
		t.Errorf("running request's end: %+v, %v; want it finished", final, err)
	}
}
