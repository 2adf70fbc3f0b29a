package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// A pod that restarts between rounds has lost its routing table: it
// reports placement version 0, so the next round sends it the routes in
// full, not as a delta against a table it no longer has. Before that, a
// request of a program placed on the other pod runs on it (nothing tells
// it otherwise); after it, the pod hands the program back and forwards its
// requests, so the program runs on one pod only.
func TestRestartedPodGetsFullRoutes(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(10_000, 0))
	a := newPod(t, "a", 16000, clk)
	b := newPod(t, "b", 16000, clk)
	run(a, "moved", 1000)
	f := newFleet(t, placement.DefaultPolicy())
	ctx := context.Background()
	pods := []Pod{a.fleetPod(), b.fleetPod()}
	if _, err := f.Round(ctx, pods, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if r := b.table.Route("moved", false); r.Kind != programs.Forward || r.Addr != "a:8000" {
		t.Fatalf("before the restart, b routes the program %v to %q, want a forward to a:8000", r.Kind, r.Addr)
	}

	b.restart()
	run(b, "moved", 500) // nothing tells the new process where it runs
	for round := range 2 {
		clk.Advance(5 * time.Second)
		if _, err := f.Round(ctx, pods, clk.Now()); err != nil {
			t.Fatal(err)
		}
		if r := b.table.Route("moved", false); r.Kind != programs.Forward || r.Addr != "a:8000" {
			t.Fatalf("round %d after the restart: b routes the program %v to %q, want a forward to a:8000", round+1, r.Kind, r.Addr)
		}
		placedOn := 0
		for _, p := range []*testPod{a, b} {
			if got := find(p.table.Report(), "moved"); got.Placed && got.State == "ACTIVE" {
				placedOn++
			}
		}
		if placedOn != 1 {
			t.Fatalf("round %d after the restart: the program is ACTIVE and placed on %d pods, want 1", round+1, placedOn)
		}
	}
}
