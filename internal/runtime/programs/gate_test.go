package programs

import (
	"context"
	"errors"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// pausedHere is a fixture whose program p ran here and is paused here.
func pausedHere(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(16000)
	f.t.End(f.t.Route("p", false).Ticket, 500, 0, nil)
	f.t.Apply(&wire.Placement{Version: 1, Pause: []string{"p"}})
	return f
}

func (f *fixture) held(t *testing.T, g *Gate) Route {
	t.Helper()
	rt := g.Route()
	if rt.Kind != Hold || f.program("p").HeldRequests != 1 {
		t.Fatalf("route %v with %d held; want the request held", rt.Kind, f.program("p").HeldRequests)
	}
	return rt
}

// A held request that came forwarded asks again as not forwarded: a
// placement that moved its program elsewhere sends it there rather than
// running it where it waited (which would place the program on two pods).
func TestGateWokenAsksAgainAsNotForwarded(t *testing.T) {
	f := pausedHere(t)
	g := f.t.Gate("", "p", true)
	rt := f.held(t, &g)
	f.t.Apply(&wire.Placement{Version: 2, Routes: map[string]string{"p": "10.0.0.9:8000"}})
	if !isClosed(rt.Wait) {
		t.Fatal("the move must wake the held request")
	}
	if rt := g.Woken(); rt.Kind != Forward || rt.Addr != "10.0.0.9:8000" || g.Drained() {
		t.Fatalf("woken: %+v (drained %v); want forwarded to the program's new pod, not drained", rt, g.Drained())
	}
	if n := f.program("p").HeldRequests; n != 0 {
		t.Errorf("%d requests still held after the wake", n)
	}
}

func TestGateDrain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		forwarded bool
		routes    map[string]string
		want      Route
	}{
		{name: "placed elsewhere", routes: map[string]string{"p": "10.0.0.9:8000"}, want: Route{Kind: Forward, Addr: "10.0.0.9:8000"}},
		{name: "placed elsewhere, came forwarded", forwarded: true, routes: map[string]string{"p": "10.0.0.9:8000"}, want: Route{Kind: Unavailable}},
		{name: "still paused here", want: Route{Kind: Unavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := pausedHere(t)
			g := f.t.Gate("", "p", tc.forwarded)
			f.held(t, &g)
			if tc.routes != nil {
				f.t.Apply(&wire.Placement{Version: 2, Routes: tc.routes})
			}
			if got := g.Drain(); got != tc.want || !g.Drained() {
				t.Errorf("drain: %+v (drained %v), want %+v", got, g.Drained(), tc.want)
			}
			if n := f.program("p").HeldRequests; n != 0 {
				t.Errorf("%d requests still held after the drain", n)
			}
		})
	}
}

func TestGateAwait(t *testing.T) {
	t.Run("woken", func(t *testing.T) {
		f := pausedHere(t)
		g := f.t.Gate("", "p", false)
		rt := f.held(t, &g)
		f.t.Apply(&wire.Placement{Version: 2, Place: []string{"p"}})
		got, err := g.Await(context.Background(), nil, rt)
		if err != nil || got.Kind != Local {
			t.Fatalf("await after a resume here: %+v, %v; want local", got, err)
		}
		if p := f.program("p"); p.HeldRequests != 0 || p.InFlight != 1 {
			t.Errorf("after the wake: %+v", p)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		f := pausedHere(t)
		g := f.t.Gate("", "p", false)
		rt := f.held(t, &g)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := g.Await(ctx, nil, rt); !errors.Is(err, context.Canceled) {
			t.Fatalf("await with the client gone: %v", err)
		}
		if n := f.program("p").HeldRequests; n != 0 {
			t.Errorf("%d requests still held after the client left", n)
		}
	})
	t.Run("drain", func(t *testing.T) {
		f := pausedHere(t)
		g := f.t.Gate("", "p", false)
		rt := f.held(t, &g)
		drain := make(chan struct{})
		close(drain)
		got, err := g.Await(context.Background(), drain, rt)
		if err != nil || got.Kind != Unavailable {
			t.Fatalf("await on a draining pod: %+v, %v; want unavailable", got, err)
		}
		if n := f.program("p").HeldRequests; n != 0 {
			t.Errorf("%d requests still held after the drain", n)
		}
	})
	t.Run("not held", func(t *testing.T) {
		f := newFixture(16000)
		g := f.t.Gate("", "p", false)
		rt := g.Route()
		if got, err := g.Await(context.Background(), nil, rt); err != nil || got.Kind != Local || got.Ticket != rt.Ticket {
			t.Fatalf("await of a local route: %+v, %v; want it back as it was", got, err)
		}
	})
}

// A release received where the program is only routed names the pod that
// runs it, which Release alone forgets.
func TestReleaseRoutedNamesThePodThatRunsIt(t *testing.T) {
	f := newFixture(16000)
	f.t.Apply(&wire.Placement{Version: 1, Routes: map[string]string{"elsewhere": "10.0.0.9:8000"}})
	if released, to := f.t.ReleaseRouted("elsewhere"); !released || to != "10.0.0.9:8000" {
		t.Errorf("release of a routed program: %v, %q; want released, routed to 10.0.0.9:8000", released, to)
	}
	if _, routed := f.t.RouteOf("elsewhere"); routed {
		t.Error("the released program is still routed")
	}
	f.t.End(f.t.Route("here", false).Ticket, 100, 0, nil)
	if released, to := f.t.ReleaseRouted("here"); !released || to != "" {
		t.Errorf("release of a program run here: %v, %q; want released, routed nowhere", released, to)
	}
	if released, to := f.t.ReleaseRouted("unknown"); released || to != "" {
		t.Errorf("release of an unknown program: %v, %q", released, to)
	}
}
