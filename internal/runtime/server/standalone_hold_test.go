package server

import (
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// fullPodTable is a program table whose pod has room for one program:
// 150 tokens of KV, 100 of them the per-program buffer.
func fullPodTable() *programs.Table { return newTable("a:1", 160) }

func postAsync(env *testEnv, program string) chan response {
	done := make(chan response, 1)
	go func() { done <- env.post("/v1/completions", gateBody, "X-Program-Id", program) }()
	return done
}

func waitResponse(t *testing.T, done chan response, what string) response {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(requestTimeout):
		t.Fatalf("%s: no answer after %v (held?)", what, requestTimeout)
	}
	return response{}
}

// A pod no controller has sent a placement (make run, no
// --control-token-file) never holds a new program: nothing but the 30-minute
// pause limit would ever let it go.
func TestStandalonePodNeverHoldsNewPrograms(t *testing.T) {
	tab := fullPodTable()
	env := newEnv(t, envOpts{programs: tab})
	if r := env.post("/v1/completions", gateBody, "X-Program-Id", "first"); r.status != 200 {
		t.Fatalf("first program: %d %s", r.status, r.body)
	}
	for _, id := range []string{"second", "third"} {
		if r := waitResponse(t, postAsync(env, id), id); r.status != 200 {
			t.Fatalf("%s program on a full standalone pod: %d %s", id, r.status, r.body)
		}
		if p := findProgram(tab, id); !p.Placed || p.State != "ACTIVE" || p.HeldRequests != 0 {
			t.Errorf("%s: %+v", id, p)
		}
	}
}

// Default mode never pauses, so its pods never hold a new program either.
func TestDefaultModePodNeverHoldsNewPrograms(t *testing.T) {
	tab := fullPodTable()
	env := newEnv(t, envOpts{programs: tab})
	env.post("/v1/completions", gateBody, "X-Program-Id", "first")
	tab.Apply(&wire.Placement{Version: 1, Mode: "Default", Room: map[string]int64{"a:1": -50}})
	if r := waitResponse(t, postAsync(env, "second"), "second"); r.status != 200 {
		t.Fatalf("second program in Default mode: %d %s", r.status, r.body)
	}
}

// Under a ProgramAware controller a full pod holds a new program, and lets
// it run as soon as the program filling it is released, without waiting for
// the next placement.
func TestHeldNewProgramRunsWhenRoomFrees(t *testing.T) {
	tab := fullPodTable()
	env := newEnv(t, envOpts{programs: tab})
	env.post("/v1/completions", gateBody, "X-Program-Id", "first")
	tab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Place: []string{"first"}, Room: map[string]int64{"a:1": -50}})
	done := postAsync(env, "second")
	poll.Until(t, waitTimeout, "a new program on a full pod held", func() bool { return findProgram(tab, "second").HeldRequests == 1 })
	select {
	case r := <-done:
		t.Fatalf("held request answered before there was room: %d", r.status)
	case <-time.After(50 * time.Millisecond):
	}
	if r := env.post("/programs/release", `{"program_id":"first"}`); r.status != 200 {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	if r := waitResponse(t, done, "held program after the release"); r.status != 200 {
		t.Fatalf("held program after the release: %d %s", r.status, r.body)
	}
	if p := findProgram(tab, "second"); !p.Placed || p.State != "ACTIVE" || p.Steps != 1 {
		t.Errorf("second after it ran: %+v", p)
	}
}
