package programs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

func TestOwnerScopesIDs(t *testing.T) {
	a, b := OwnerOf("key-a", []byte("pool")), OwnerOf("key-b", []byte("pool"))
	if a == b || len(a) != ownerLen || strings.Contains(string(a), "key-a") {
		t.Fatalf("owners %q, %q: want distinct %d-digit digests", a, b, ownerLen)
	}
	if OwnerOf("key-a", []byte("other pool")) == a {
		t.Error("the owner digest does not depend on the pool's secret")
	}
	if a.Scope("p") == b.Scope("p") || Owner("").Scope("p") != "p" {
		t.Errorf("scopes: %q %q %q", a.Scope("p"), b.Scope("p"), Owner("").Scope("p"))
	}
	for _, tc := range []struct {
		id    string
		owner Owner
		rest  string
	}{
		{a.Scope("p/q"), a, "p/q"},
		{"p", "", "p"},
		{strings.Repeat("g", ownerLen) + "/p", "", strings.Repeat("g", ownerLen) + "/p"},
	} {
		o, rest, _ := split(tc.id)
		if diff := cmp.Diff([]string{string(tc.owner), tc.rest}, []string{string(o), rest}); diff != "" {
			t.Errorf("split(%q) (-want +got):\n%s", tc.id, diff)
		}
	}
	if got := ClientID(a.Scope("p/q")); got != "p/q" {
		t.Errorf("ClientID = %q, want p/q", got)
	}
	if err := CheckScopedID(a.Scope(strings.Repeat("x", MaxIDLen))); err != nil {
		t.Errorf("a scoped id of the longest client id: %v", err)
	}
	if err := CheckScopedID(a.Scope("\x01")); err == nil {
		t.Error("a scoped id holding a control character passed")
	}
}

// TestOwnersDoNotShareAProgram: two owners naming the same program id get
// two programs; pausing or releasing one leaves the other alone.
func TestOwnersDoNotShareAProgram(t *testing.T) {
	f := newFixture(16000)
	a, b := OwnerOf("a", nil), OwnerOf("b", nil)
	ra := f.t.RouteFor(a, a.Scope("p"), false)
	if ra.Kind != Local {
		t.Fatalf("a: route %v", ra.Kind)
	}
	f.t.End(ra.Ticket, 10, 0, nil)
	f.t.Apply(&wire.Placement{Version: 1, Pause: []string{a.Scope("p")}})
	rb := f.t.RouteFor(b, b.Scope("p"), false)
	if rb.Kind != Local {
		t.Fatalf("b's p while a's p is paused: route %v, want local (its own program)", rb.Kind)
	}
	if f.t.Release(b.Scope("x")) {
		t.Error("released an id b never used")
	}
	f.t.End(rb.Ticket, 10, 0, nil)
	if !f.t.Release(b.Scope("p")) {
		t.Fatal("b could not release its own program")
	}
	if p := f.program(a.Scope("p")); p.State != "PAUSED" {
		t.Errorf("a's program after b released its own: %+v", p)
	}
}

// TestProgramLimitPerOwner: an owner at its limit is refused a new program
// (not a request of one it has), with the time until its first idle
// program ends; other owners are not affected.
func TestProgramLimitPerOwner(t *testing.T) {
	f := newFixture(160000)
	f.t.cfg.MaxProgramsPerOwner = 2
	a, b := OwnerOf("a", nil), OwnerOf("b", nil)
	for _, p := range []string{"p1", "p2"} {
		r := f.t.RouteFor(a, a.Scope(p), false)
		if r.Kind != Local {
			t.Fatalf("%s: route %v", p, r.Kind)
		}
		f.t.End(r.Ticket, 10, 0, nil)
		f.clk.Advance(time.Minute)
	}
	r := f.t.RouteFor(a, a.Scope("p3"), false)
	if r.Kind != Limited {
		t.Fatalf("a's third program: route %v, want limited", r.Kind)
	}
	// p1 went idle 2 minutes ago: it ends after the idle timeout.
	if want := DefaultIdleTimeout - 2*time.Minute; r.RetryAfter != want {
		t.Errorf("retry after %v, want %v", r.RetryAfter, want)
	}
	if r := f.t.RouteFor(a, a.Scope("p3"), true); r.Kind != Limited {
		t.Errorf("a's third program, forwarded: route %v, want limited", r.Kind)
	}
	if r := f.t.RouteFor(a, a.Scope("p1"), false); r.Kind != Local {
		t.Errorf("a's existing program: route %v, want local", r.Kind)
	}
	if r := f.t.RouteFor(b, b.Scope("p3"), false); r.Kind != Local {
		t.Errorf("b's first program: route %v, want local", r.Kind)
	}
	f.t.Release(a.Scope("p2"))
	if r := f.t.RouteFor(a, a.Scope("p3"), false); r.Kind != Local {
		t.Errorf("a's third program after releasing one: route %v, want local", r.Kind)
	}
}

// TestOffloadCarriesTheContextsSalt: a paused program's context is
// offloaded and restored under the cache salt of the request that left it,
// and a request that ended without a result leaves it as it was.
func TestOffloadCarriesTheContextsSalt(t *testing.T) {
	f := newFixture(16000)
	r := f.t.Route("p", false)
	f.t.Started(r.Ticket, 2, "s1")
	f.t.End(r.Ticket, 2, 0, []int32{7, 8})
	r = f.t.Route("p", false)
	f.t.Started(r.Ticket, 3, "s2")
	f.t.Abandon(r.Ticket)
	f.t.Apply(&wire.Placement{Version: 1, Pause: []string{"p"}})
	f.t.Apply(&wire.Placement{Version: 2, Place: []string{"p"}})
	if diff := cmp.Diff([]string{"s1", "s1"}, f.salts); diff != "" {
		t.Errorf("salts of the offload and the restore (-want +got):\n%s", diff)
	}
}
