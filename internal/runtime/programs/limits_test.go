package programs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// Placements add at most MaxPlacedEntries programs and MaxRoutes routes to
// the table; a placement that would add more is refused whole, whatever
// part of it fits, and the table stays as it was. Programs a client's
// requests created do not count against placements, and the entries
// placements created count until they go.
func TestPlacementsAreBounded(t *testing.T) {
	f := newFixture(1600)
	f.t.Route("client", false)
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	var le *LimitError

	if ok, err := f.t.ApplyPlacement(&wire.Placement{Version: 1, Place: append(names("p", MaxPlacedEntries), "client")}); !ok || err != nil {
		t.Fatalf("%d programs placed: %v %v", MaxPlacedEntries, ok, err)
	}
	ok, err := f.t.ApplyPlacement(&wire.Placement{Version: 2, Place: []string{"p0", "new"}, Pause: []string{"p1"}})
	if ok || !errors.As(err, &le) || le.Field != "place" || le.Limit != MaxPlacedEntries || le.Would != MaxPlacedEntries+1 {
		t.Fatalf("one more program: applied %v, %v", ok, err)
	}
	if f.t.Version() != 1 || f.program("p1").State != "ACTIVE" || f.program("new").ID != "" {
		t.Fatalf("a refused placement was applied: version %d, p1 %+v", f.t.Version(), f.program("p1"))
	}
	// Apply, which has no error to return, refuses it too.
	if f.t.Apply(&wire.Placement{Version: 2, Place: []string{"new"}}) {
		t.Fatal("Apply took a placement beyond the bound")
	}
	// Released programs that the controller saw end make room again.
	if ok, err := f.t.ApplyPlacement(&wire.Placement{Version: 3, Release: []string{"p0"}}); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	f.t.Report()
	f.t.Tick()
	if ok, err := f.t.ApplyPlacement(&wire.Placement{Version: 4, Place: []string{"new"}}); !ok || err != nil {
		t.Fatalf("a program placed after one ended: %v %v", ok, err)
	}

	// Routes: in full, then as deltas on top.
	routes := func(prefix string, n int) map[string]string {
		out := make(map[string]string, n)
		for _, id := range names(prefix, n) {
			out[id] = "10.0.0.2:8000"
		}
		return out
	}
	if ok, err := f.t.ApplyPlacement(&wire.Placement{Version: 5, FullRoutes: true, Routes: routes("r", MaxRoutes-1)}); !ok || err != nil {
		t.Fatalf("%d routes in full: %v %v", MaxRoutes-1, ok, err)
	}
	ok, err = f.t.ApplyPlacement(&wire.Placement{Version: 6, Routes: routes("s", 2)})
	if ok || !errors.As(err, &le) || le.Field != "routes" || le.Would != MaxRoutes+1 {
		t.Fatalf("two routes more: applied %v, %v", ok, err)
	}
	if _, routed := f.t.RouteOf("s0"); routed {
		t.Fatal("a refused placement's route was applied")
	}
	if ok, err := f.t.ApplyPlacement(&wire.Placement{Version: 7, Routes: routes("s", 1)}); !ok || err != nil {
		t.Fatalf("one route more, up to the bound: %v %v", ok, err)
	}
	if ok, err := f.t.ApplyPlacement(&wire.Placement{Version: 8, FullRoutes: true, Routes: routes("t", 3)}); !ok || err != nil {
		t.Fatalf("a full table replaces the routes: %v %v", ok, err)
	}
}
