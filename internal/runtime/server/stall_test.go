package server

import (
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestStallJudge: the clock runs only while bytes wait and the window's
// right edge stays put; an idle stretch (nothing pending) or a moved edge
// starts it again, so a stream that was idle for long and then writes is
// not judged by the idle time.
func TestStallJudge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type sample struct {
		t       float64
		edge    uint64
		pending int
		want    time.Duration
	}
	for _, tc := range []struct {
		name    string
		samples []sample
	}{
		{"stuck", []sample{{0, 100, 10, 0}, {1, 100, 10, time.Second}, {12, 100, 50, 12 * time.Second}}},
		{"reading", []sample{{0, 100, 10, 0}, {1, 200, 10, 0}, {2, 300, 10, 0}, {3, 300, 10, time.Second}}},
		{"idle then writing", []sample{{0, 100, 0, 0}, {12, 100, 0, 0}, {12.1, 100, 200, 0}, {12.2, 300, 0, 0}}},
		{"idle then stuck", []sample{{0, 100, 0, 0}, {12, 100, 0, 0}, {12.1, 100, 200, 0}, {13.1, 100, 200, time.Second}}},
		{"stuck, then taken", []sample{{0, 100, 10, 0}, {5, 100, 10, 5 * time.Second}, {6, 100, 0, 0}, {7, 100, 10, 0}, {8, 100, 10, time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j stallJudge
			for _, s := range tc.samples {
				if got := j.observe(at(s.t), s.edge, s.pending); got != s.want {
					t.Errorf("at %vs (edge %d, %d pending): waited %v; want %v", s.t, s.edge, s.pending, got, s.want)
				}
			}
		})
	}
}

// TestStallWatchLoopback runs the watcher on loopback TCP: a client with
// a small receive buffer that reads nothing is judged within the timeout
// and a check period, and the verdict ends a write blocked on the full
// socket; a client that reads, and a connection that stays idle, are not.
// The watcher is a timer over a real socket (its judge is tested on
// explicit times above): the pauses and bounds here are the time it is
// about, so they sleep on purpose.
func TestStallWatchLoopback(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the receive window is read on Linux")
	}
	const timeout = time.Second
	pair := func(t *testing.T) (server, client net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
				return err
			}
			return serr
		}}
		client, err = d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close(); server.Close() })
		return server, client
	}
	event := []byte("data: " + strings.Repeat("x", 200) + "\n\n")
	// write sends events every 10 ms for d, or until a write fails: a
	// stream's pace, so sleeping on purpose.
	write := func(c net.Conn, d time.Duration) error {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, err := c.Write(event); err != nil {
				return err
			}
		}
		return nil
	}

	t.Run("not reading", func(t *testing.T) {
		server, _ := pair(t)
		var stalls atomic.Int32
		start := time.Now()
		w := startStallWatch(server, timeout, func() { stalls.Add(1) })
		defer w.stop()
		err := write(server, 30*time.Second)
		took := time.Since(start)
		if err == nil || w.verdict.Load() == nil || stalls.Load() != 1 {
			t.Fatalf("after %v: write error %v, verdict %v, %d stalls; want a failed write and one stall", took, err, w.verdict.Load(), stalls.Load())
		}
		if w.verdict.Load().reason != stallNotReading {
			t.Errorf("reason %q", w.verdict.Load().reason)
		}
		// The window closes after a few KB (a few tenths of a second), then
		// the timeout and up to one period to notice.
		if limit := 2*timeout + 2*stallCheckPeriod(timeout); took > limit {
			t.Errorf("judged after %v; want within %v", took, limit)
		}
	})
	t.Run("reading", func(t *testing.T) {
		server, client := pair(t)
		go io.Copy(io.Discard, client)
		w := startStallWatch(server, timeout, func() { t.Error("a reading client was judged stalled") })
		if err := write(server, 3*timeout); err != nil {
			t.Fatal(err)
		}
		w.stop()
	})
	t.Run("slow reader", func(t *testing.T) {
		// 40 events a second written, 20 read: behind, but reading. The
		// timeout is longer here: the window reopens only once half the
		// small buffer is free, and the machine may be loaded.
		const timeout = 3 * time.Second
		server, client := pair(t)
		go func() {
			buf := make([]byte, len(event))
			for {
				if _, err := io.ReadFull(client, buf); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond) // on purpose: a reader slower than the writer
			}
		}()
		w := startStallWatch(server, timeout, func() { t.Error("a slow reader was judged stalled") })
		// On purpose: 40 events a second, for three timeouts.
		for end := time.Now().Add(3 * timeout); time.Now().Before(end); time.Sleep(25 * time.Millisecond) {
			_ = server.SetWriteDeadline(time.Now().Add(time.Minute))
			if _, err := server.Write(event); err != nil {
				t.Fatal(err)
			}
		}
		w.stop()
	})
	t.Run("idle", func(t *testing.T) {
		server, _ := pair(t)
		w := startStallWatch(server, timeout, func() { t.Error("an idle stream was judged stalled") })
		if err := write(server, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * timeout) // on purpose: nothing written, the client reads nothing, for three timeouts
		w.stop()
	})
}
