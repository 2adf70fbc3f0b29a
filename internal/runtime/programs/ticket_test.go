package programs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// programView is the part of a program's report a request changes.
type programView struct {
	State, Status         string
	InFlight, Held, Steps int
	ContextTokens         int64
}

func (f *fixture) view(id string) programView {
	p := f.program(id)
	return programView{p.State, p.Status, p.InFlight, p.HeldRequests, p.Steps, p.ContextTokens}
}

// TestOldRequestLeavesTheReturningProgramAlone: a released id that comes
// back while its old request still runs is a new program; the old
// request's end must not count as the new one's.
func TestOldRequestLeavesTheReturningProgramAlone(t *testing.T) {
	f := newFixture(16000)
	old := f.t.Route("p", false)
	f.t.Started(old.Ticket, 100, "old")
	f.t.Release("p")
	f.clk.Advance(time.Second)
	cur := f.t.Route("p", false)
	if cur.Kind != Local {
		t.Fatalf("the returning id: route %v", cur.Kind)
	}
	f.t.Started(cur.Ticket, 200, "new")
	f.t.End(old.Ticket, 150, 0, []int32{1})
	want := programView{State: "ACTIVE", Status: "REASONING", InFlight: 1, ContextTokens: 200, Steps: 1}
	if diff := cmp.Diff(want, f.view("p")); diff != "" {
		t.Fatalf("after the old request ended (-want +got):\n%s", diff)
	}
	f.clk.Advance(DefaultIdleTimeout + time.Second)
	f.t.Tick()
	if diff := cmp.Diff(want, f.view("p")); diff != "" {
		t.Fatalf("a program whose request runs was idle-terminated (-want +got):\n%s", diff)
	}
	f.t.End(cur.Ticket, 250, 0, []int32{2, 2})
	want = programView{State: "ACTIVE", Status: "ACTING", ContextTokens: 250, Steps: 1}
	if diff := cmp.Diff(want, f.view("p")); diff != "" {
		t.Fatalf("after its own request ended (-want +got):\n%s", diff)
	}
	if salt, toks, _ := f.t.KVContext("p"); salt != "new" || !cmp.Equal(toks, []int32{2, 2}) {
		t.Errorf("context %q %v, want the new request's", salt, toks)
	}
}

// TestOldHoldLeavesTheReturningProgramAlone: a request held on a program
// that is released, and takes back its hold after the id came back as a
// new program, takes back its own hold: the pod's count of held requests
// (new programs wait while it is not 0) must not keep it forever.
func TestOldHoldLeavesTheReturningProgramAlone(t *testing.T) {
	f := newFixture(16000)
	f.t.End(f.t.Route("p", false).Ticket, 500, 0, nil)
	f.t.Apply(&wire.Placement{Version: 1, Pause: []string{"p"}})
	held := f.t.Route("p", false)
	if held.Kind != Hold {
		t.Fatalf("a paused program's request: route %v", held.Kind)
	}
	f.t.Release("p")
	cur := f.t.Route("p", false) // before the woken request asks again
	f.t.Unhold(held.Ticket)
	if got, want := f.view("p").Held+f.view("p").InFlight, 1; got != want {
		t.Errorf("the new program counts %d requests after the old one's hold was taken back, want %d", got, want)
	}
	if cur.Kind == Hold {
		f.t.Unhold(cur.Ticket)
	} else {
		f.t.Abandon(cur.Ticket)
	}
	if f.t.nHeld != 0 {
		t.Errorf("%d requests counted held after every hold was taken back", f.t.nHeld)
	}
}
