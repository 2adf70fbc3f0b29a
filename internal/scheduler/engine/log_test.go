package engine

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// logRecorder is a slog.Handler keeping every record's level and message.
type logRecorder struct {
	mu      sync.Mutex
	records []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Level.String()+" "+r.Message)
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

func (h *logRecorder) withLevel(level string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if strings.HasPrefix(r, level+" ") {
			out = append(out, r)
		}
	}
	return out
}

// TestDrainDeadlineIsNotAnError: a drain that runs out of time cancels the
// iteration in flight; that is the expected end of a shutdown and must not
// log an executor failure at ERROR. A real executor failure still does.
func TestDrainDeadlineIsNotAnError(t *testing.T) {
	logs := &logRecorder{}
	o := defaultOpts()
	o.logger = slog.New(logs)
	env := newEnv(t, o)
	env.x.block = make(chan struct{}) // the executor hangs until cancelled
	if err := env.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustSubmit(t, env.e, req("stuck", prompt(5, 1), 20))
	// Let the loop enter the executor before the deadline.
	poll.Until(t, 5*time.Second, "the executor called", func() bool { return env.x.numCalls() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_ = env.e.Stop(ctx)
	if errs := logs.withLevel("ERROR"); len(errs) > 0 {
		t.Errorf("a drain deadline logged errors: %q", errs)
	}
	if infos := logs.withLevel("INFO"); len(infos) == 0 {
		t.Errorf("the aborted iteration was not logged at all: %q", logs.records)
	}

	// An iteration timeout is a failure and stays an error.
	logs2 := &logRecorder{}
	o = defaultOpts()
	o.logger, o.timeout = slog.New(logs2), 10*time.Millisecond
	env2 := newEnv(t, o)
	env2.x.block = make(chan struct{})
	mustSubmit(t, env2.e, req("slow", prompt(5, 1), 5))
	env2.e.Step(context.Background())
	if errs := logs2.withLevel("ERROR"); len(errs) != 1 {
		t.Errorf("an executor failure logged %q, want one ERROR", logs2.records)
	}
}
