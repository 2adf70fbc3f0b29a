package control

import (
	"container/list"
	"context"
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Bounds of the control port. The controller is its only legitimate
// client: one keep-alive connection per pod, a request every few seconds,
// placements of at most maxBody.
const (
	// MaxUnauthenticatedConns bounds the connections that have not yet
	// made an authenticated request; accepting one more closes the oldest
	// of them. Idle or half-sent connections without the token then hold
	// at most this many file descriptors, whatever their number.
	MaxUnauthenticatedConns = 64
	// Timeouts of the control server: a request's headers, its whole read
	// (headers and body), its response, and an idle keep-alive connection.
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// NewServer is the control port's HTTP server, with the bounds above,
// serving h: Handler, or Routes with more endpoints behind Authorize. Serve
// it on GuardListener(ln) so that unauthenticated connections are bounded
// too. Another control endpoint (the fleet's block transfers, say) added
// to Routes' mux inherits all of it.
func NewServer(h http.Handler, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.Default()
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       withGuardedConn,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// Authorize passes on requests that carry "Authorization: Bearer <token>"
// (the scheme in any case) and answers the others 401 at once, without
// reading their body, and closes their connection (Connection: close): a
// client without the token gets no more of the server than its headers.
// An empty token refuses everything (the control API is never open). A
// connection's first authenticated request lifts it out of GuardListener's
// bound.
func Authorize(token string, next http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		if token == "" || !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kvpilot-control"`)
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "control API: missing or wrong bearer token"})
			return
		}
		if c, ok := r.Context().Value(guardedConnKey{}).(*guardedConn); ok {
			c.authenticated()
		}
		next.ServeHTTP(w, r)
	})
}

// bearer is the credentials of an Authorization header of the Bearer
// scheme, whose name is case-insensitive (RFC 7235 §2.1: "bearer" is
// "Bearer") and followed by one or more spaces.
func bearer(header string) (string, bool) {
	scheme, creds, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(creds, " "), true
}

// GuardListener bounds the connections of ln that have made no
// authenticated request (see Authorize) to limit: accepting one more
// closes the oldest of them, so a flood of idle connections cannot take
// the process's file descriptors (and with them its API port and its
// liveness probe), and the newest connection, most likely the
// controller's, is the one that stays.
func GuardListener(ln net.Listener, limit int) net.Listener {
	return &guardedListener{Listener: ln, limit: limit, unauth: list.New()}
}

type guardedListener struct {
	net.Listener
	limit int

	mu     sync.Mutex
	unauth *list.List // of *guardedConn, oldest first
}

func (l *guardedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &guardedConn{Conn: c, l: l}
	var evict *guardedConn
	l.mu.Lock()
	if l.unauth.Len() >= l.limit {
		evict = l.unauth.Remove(l.unauth.Front()).(*guardedConn)
		evict.elem = nil
	}
	gc.elem = l.unauth.PushBack(gc)
	l.mu.Unlock()
	if evict != nil {
		_ = evict.Conn.Close()
	}
	return gc, nil
}

// guardedConn is a connection of a guardedListener; elem is its place
// among the unauthenticated ones, nil once authenticated or closed.
type guardedConn struct {
	net.Conn
	l    *guardedListener
	elem *list.Element
}

func (c *guardedConn) authenticated() { c.forget() }

func (c *guardedConn) forget() {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.unauth.Remove(c.elem)
		c.elem = nil
	}
	c.l.mu.Unlock()
}

func (c *guardedConn) Close() error {
	c.forget()
	return c.Conn.Close()
}

type guardedConnKey struct{}

// withGuardedConn is the server's ConnContext: Authorize finds the
// connection there.
func withGuardedConn(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*guardedConn); ok {
		return context.WithValue(ctx, guardedConnKey{}, gc)
	}
	return ctx
}
