package programs

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// TestEndedProgramsGoWithoutAController: on a pod no controller polls,
// nothing ever reports an end, so the entries of programs that end must go
// anyway: a server making one program per session would grow forever.
func TestEndedProgramsGoWithoutAController(t *testing.T) {
	f := newFixture(1 << 30)
	ctx := make([]int32, 3000)
	for i := range 1000 {
		id := fmt.Sprintf("session-%d", i)
		f.t.End(f.t.Route(id, false).Ticket, int64(len(ctx)), 0, ctx)
		if i%2 == 0 {
			f.t.Release(id)
		}
	}
	f.clk.Advance(DefaultIdleTimeout + time.Second)
	f.t.Tick() // the other half idles out
	f.t.Tick()
	if n := len(f.t.progs); n != 0 {
		t.Errorf("%d entries left of 1000 programs that ended", n)
	}
}

// TestEndedProgramDropsItsContext: an ended program's entry may wait for
// the controller's report, but not with its context's token ids.
func TestEndedProgramDropsItsContext(t *testing.T) {
	f := newFixture(16000)
	f.t.Report() // a controller polls: the entries stay until it reports them
	ctx := []int32{1, 2, 3}
	f.t.End(f.t.Route("released", false).Ticket, 3, 0, ctx)
	f.t.End(f.t.Route("idle", false).Ticket, 3, 0, ctx)
	busy := f.t.Route("busy", false)
	f.clk.Advance(DefaultIdleTimeout + time.Second)
	f.t.Release("released")
	f.t.Release("busy")
	f.t.End(busy.Ticket, 3, 0, ctx) // its request outlived the release
	f.t.Tick()
	for _, id := range []string{"released", "idle", "busy"} {
		e := f.t.progs[id]
		if e == nil || e.state != placement.StateTerminated {
			t.Fatalf("%s: %+v, want a TERMINATED entry", id, e)
		}
		if e.tokens != nil {
			t.Errorf("%s: ended, still keeps %d token ids", id, len(e.tokens))
		}
	}
}

// TestEndedProgramWaitsForTheReport: with a controller polling, an ended
// program stays until a report has shown its end (the controller releases
// it on the other pods then), and no longer than terminatedRetention when
// the controller stops polling.
func TestEndedProgramWaitsForTheReport(t *testing.T) {
	f := newFixture(16000)
	f.t.Report()
	f.t.End(f.t.Route("p", false).Ticket, 3, 0, nil)
	f.t.Release("p")
	f.t.Tick()
	if f.t.progs["p"] == nil {
		t.Fatal("an ended program went before the controller saw it end")
	}
	f.t.Report()
	f.t.Tick()
	if f.t.progs["p"] != nil {
		t.Fatal("an ended program outlived the report of its end")
	}

	f.t.End(f.t.Route("q", false).Ticket, 3, 0, nil)
	f.t.Release("q")
	f.clk.Advance(terminatedRetention)
	f.t.Tick()
	if f.t.progs["q"] == nil {
		t.Fatal("an ended program went before its retention")
	}
	f.clk.Advance(time.Second)
	f.t.Tick()
	if f.t.progs["q"] != nil {
		t.Error("an ended program nobody reported outlived its retention")
	}
}
