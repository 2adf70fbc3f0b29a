package programs

import (
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// Bounds of what placements add to the table. A pod runs tens to hundreds
// of programs (each a context of thousands of tokens in its KV cache) and a
// pool's routing table names every program of the pool, so both bounds are
// hundreds of times what a real pool needs; they keep a sender with the
// pool's token (or a controller gone wrong) from growing the pod's memory,
// and its state report, without limit.
const (
	// MaxPlacedEntries bounds the programs in the table that placements
	// created (Place naming a program new here), until they end.
	MaxPlacedEntries = 1 << 16
	// MaxRoutes bounds the routing table: the routes to programs on other
	// pods.
	MaxRoutes = 1 << 18
)

// LimitError is a placement the table refused because applying it would
// take the table past one of its bounds.
type LimitError struct {
	// Field is the placement's field that adds too much: place or routes;
	// What is what it adds.
	Field, What string
	// Limit is the bound, Would what the table would hold.
	Limit, Would int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: the pod would hold %d %s, more than its limit of %d", e.Field, e.Would, e.What, e.Limit)
}

// checkLimitsLocked refuses p if applying it could take the table past
// MaxPlacedEntries or MaxRoutes. It counts what p may add, not what it
// removes (a repeated id counts each time): a placement near the bounds is
// far from any real one.
func (t *Table) checkLimitsLocked(p *wire.Placement) error {
	adds := 0
	for _, id := range p.Place {
		if t.progs[id] == nil {
			adds++
		}
	}
	if adds > 0 {
		placed := 0
		for _, e := range t.progs {
			if e.byPlacement {
				placed++
			}
		}
		if placed+adds > MaxPlacedEntries {
			return &LimitError{Field: "place", What: "programs created by placements", Limit: MaxPlacedEntries, Would: placed + adds}
		}
	}
	routes := len(p.Routes)
	if !p.FullRoutes {
		routes = len(t.routes)
		for id := range p.Routes {
			if _, ok := t.routes[id]; !ok {
				routes++
			}
		}
	}
	if routes > MaxRoutes {
		return &LimitError{Field: "routes", What: "routes", Limit: MaxRoutes, Would: routes}
	}
	return nil
}
