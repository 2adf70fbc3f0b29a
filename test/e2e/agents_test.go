//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/util/testing/agentclient"
)

// agentWorkload is agent programs as their clients run them: each sends
// steps requests, its context growing by the step's output and a tool's
// result, runs a tool (ACTING) between them, and releases the program at
// the end.
type agentWorkload struct {
	programs, steps int
	// firstContext is step 1's prompt; every later step's prompt adds the
	// previous output (outTokens) and toolTokens.
	firstContext, outTokens, toolTokens int
	// toolTime is how long each tool call runs.
	toolTime time.Duration
	// addr is the pod API (host:port) program i sends its requests and
	// its release to.
	addr func(i int) string
	// beforeRelease, when set, is called once program id has run its last
	// step and its last tool; the program is released when it returns.
	beforeRelease func(id string)
}

// agentStepResult is one step as its client saw it.
type agentStepResult struct {
	program string
	step    int
	agentclient.StepResult
	err string
}

func (w *agentWorkload) id(i int) string { return fmt.Sprintf("agent-%d", i) }

// start runs every program concurrently until it ends or ctx is done;
// wait returns the results of all steps sent, once every program ended.
// A program stops at its first failed step.
func (w *agentWorkload) start(ctx context.Context) (wait func() []agentStepResult) {
	results := make(chan agentStepResult, w.programs*w.steps)
	var wg sync.WaitGroup
	for i := range w.programs {
		id, addr := w.id(i), w.addr(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			prompt := w.firstContext
			for s := 1; s <= w.steps; s++ {
				got, err := agentclient.Step(ctx, addr, id, prompt, w.outTokens)
				r := agentStepResult{program: id, step: s, StepResult: got}
				if err != nil {
					r.err = err.Error()
				}
				results <- r
				if err != nil {
					return
				}
				prompt += w.outTokens + w.toolTokens
				time.Sleep(w.toolTime) // acting: a tool runs
			}
			if w.beforeRelease != nil {
				w.beforeRelease(id)
			}
			resp, err := http.Post("http://"+addr+"/programs/release", "application/json", strings.NewReader(fmt.Sprintf(`{"program_id":%q}`, id)))
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	return func() []agentStepResult {
		wg.Wait()
		close(results)
		var all []agentStepResult
		for r := range results {
			all = append(all, r)
		}
		return all
	}
}

// check fails t for every step that failed or did not return exactly
// outTokens, and for every program whose steps were not each answered
// exactly once.
func (w *agentWorkload) check(t *testing.T, results []agentStepResult) {
	t.Helper()
	answered := map[string]map[int]int{}
	for _, r := range results {
		if r.err != "" {
			t.Errorf("%s step %d: %s", r.program, r.step, r.err)
			continue
		}
		if r.Tokens != w.outTokens {
			t.Errorf("%s step %d: %d tokens, want %d", r.program, r.step, r.Tokens, w.outTokens)
		}
		if answered[r.program] == nil {
			answered[r.program] = map[int]int{}
		}
		answered[r.program][r.step]++
	}
	for i := range w.programs {
		id := w.id(i)
		for s := 1; s <= w.steps; s++ {
			if n := answered[id][s]; n != 1 {
				t.Errorf("%s step %d answered %d times, want once", id, s, n)
			}
		}
	}
}

// every calls f every period in a goroutine until stop is called; stop
// returns once f has returned for the last time.
func every(period time.Duration, f func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			f(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()
	return func() { cancel(); <-done }
}
