//go:build linux

package server

import (
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// blackHole is a loopback address whose connects never complete: a socket
// listening with a backlog of one that never accepts, its queue filled, so
// the kernel drops further SYNs as a black-holed pod IP would.
func blackHole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skipf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Skipf("bind: %v", err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Skipf("listen: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}).String()
	// Fill the accept queue; once a connect does not complete at once,
	// the address is a black hole.
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("this kernel completes every connect to a full listen queue")
	return ""
}

// silentPod accepts connections and never answers.
func silentPod(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln.Addr().String()
}

// A forward to a pod that does not connect, or connects and never
// answers, fails with 503 within the forwarder's timeouts instead of
// hanging the client's request.
func TestForwardToAnUnresponsivePodFailsFast(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab, forwardKey: poolKey,
		forwardConnect: 300 * time.Millisecond, forwardHeader: 300 * time.Millisecond})
	for name, addr := range map[string]string{"black-holed": blackHole(t), "silent": silentPod(t)} {
		tab.Apply(&wire.Placement{Version: tab.Version() + 1, Routes: map[string]string{"p-" + name: addr}})
		start := time.Now()
		r := env.post("/v1/completions", gateBody, "X-Program-Id", "p-"+name)
		if r.status != http.StatusServiceUnavailable || time.Since(start) > 3*time.Second {
			t.Errorf("%s pod: %d after %v (%s); want 503 within the timeouts", name, r.status, time.Since(start), r.body)
		}
	}
}
