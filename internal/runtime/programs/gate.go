package programs

import "context"

// Gate is one request's way through the pod's program gate: the decision,
// from its first ask to its last, of whether it runs on this pod, is
// forwarded once, is refused for its owner's limit, or is held while its
// program is paused, and what a held request does when its wait ends, its
// client goes away or the pod starts draining. The HTTP server (which
// blocks in Await) and the simulator of agent pools (which keeps held
// requests as events) both carry requests through it, so they cannot
// decide differently; they only do what its Routes say.
//
// A Gate is for one request and one goroutine. Use it as: Route; while the
// Route is Hold, wait for its Wait to close and call Woken, or call Leave
// if the client goes away, or Drain if the pod starts draining (each ends
// the hold; Woken may hold it again). Await does exactly this, blocking.
type Gate struct {
	t         *Table
	owner     Owner
	id        string
	forwarded bool
	// held is the ticket of the Hold route in force, zero when none.
	held Ticket
	// drained: Drain answered the request.
	drained bool
}

// Gate starts the gate for one request of program id (the table's id,
// owner.Scope of the client's) sent by owner's API key; forwarded marks a
// request another pod's gate sent here (see RouteFor).
func (t *Table) Gate(owner Owner, id string, forwarded bool) Gate {
	return Gate{t: t, owner: owner, id: id, forwarded: forwarded}
}

// Route asks the table where the request goes (RouteFor): Local, with the
// Ticket to pass to Started and End or Abandon; Forward to Addr, once;
// Limited; or Hold.
func (g *Gate) Route() Route {
	rt := g.t.RouteFor(g.owner, g.id, g.forwarded)
	if rt.Kind == Hold {
		g.held = rt.Ticket
	}
	return rt
}

// Woken asks again for a request whose Hold's Wait closed: its program's
// routing changed on this pod, so this pod's view is now newer than a
// sender's was, and the request goes where it says, as not forwarded
// (RouteFor explains why).
func (g *Gate) Woken() Route {
	g.unhold()
	g.forwarded = false
	return g.Route()
}

// Leave takes back a held request whose client went away.
func (g *Gate) Leave() { g.unhold() }

// Drain answers a held request when the pod starts draining, at once: a
// Forward to the pod its program is routed to, if the controller has
// placed it elsewhere and the request did not come forwarded, else
// Unavailable (a retry reaches a pod that stays, which holds or runs it).
// Keeping it held would make the pod's shutdown wait for a resume it will
// not see through.
func (g *Gate) Drain() Route {
	g.unhold()
	g.drained = true
	if addr, ok := g.t.RouteOf(g.id); ok && !g.forwarded {
		return Route{Kind: Forward, Addr: addr}
	}
	return Route{Kind: Unavailable}
}

// Await waits out rt, a Route of this Gate, while it is Hold, as Woken,
// Leave and Drain say: it returns the first Route that is not Hold (Drain's
// when drain closes first), or ctx's error, with the hold taken back, when
// ctx ends first.
func (g *Gate) Await(ctx context.Context, drain <-chan struct{}, rt Route) (Route, error) {
	for rt.Kind == Hold {
		select {
		case <-rt.Wait:
			rt = g.Woken()
		case <-ctx.Done():
			g.Leave()
			return Route{}, ctx.Err()
		case <-drain:
			return g.Drain(), nil
		}
	}
	return rt, nil
}

// Drained reports whether Drain answered the request (its Forward, if it
// is one, is the drain's).
func (g *Gate) Drained() bool { return g.drained }

func (g *Gate) unhold() {
	g.t.Unhold(g.held)
	g.held = Ticket{}
}
