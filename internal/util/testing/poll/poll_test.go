package poll

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalRecorder records Fatalf instead of stopping the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestWaitReturnsOnceMet(t *testing.T) {
	calls := 0
	if !Wait(time.Minute, func() bool { calls++; return calls == 5 }) {
		t.Fatal("Wait: false for a condition met on the fifth check")
	}
	if calls != 5 {
		t.Errorf("cond checked %d times, want 5 (no check after it held)", calls)
	}
}

func TestWaitGivesUp(t *testing.T) {
	calls := 0
	if Wait(20*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("Wait: true for a condition never met")
	}
	// Pauses double from First: 20ms allows at most 1+2+4+8 ms of pauses
	// before the last, so a handful of checks, not a busy loop.
	if calls < 2 || calls > 8 {
		t.Errorf("cond checked %d times in 20ms, want a few (pauses doubling from %v)", calls, First)
	}
}

func TestUntilOKReportsLastMessage(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	n := 0
	UntilOK(rec, 5*time.Millisecond, func() string { n++; return fmt.Sprintf("check %d", n) })
	if want := fmt.Sprintf("check %d", n); !strings.HasSuffix(rec.msg, want) {
		t.Errorf("failure %q, want it to end with the last message %q", rec.msg, want)
	}
	rec.msg = ""
	UntilOK(rec, time.Minute, func() string { return "" })
	if rec.msg != "" {
		t.Errorf("met condition failed the test: %q", rec.msg)
	}
}

func TestUntilNamesWhat(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	Until(rec, time.Millisecond, "the pod to drain", func() bool { return false })
	if !strings.Contains(rec.msg, "the pod to drain") {
		t.Errorf("failure %q does not say what it waited for", rec.msg)
	}
}
