package server

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// ConnLimiter bounds the API port's open connections. Each holds a file
// descriptor, and a flood of clients that connect and then send their
// request slowly (or never) would otherwise take every descriptor the
// process has: the API, /health, /ready and the control port would then
// accept nothing until the read timeouts ran out, and the kubelet would
// restart a pod that was only being slow-walked.
//
// Connections that are still reading a request (its headers or its body)
// and idle keep-alive connections may be closed to make room; a connection
// whose request has been read (it is generating, or streaming its answer)
// never is. Accepting a connection over the limit closes the oldest of the
// closable ones, so the newest client, a probe or a real request, gets in;
// when every connection is serving, the new one is closed instead.
//
// Wire it as the http.Server's listener (Listener), ConnState (ConnState)
// and ConnContext (ConnContext, which the Server reads to mark a request
// read).
type ConnLimiter struct {
	limit   int
	evicted prometheus.Counter

	mu       sync.Mutex
	open     int
	closable *list.List // of *limitedConn, oldest first
}

// NewConnLimiter bounds connections to limit (at least 1). evicted, if not
// nil, counts the connections closed to make room.
func NewConnLimiter(limit int, evicted prometheus.Counter) *ConnLimiter {
	return &ConnLimiter{limit: max(limit, 1), evicted: evicted, closable: list.New()}
}

// NewConnEvictedCounter is kvpilot_api_connections_evicted_total,
// registered with reg.
func NewConnEvictedCounter(reg prometheus.Registerer) (prometheus.Counter, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvpilot_api_connections_evicted_total",
		Help: "API connections closed to stay within --max-connections: the oldest still reading a request or idle, or a new one when every connection was serving.",
	})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Limit is the bound.
func (l *ConnLimiter) Limit() int { return l.limit }

// Open is the number of connections open now.
func (l *ConnLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Listener wraps ln so that its connections count against the limit.
func (l *ConnLimiter) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

// ConnState is the http.Server's ConnState hook: a connection waiting for
// or reading a request is closable again; a closed or hijacked one leaves
// the count.
func (l *ConnLimiter) ConnState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateActive, http.StateIdle:
		l.setClosable(lc, true)
	case http.StateHijacked, http.StateClosed:
		lc.release()
	}
}

// requestRead marks the connection of r as serving a request whose body
// has been read: it is no longer closed to make room.
func requestRead(r *http.Request) {
	if lc, ok := connOf(r).(*limitedConn); ok {
		lc.l.setClosable(lc, false)
	}
}

func (l *ConnLimiter) setClosable(c *limitedConn, closable bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	if closable && c.elem == nil {
		c.elem = l.closable.PushBack(c)
	} else if !closable && c.elem != nil {
		l.closable.Remove(c.elem)
		c.elem = nil
	}
}

// admit counts c in and returns the connection to close to make room (c
// itself when no other may be closed), or nil.
func (l *ConnLimiter) admit(c *limitedConn) *limitedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open++
	c.elem = l.closable.PushBack(c)
	if l.open <= l.limit {
		return nil
	}
	victim := l.closable.Front().Value.(*limitedConn)
	// The new connection is at the back: it is the victim only when it is
	// the one closable connection.
	l.closable.Remove(victim.elem)
	victim.elem = nil
	victim.released = true
	l.open--
	return victim
}

type limitedListener struct {
	net.Listener
	l *ConnLimiter
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: ln.l}
		victim := ln.l.admit(lc)
		if victim != nil {
			if ln.l.evicted != nil {
				ln.l.evicted.Inc()
			}
			_ = victim.Conn.Close()
		}
		if victim != lc {
			return lc, nil
		}
	}
}

// limitedConn is a connection of a ConnLimiter; elem is its place among
// the closable ones (nil while serving), released once it left the count.
type limitedConn struct {
	net.Conn
	l        *ConnLimiter
	elem     *list.Element
	released bool
}

func (c *limitedConn) release() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	c.l.open--
	if c.elem != nil {
		c.l.closable.Remove(c.elem)
		c.elem = nil
	}
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// SyscallConn passes the socket through, so a stream can read its send
// queue (unsentBytes).
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}
