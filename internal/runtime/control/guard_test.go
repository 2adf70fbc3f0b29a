package control

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// guardedServer is the control API served as the runtime does (NewServer
// on a GuardListener).
type guardedServer struct {
	addr  string
	guard *guardedListener
	// accepted receives each connection the server accepted, once the
	// guard has counted it.
	accepted chan net.Conn
}

// serveGuarded serves the control API on a GuardListener with the given
// bound.
func serveGuarded(t *testing.T, limit int) *guardedServer {
	t.Helper()
	tab := programs.New(programs.Config{Pod: "pod-a", KV: func() wire.KVReport { return wire.KVReport{BlockSize: 16, TotalBlocks: 10} }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := &guardedServer{addr: ln.Addr().String(), guard: GuardListener(ln, limit).(*guardedListener), accepted: make(chan net.Conn, 64)}
	srv := NewServer(Handler(tab, "s3cret"), nil)
	go func() { _ = srv.Serve(acceptNotifier{gs.guard, gs.accepted}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return gs
}

// acceptNotifier sends each connection its listener accepts on accepted.
type acceptNotifier struct {
	net.Listener
	accepted chan<- net.Conn
}

func (l acceptNotifier) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.accepted <- c:
		default: // nobody is counting
		}
	}
	return c, err
}

// unauthenticated is the client-side addresses of the connections the
// guard counts as unauthenticated.
func (gs *guardedServer) unauthenticated() map[string]bool {
	gs.guard.mu.Lock()
	defer gs.guard.mu.Unlock()
	out := map[string]bool{}
	for e := gs.guard.unauth.Front(); e != nil; e = e.Next() {
		out[e.Value.(*guardedConn).RemoteAddr().String()] = true
	}
	return out
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer reports whether the server closed c (a read ends with
// EOF or a reset) within wait.
func closedByServer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// TestUnauthorizedIsAnsweredWithoutItsBody: a request without the token
// that announces a body it never sends is answered 401 at once, with
// Connection: close; the server does not wait for the body first.
func TestUnauthorizedIsAnsweredWithoutItsBody(t *testing.T) {
	c := dial(t, serveGuarded(t, MaxUnauthenticatedConns).addr)
	if _, err := c.Write([]byte("PUT " + wire.PlacementPath + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer without the body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Errorf("answer %d, close %t; want 401 and Connection: close", resp.StatusCode, resp.Close)
	}
}

// TestGuardListenerBoundsUnauthenticatedConns: idle connections beyond the
// bound close the oldest; a connection that authenticated is no longer
// counted, and a new one still gets through.
func TestGuardListenerBoundsUnauthenticatedConns(t *testing.T) {
	const limit = 4
	gs := serveGuarded(t, limit)
	addr := gs.addr

	// An authenticated keep-alive connection, like the controller's.
	client := controlclient.New("s3cret", 2*time.Second)
	if _, err := client.State(t.Context(), addr); err != nil {
		t.Fatal(err)
	}
	for len(gs.accepted) > 0 { // its connection: accepted before it was answered
		<-gs.accepted
	}
	var idle []net.Conn
	for range 3 * limit {
		idle = append(idle, dial(t, addr))
		// Accept order is dial order only once each is accepted.
		select {
		case <-gs.accepted:
		case <-time.After(5 * time.Second):
			t.Fatalf("connection %d not accepted", len(idle))
		}
	}
	kept := gs.unauthenticated()
	for i, c := range idle {
		if want := i >= 2*limit; kept[c.LocalAddr().String()] != want {
			t.Errorf("idle connection %d of %d: counted %t, want %t (the newest %d stay)", i, len(idle), !want, want, limit)
		}
		// An evicted connection is closed: its read ends at once. One
		// kept is not: the read would wait out the deadline, so only the
		// evicted are read.
		if i < 2*limit && !closedByServer(c, 5*time.Second) {
			t.Errorf("idle connection %d of %d: evicted but not closed", i, len(idle))
		}
	}
	if len(kept) != limit {
		t.Errorf("%d connections counted, want the newest %d", len(kept), limit)
	}
	// The authenticated connection was not counted: it still serves, and
	// so does a new one.
	if _, err := client.State(t.Context(), addr); err != nil {
		t.Errorf("the controller's connection: %v", err)
	}
	if _, err := controlclient.New("s3cret", 2*time.Second).State(t.Context(), addr); err != nil {
		t.Errorf("a new authenticated connection: %v", err)
	}
}

// TestAuthorizeSchemeIsCaseInsensitive: the auth scheme's name is
// case-insensitive and one or more spaces follow it (RFC 7235 §2.1); the
// token itself is compared exactly.
func TestAuthorizeSchemeIsCaseInsensitive(t *testing.T) {
	h := Handler(programs.New(programs.Config{Pod: "pod-a"}), "s3cret")
	for auth, want := range map[string]int{
		"Bearer s3cret":  http.StatusOK,
		"bearer s3cret":  http.StatusOK,
		"BEARER s3cret":  http.StatusOK,
		"bEaReR  s3cret": http.StatusOK,
		"Bearer S3CRET":  http.StatusUnauthorized,
		"Bearer s3cret ": http.StatusUnauthorized,
		"Bearers3cret":   http.StatusUnauthorized,
		"Basic s3cret":   http.StatusUnauthorized,
		"s3cret":         http.StatusUnauthorized,
		"Bearer ":        http.StatusUnauthorized,
	} {
		req := httptest.NewRequest(http.MethodGet, wire.StatePath, nil)
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Authorization %q: %d, want %d", auth, rec.Code, want)
		}
	}
}
