package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A client that keeps its connection open but stops reading would keep its
// request generating (and its KV blocks held) for as long as the kernel
// buffers its output. A streaming response therefore watches three bounds.
//
// The first to fire is the peer's receive window, where the platform
// reports it (Linux's TCP_INFO): its right edge (bytes acknowledged plus
// the window last advertised) moves forward only as the client's kernel
// makes room, and a receiver never moves it back. Bytes sent but not
// acknowledged while the edge stays put for StreamStallTimeout mean the
// client's buffer is full and its application takes nothing out: the
// request is cancelled at once, whether or not a write is blocked, instead
// of after our own send buffer fills too. A stream with nothing unsent or
// unacknowledged (idle, a long prefill, a slow model) never counts as
// stalled: the clock only runs while output waits for the client. Until
// the client's kernel stops taking data nothing tells it from a reader's:
// Linux 6.x grows the receive buffer of an application that reads nothing
// while small segments arrive (up to net.ipv4.tcp_rmem's maximum, 32 MB
// by default), so such a client may absorb a whole stream; one whose
// buffer is bounded is judged the timeout after it fills. Measured on
// Linux 6.18 over loopback with default buffers: at 20 KB/s in 200-byte
// writes (a token stream) a client reading nothing advertised the same
// 64 KiB window for 20 s while its buffer grew from 128 to 548 KiB, and
// the server's TCP_INFO differed from a reader's in nothing reliable (a
// reader's window grew to 130 KiB at 20 KB/s, but stayed at 64 KiB at
// 4 KB/s, as a non-reader's does); at 140 KB/s its window shut within
// 4 s, at 120 KB. Capping our send buffer (SO_SNDBUF, TCP_NOTSENT_LOWAT) cannot
// help: that client acknowledges everything, so nothing waits in it.
//
// The other two are the fallbacks where the window is not known: a write
// that blocks longer than StreamWriteTimeout, and more than
// StreamMaxBufferedBytes sent but not yet taken by the client (the
// socket's send queue). Each cancels the request.

// Stall reasons, the label of kvpilot_stream_stalled_total.
const (
	stallWriteTimeout = "write_timeout"
	stallBuffered     = "buffered_bytes"
	stallNotReading   = "not_reading"
)

// errStalled is a streaming write refused because the client stopped
// reading.
type errStalled struct {
	reason string
	detail string
}

func (e *errStalled) Error() string { return "client stopped reading (" + e.reason + "): " + e.detail }

type connKey struct{}

// ConnContext records the connection in the request context, so streaming
// responses can see how much output the client has not taken yet. Set it
// as the http.Server's ConnContext.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

func connOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}

func newStalledCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvpilot_stream_stalled_total",
		Help: "Streaming requests cancelled because the client stopped reading, by reason (not_reading, write_timeout, buffered_bytes).",
	}, []string{"reason"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	for _, r := range []string{stallNotReading, stallWriteTimeout, stallBuffered} {
		c.WithLabelValues(r) // present from the start, at 0
	}
	return c, nil
}

// streamWriter writes one streaming response under the stall bounds.
type streamWriter struct {
	w           http.ResponseWriter
	rc          *http.ResponseController
	conn        net.Conn
	timeout     time.Duration
	maxBuffered int64
	watch       *stallWatch // nil: the window is not watched
}

// newStreamWriter starts watching the client's receive window (when
// StreamStallTimeout is on and the platform reports it); onStall, when
// not nil, is called once, from the watcher, when the client stopped
// reading: it cancels the request, so its KV is freed even while no
// write is under way. Call done when the response ends.
func (s *Server) newStreamWriter(w http.ResponseWriter, r *http.Request, onStall func()) *streamWriter {
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), conn: connOf(r),
		timeout: s.cfg.StreamWriteTimeout, maxBuffered: s.cfg.StreamMaxBufferedBytes}
	// Only HTTP/1: the connection's window is this response's alone.
	if s.cfg.StreamStallTimeout > 0 && sw.conn != nil && r.ProtoMajor == 1 {
		if _, _, ok := peerWindow(sw.conn); ok {
			sw.watch = startStallWatch(sw.conn, s.cfg.StreamStallTimeout, onStall)
		}
	}
	return sw
}

