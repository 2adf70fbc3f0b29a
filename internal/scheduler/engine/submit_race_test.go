package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// Submit with a cancellable context registers a hook that the loop
// unregisters when it finishes the request. The loop can pick a request up
// as soon as it is queued, so the hook must be in place before that: run
// under -race (make test does), this test caught Submit writing it after.
func TestSubmitRacesWithTheLoopFinishingIt(t *testing.T) {
	env := newEnv(t, defaultOpts())
	if err := env.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.e.Stop(context.Background()) })
	const submitters, each = 8, 40
	var wg sync.WaitGroup
	for g := range submitters {
		wg.Go(func() {
			for i := range each {
				ctx, cancel := context.WithCancel(context.Background())
				s, err := env.e.Submit(ctx, req(fmt.Sprintf("r%d-%d", g, i), prompt(3, uint64(g*each+i)), 1))
				if err != nil {
					t.Error(err)
					cancel()
					return
				}
				if _, _, final, err := s.Wait(context.Background()); err != nil || !final.Done {
					t.Errorf("stream %s: %v", s.ID(), err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
}
