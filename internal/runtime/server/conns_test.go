package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// pipeListener hands out one end of a net.Pipe per Accept.
type pipeListener struct {
	net.Listener
	conns chan net.Conn
}

func (l *pipeListener) Accept() (net.Conn, error) { return <-l.conns, nil }

// accept runs one Accept of ln on a fresh pipe and returns the server end
// and whether the client end was closed by it.
func acceptPipe(t *testing.T, src *pipeListener, ln net.Listener) (net.Conn, net.Conn) {
	t.Helper()
	server, client := net.Pipe()
	src.conns <- server
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c, client
}

// closed tells whether the other end of the pipe c was closed (a write
// to an open pipe nobody reads times out instead).
func closed(c net.Conn) bool {
	_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Write([]byte{0})
	return errors.Is(err, io.ErrClosedPipe)
}

// TestConnLimiter: over the limit, the oldest connection still reading a
// request (or idle) is closed; one whose request has been read never is;
// when none may be closed, the new one is.
func TestConnLimiter(t *testing.T) {
	src := &pipeListener{conns: make(chan net.Conn, 1)}
	l := NewConnLimiter(2, nil)
	ln := l.Listener(src)

	serving, servingClient := acceptPipe(t, src, ln)
	l.ConnState(serving, http.StateActive)
	r, _ := http.NewRequestWithContext(ConnContext(context.Background(), serving), http.MethodPost, "/", nil)
	requestRead(r)
	idle, idleClient := acceptPipe(t, src, ln)
	l.ConnState(idle, http.StateIdle)
	if l.Open() != 2 {
		t.Fatalf("open = %d, want 2", l.Open())
	}

	// A third: the idle one goes, not the serving one.
	third, thirdClient := acceptPipe(t, src, ln)
	if !closed(idleClient) {
		t.Error("the idle connection is open; want it closed to make room")
	}
	if closed(servingClient) {
		t.Error("the serving connection was closed")
	}
	if l.Open() != 2 {
		t.Fatalf("open = %d, want 2", l.Open())
	}

	// The third reads its request too: both serve, so a fourth is closed
	// itself.
	l.ConnState(third, http.StateActive)
	r3, _ := http.NewRequestWithContext(ConnContext(context.Background(), third), http.MethodPost, "/", nil)
	requestRead(r3)
	fourthServer, fourthClient := net.Pipe()
	src.conns <- fourthServer
	fifthServer, _ := net.Pipe()
	accepted := make(chan net.Conn)
	go func() { c, _ := ln.Accept(); accepted <- c }()
	if !closed(fourthClient) {
		t.Error("with every connection serving, the new one is open; want it closed")
	}
	_ = thirdClient

	// Accept goes on; once a connection closes, the next one is let in.
	l.ConnState(serving, http.StateClosed)
	_ = serving.Close()
	src.conns <- fifthServer
	if c := <-accepted; c.(*limitedConn).Conn != fifthServer {
		t.Error("Accept did not go on to the next connection")
	}
	if l.Open() != 2 {
		t.Fatalf("open = %d, want 2", l.Open())
	}
}
