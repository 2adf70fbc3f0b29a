// Package poll waits, in tests, for a condition that something the test
// cannot hook into (another process, the Kubernetes API, a loop with no
// event to wait on) makes true: the one polling helper of the module's
// tests. A test that can wait on a channel, a hook or a counter the code
// under test exposes should do that instead.
package poll

import (
	"testing"
	"time"
)

// First and Max bound the pause between two checks: the first pause is
// First, each next one doubles, up to Max, so a condition that turns
// true at once costs little and a slow one (a process, an API server) is
// not checked in a busy loop.
const (
	First = time.Millisecond
	Max   = 100 * time.Millisecond
)

// Until checks cond until it returns true. Once timeout has passed it
// fails t with what it was waiting for. Call it from the test's
// goroutine (it may call t.Fatalf).
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Wait(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// UntilOK checks cond until it returns "" (met). Once timeout has passed
// it fails t with the last message cond returned (what is still
// missing). Call it from the test's goroutine.
func UntilOK(t testing.TB, timeout time.Duration, cond func() string) {
	t.Helper()
	var msg string
	if !Wait(timeout, func() bool { msg = cond(); return msg == "" }) {
		t.Fatalf("after %v: %s", timeout, msg)
	}
}

// Wait checks cond until it returns true or timeout passes, and says
// whether it did: for a goroutine that is not the test's, or a caller
// that reports a timeout its own way. cond is checked once more after
// the deadline, so a slow last pause cannot turn a met condition into a
// timeout.
func Wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := First
	for !cond() {
		left := time.Until(deadline)
		if left <= 0 {
			return cond()
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, Max)
	}
	return true
}
