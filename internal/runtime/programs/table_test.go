package programs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
)

type fixture struct {
	t        *Table
	clk      *clock.Virtual
	kv       wire.KVReport
	offloads [][]int32
	restores [][]int32
	salts    []string // of the offloads and restores, in order
}

func newFixture(capacityTokens int) *fixture {
	f := &fixture{clk: clock.NewVirtual(time.Unix(1000, 0)), kv: wire.KVReport{BlockSize: 16, TotalBlocks: capacityTokens / 16}}
	f.t = New(Config{
		Pod: "pod-a", Addr: "10.0.0.1:8000", Clock: f.clk,
		KV:      func() wire.KVReport { return f.kv },
		Offload: func(salt string, t []int32) { f.offloads = append(f.offloads, t); f.salts = append(f.salts, salt) },
		Restore: func(salt string, t []int32) { f.restores = append(f.restores, t); f.salts = append(f.salts, salt) },
	})
	return f
}

func (f *fixture) program(id string) wire.ProgramReport {
	for _, p := range f.t.Report().Programs {
		if p.ID == id {
			return p
		}
	}
	return wire.ProgramReport{}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestNewProgramRunsHereWhenThereIsRoom(t *testing.T) {
	f := newFixture(1600)
	r := f.t.Route("p1", false)
	if r.Kind != Local {
		t.Fatalf("route %v, want local", r.Kind)
	}
	p := f.program("p1")
	if p.Status != "REASONING" || p.State != "ACTIVE" || !p.Placed || p.Steps != 1 || p.InFlight != 1 {
		t.Fatalf("after admission: %+v", p)
	}
	f.clk.Advance(time.Second)
	f.t.End(r.Ticket, 700, 32, []int32{1, 2, 3})
	p = f.program("p1")
	if p.Status != "ACTING" || p.ContextTokens != 700 || p.SharedTokens != 32 || p.InFlight != 0 ||
		!p.LastTransition.Equal(f.clk.Now()) {
		t.Fatalf("after the request: %+v", p)
	}
	if r := f.t.Route("p1", false); r.Kind != Local || f.program("p1").Steps != 2 {
		t.Fatalf("second step: %v %+v", r.Kind, f.program("p1"))
	}
}

func TestNewProgramGoesToThePodWithMostRoomOrIsHeld(t *testing.T) {
	f := newFixture(1600)
	f.t.End(f.t.Route("big", false).Ticket, 1500, 0, nil) // 1500 + 100 buffer: no room left here
	f.t.Apply(&wire.Placement{Version: 1, Room: map[string]int64{"10.0.0.1:8000": 0, "10.0.0.2:8000": 900, "10.0.0.3:8000": 5000}})
	if r := f.t.Route("new", false); r.Kind != Forward || r.Addr != "10.0.0.3:8000" {
		t.Fatalf("route %+v, want forward to the pod with most room", r)
	}
	if _, ok := f.t.progs["new"]; ok {
		t.Error("a forwarded new program must not be tracked here")
	}
	f.t.Apply(&wire.Placement{Version: 2, Room: map[string]int64{"10.0.0.2:8000": 50}})
	r := f.t.Route("new", false)
	if r.Kind != Hold {
		t.Fatalf("route %+v, want hold when no pod has room", r)
	}
	if p := f.program("new"); p.State != "PAUSED" || p.HeldRequests != 1 || p.Placed {
		t.Fatalf("held new program: %+v", p)
	}
	// While a request is held, new programs do not jump the line here.
	f.t.Release("big")
	f.t.Tick()
	f.t.Report()
	f.t.Tick()
	if r := f.t.Route("other", false); r.Kind != Hold {
		t.Fatalf("with a held request waiting, a new program is held too: %v", r.Kind)
	}
}

func TestPauseMarkAndResume(t *testing.T) {
	f := newFixture(16000)
	f.t.End(f.t.Route("acting", false).Ticket, 500, 0, []int32{7, 8})
	reasoning := f.t.Route("reasoning", false)

	f.t.Apply(&wire.Placement{Version: 1, Pause: []string{"acting"}, Mark: []string{"reasoning"}})
	if p := f.program("acting"); p.State != "PAUSED" || !p.Placed || p.PausedSince.IsZero() {
		t.Fatalf("paused: %+v", p)
	}
	if diff := cmp.Diff([][]int32{{7, 8}}, f.offloads); diff != "" {
		t.Errorf("pausing must offload the program's cache (-want +got):\n%s", diff)
	}
	r := f.t.Route("acting", false)
	if r.Kind != Hold || isClosed(r.Wait) {
		t.Fatalf("a paused program's request is held: %+v", r)
	}
	// The marked program pauses when its request ends.
	if p := f.program("reasoning"); !p.MarkedForPause || p.State != "ACTIVE" {
		t.Fatalf("marked: %+v", p)
	}
	f.t.End(reasoning.Ticket, 900, 0, []int32{9})
	if p := f.program("reasoning"); p.State != "PAUSED" || p.MarkedForPause {
		t.Fatalf("marked program after its request: %+v", p)
	}
	if diff := cmp.Diff([][]int32{{7, 8}, {9}}, f.offloads); diff != "" {
		t.Errorf("a marked program pausing at its tool call must offload its cache (-want +got):\n%s", diff)
	}
	// Resume here: the held request wakes and runs locally, after its
	// offloaded cache was brought back.
	f.t.Apply(&wire.Placement{Version: 2, Place: []string{"acting"}})
	if !isClosed(r.Wait) {
		t.Fatal("resuming must wake held requests")
	}
	if diff := cmp.Diff([][]int32{{7, 8}}, f.restores); diff != "" {
		t.Errorf("resuming where the program paused must restore its cache (-want +got):\n%s", diff)
	}
	f.t.Unhold(r.Ticket)
	if r := f.t.Route("acting", false); r.Kind != Local {
		t.Fatalf("after resume: %v", r.Kind)
	}
	// An old placement version changes nothing.
	if f.t.Apply(&wire.Placement{Version: 2, Pause: []string{"acting"}}) {
		t.Error("a repeated version must be ignored")
	}
	if p := f.program("acting"); p.State != "ACTIVE" {
		t.Errorf("state %s after a repeated placement", p.State)
	}
}

func TestResumedElsewhereForwardsHeldRequests(t *testing.T) {
	f := newFixture(16000)
	f.t.End(f.t.Route("p", false).Ticket, 500, 0, nil)
	f.t.Apply(&wire.Placement{Version: 1, Pause: []string{"p"}})
	r := f.t.Route("p", false)
	f.t.Apply(&wire.Placement{Version: 2, Routes: map[string]string{"p": "10.0.0.9:8000"}})
	if !isClosed(r.Wait) {
		t.Fatal("held request must wake when its program moves")
	}
	f.t.Unhold(r.Ticket)
	if r := f.t.Route("p", false); r.Kind != Forward || r.Addr != "10.0.0.9:8000" {
		t.Fatalf("route %+v, want forward", r)
	}
	// A request forwarded to us is never forwarded again.
	if r := f.t.Route("p", true); r.Kind != Local {
		t.Fatalf("forwarded request routed %v", r.Kind)
	}
}

func TestForceResumeAfterMaxPauseWithoutController(t *testing.T) {
	f := newFixture(16000)
	f.t.Apply(&wire.Placement{Version: 1, MaxPauseSeconds: 60, Room: map[string]int64{}})
	f.t.End(f.t.Route("p", false).Ticket, 500, 0, nil)
	f.t.Apply(&wire.Placement{Version: 2, Pause: []string{"p"}})
	r := f.t.Route("p", false)
	f.clk.Advance(59 * time.Second)
	f.t.Tick()
	if isClosed(r.Wait) {
		t.Fatal("woken before the limit")
	}
	f.clk.Advance(2 * time.Second)
	f.t.Tick()
	if !isClosed(r.Wait) {
		t.Fatal("not force-resumed after the limit")
	}
	f.t.Unhold(r.Ticket)
	if r := f.t.Route("p", false); r.Kind != Local {
		t.Fatalf("force-resumed here (no other pod known): %v", r.Kind)
	}
}

func TestIdleTimeoutAndReleaseTerminate(t *testing.T) {
	f := newFixture(16000)
	f.t.Report() // a controller polls: ended programs wait for its next report
	f.t.End(f.t.Route("idle", false).Ticket, 100, 0, nil)
	f.t.End(f.t.Route("rel", false).Ticket, 100, 0, nil)
	f.clk.Advance(DefaultIdleTimeout + time.Second)
	if !f.t.Release("rel") || f.t.Release("unknown") {
		t.Fatal("release of known/unknown programs")
	}
	f.t.Tick()
	for _, id := range []string{"idle", "rel"} {
		if p := f.program(id); p.State != "TERMINATED" {
			t.Errorf("%s: %s, want TERMINATED", id, p.State)
		}
	}
	// Reported once, then gone.
	f.t.Tick()
	if n := len(f.t.Report().Programs); n != 0 {
		t.Errorf("%d terminated programs still listed", n)
	}
	// A released id that comes back starts a new program.
	if r := f.t.Route("rel", false); r.Kind != Local || f.program("rel").Steps != 1 {
		t.Errorf("a released program id restarted as %v %+v", r.Kind, f.program("rel"))
	}
}

func TestUnholdByDepartingClientDropsHolderEntry(t *testing.T) {
	f := newFixture(1600)
	f.t.Apply(&wire.Placement{Version: 1, Routes: map[string]string{}, Room: map[string]int64{}})
	f.t.End(f.t.Route("hog", false).Ticket, 1550, 0, nil)
	r := f.t.Route("waiting", false)
	if r.Kind != Hold {
		t.Fatalf("%v", r.Kind)
	}
	f.t.Unhold(r.Ticket)
	if p := f.program("waiting"); p.HeldRequests != 0 {
		t.Errorf("held %d after the client left", p.HeldRequests)
	}
	if f.t.nHeld != 0 {
		t.Errorf("held count %d", f.t.nHeld)
	}
	f.t.Tick()
	if _, ok := f.t.progs["waiting"]; ok {
		t.Error("a holder entry with nothing held outlived the next tick")
	}
}

func TestRoutesAreDeltasUnlessFull(t *testing.T) {
	f := newFixture(16000)
	f.t.Apply(&wire.Placement{Version: 1, FullRoutes: true, Routes: map[string]string{"a": "b:1", "c": "c:1", "self": "10.0.0.1:8000"}})
	f.t.Apply(&wire.Placement{Version: 2, Routes: map[string]string{"d": "d:1"}, Unroute: []string{"c"}})
	want := map[string]string{"a": "b:1", "d": "d:1"}
	if diff := cmp.Diff(want, f.t.routes); diff != "" {
		t.Errorf("routes after a delta (-want +got):\n%s", diff)
	}
	f.t.Apply(&wire.Placement{Version: 3, FullRoutes: true, Routes: map[string]string{"e": "e:1"}})
	if diff := cmp.Diff(map[string]string{"e": "e:1"}, f.t.routes); diff != "" {
		t.Errorf("routes after a full push (-want +got):\n%s", diff)
	}
}

func TestStartedCountsTheRunningPrompt(t *testing.T) {
	f := newFixture(16000)
	r := f.t.Route("p", false)
	f.t.Started(r.Ticket, 1200, "")
	if p := f.program("p"); p.ContextTokens != 1200 || p.Status != "REASONING" {
		t.Fatalf("%+v", p)
	}
	f.t.End(r.Ticket, 1250, 0, nil)
	f.t.Started(r.Ticket, 5000, "") // not in flight: ignored
	if p := f.program("p"); p.ContextTokens != 1250 {
		t.Fatalf("%+v", p)
	}
}

// TestRunningSinceRestartsOnResume: the fairness bound compares how long
// programs have run since they were last placed or resumed.
func TestRunningSinceRestartsOnResume(t *testing.T) {
	f := newFixture(16000)
	start := f.clk.Now()
	f.t.End(f.t.Route("p", false).Ticket, 500, 0, []int32{1})
	if got := f.program("p").RunningSince; !got.Equal(start) {
		t.Fatalf("RunningSince = %v, want the first request's time %v", got, start)
	}
	f.clk.Advance(time.Minute)
	f.t.End(f.t.Route("p", false).Ticket, 600, 0, []int32{1, 2}) // a later step: still the same run
	if got := f.program("p").RunningSince; !got.Equal(start) {
		t.Fatalf("RunningSince moved to %v on a later step", got)
	}
	f.t.Apply(&wire.Placement{Version: 1, Pause: []string{"p"}})
	f.clk.Advance(time.Minute)
	f.t.Apply(&wire.Placement{Version: 2, Place: []string{"p"}})
	if got, want := f.program("p").RunningSince, start.Add(2*time.Minute); !got.Equal(want) {
		t.Fatalf("RunningSince after resume = %v, want %v", got, want)
	}
}
