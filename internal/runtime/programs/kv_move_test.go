package programs

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// A placement that places a program with a Fetch holds its requests while
// the fetch runs and lets them run after it; the pod it left keeps its
// context to serve.
func TestFetchHoldsRequestsUntilTheKVArrives(t *testing.T) {
	started, release := make(chan string, 1), make(chan struct{})
	b := New(Config{Pod: "b", Addr: "b:8000", FetchKV: func(ctx context.Context, id, addr string, done func()) {
		started <- id + "@" + addr
		go func() {
			<-release
			done()
		}()
	}})
	b.Apply(&wire.Placement{Version: 1, Place: []string{"p"}, Fetch: map[string]string{"p": "a:9000"}})
	if got := <-started; got != "p@a:9000" {
		t.Fatalf("fetch of %s", got)
	}
	r := b.Route("p", true)
	if r.Kind != Hold {
		t.Fatalf("route while fetching: %v", r.Kind)
	}
	close(release)
	select {
	case <-r.Wait:
	case <-time.After(5 * time.Second):
		t.Fatal("the held request was not woken after the fetch")
	}
	b.Unhold(r.Ticket)
	if r := b.Route("p", true); r.Kind != Local {
		t.Fatalf("route after the fetch: %v", r.Kind)
	}

	a := New(Config{Pod: "a", Addr: "a:8000"})
	q := a.Route("q", false)
	if q.Kind != Local {
		t.Fatalf("route on a: %v", q.Kind)
	}
	a.Started(q.Ticket, 3, "s")
	a.End(q.Ticket, 3, 0, []int32{1, 2, 3})
	a.Apply(&wire.Placement{Version: 1, Routes: map[string]string{"q": "b:8000"}})
	salt, toks, ok := a.KVContext("q")
	if !ok || salt != "s" || !slices.Equal(toks, []int32{1, 2, 3}) {
		t.Fatalf("context of a program that moved away: %q %v %v", salt, toks, ok)
	}
}

// A fetch that never returns is cut at FetchTimeout and the requests run.
func TestFetchIsBounded(t *testing.T) {
	b := New(Config{Pod: "b", Addr: "b:8000", FetchTimeout: 20 * time.Millisecond, FetchKV: func(ctx context.Context, id, addr string, done func()) {
		go func() {
			<-ctx.Done()
			done()
		}()
	}})
	b.Apply(&wire.Placement{Version: 1, Place: []string{"p"}, Fetch: map[string]string{"p": "a:9000"}})
	r := b.Route("p", true)
	if r.Kind != Hold {
		t.Fatalf("route while fetching: %v", r.Kind)
	}
	select {
	case <-r.Wait:
	case <-time.After(5 * time.Second):
		t.Fatal("a fetch past its timeout still holds the request")
	}
}