// write writes p and, with flush, sends it to the client. The deadline is
// set before the write: a write that fills the response buffer reaches the
// socket too. It is set before the watcher's verdict is read, so a
// verdict reached during the write (which moves the deadline to the past)
// ends it.
func (sw *streamWriter) write(p []byte, flush bool) error {
	if sw.timeout > 0 {
		// Unsupported deadlines (a wrapped writer) only lose the
		// slow-client protection.
		_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	}
	if err := sw.stalled(); err != nil {
		return err
	}
	_, err := sw.w.Write(p)
	if err == nil && flush {
		err = sw.rc.Flush()
	}
	if err != nil {
		if stalled := sw.stalled(); stalled != nil {
			return stalled
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &errStalled{reason: stallWriteTimeout, detail: fmt.Sprintf("a write blocked for %v", sw.timeout)}
		}
		return err
	}
	if flush && sw.maxBuffered > 0 && sw.conn != nil {
		if n, ok := unsentBytes(sw.conn); ok && int64(n) > sw.maxBuffered {
			return &errStalled{reason: stallBuffered, detail: fmt.Sprintf("%d bytes sent but not read; the limit is %d", n, sw.maxBuffered)}
		}
	}
	return nil
}

// stalled is the watcher's verdict, nil while the client reads.
func (sw *streamWriter) stalled() error {
	if sw.watch == nil {
		return nil
	}
	if e := sw.watch.verdict.Load(); e != nil {
		return e
	}
	return nil
}

// done stops the watcher and clears the write deadline: the connection
// may serve another request.
func (sw *streamWriter) done() {
	if sw.watch != nil {
		sw.watch.stop()
	}
	if sw.timeout > 0 {
		_ = sw.rc.SetWriteDeadline(time.Time{})
	}
}

// stallWatch samples one connection's TCP state on a ticker, so a stream
// is judged while its handler waits for the engine or blocks in a write.
type stallWatch struct {
	conn    net.Conn
	timeout time.Duration
	onStall func()
	verdict atomic.Pointer[errStalled]
	quit    chan struct{}
	exited  chan struct{}
}

// stallCheckPeriod is how often a watcher samples: a tenth of the
// timeout, between 100 ms and 1 s.
func stallCheckPeriod(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 100*time.Millisecond), time.Second)
}

func startStallWatch(c net.Conn, timeout time.Duration, onStall func()) *stallWatch {
	w := &stallWatch{conn: c, timeout: timeout, onStall: onStall, quit: make(chan struct{}), exited: make(chan struct{})}
	go w.run()
	return w
}

func (w *stallWatch) run() {
	defer close(w.exited)
	t := time.NewTicker(stallCheckPeriod(w.timeout))
	defer t.Stop()
	var j stallJudge
	for {
		select {
		case <-w.quit:
			return
		case now := <-t.C:
			edge, pending, ok := peerWindow(w.conn)
			if !ok {
				return // closed: the handler's write or read fails
			}
			waited := j.observe(now, edge, pending)
			if waited < w.timeout {
				continue
			}
			w.verdict.Store(&errStalled{reason: stallNotReading, detail: fmt.Sprintf(
				"%d bytes sent and the client's receive window unmoved for %v (it reads nothing)", pending, waited.Round(time.Millisecond))})
			// A write blocked on the full socket ends now; the next one
			// sees the verdict.
			_ = w.conn.SetWriteDeadline(time.Now())
			if w.onStall != nil {
				w.onStall()
			}
			return
		}
	}
}

// stop ends the watcher and waits for it, so it touches the connection
// no more.
func (w *stallWatch) stop() {
	close(w.quit)
	<-w.exited
}

// stallJudge measures how long output has waited for a client that makes
// no room for it.
type stallJudge struct {
	edge  uint64    // the window's right edge at since
	since time.Time // when the edge last moved or nothing was pending
}

// observe takes one sample: the window's right edge and the bytes not yet
// acknowledged. It returns how long, up to now, bytes have been pending
// while the edge stayed where it was. Nothing pending (an idle stream, or
// a client that took everything) or a moved edge starts the clock again.
func (j *stallJudge) observe(now time.Time, edge uint64, pending int) time.Duration {
	if pending == 0 {
		j.since = time.Time{}
		return 0
	}
	if edge != j.edge || j.since.IsZero() {
		j.edge, j.since = edge, now
		return 0
	}
	return now.Sub(j.since)
}
