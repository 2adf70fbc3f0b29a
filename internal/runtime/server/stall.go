package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A client that keeps its connection open but stops reading would keep its
// request generating (and its KV blocks held) for as long as the kernel
// buffers its output. A streaming response therefore watches two bounds:
// a write that blocks longer than StreamWriteTimeout, and more than
// StreamMaxBufferedBytes sent but not yet taken by the client (the
// socket's send queue, read where the platform tells it). Either cancels
// the request.

// Stall reasons, the label of kvpilot_stream_stalled_total.
const (
	stallWriteTimeout = "write_timeout"
	stallBuffered     = "buffered_bytes"
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
		Help: "Streaming requests cancelled because the client stopped reading, by reason (write_timeout, buffered_bytes).",
	}, []string{"reason"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	for _, r := range []string{stallWriteTimeout, stallBuffered} {
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
}

func (s *Server) newStreamWriter(w http.ResponseWriter, r *http.Request) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), conn: connOf(r),
		timeout: s.cfg.StreamWriteTimeout, maxBuffered: s.cfg.StreamMaxBufferedBytes}
}

// write writes p and, with flush, sends it to the client. The deadline is
// set before the write: a write that fills the response buffer reaches the
// socket too.
func (sw *streamWriter) write(p []byte, flush bool) error {
	if sw.timeout > 0 {
		// Unsupported deadlines (a wrapped writer) only lose the
		// slow-client protection.
		_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	}
	_, err := sw.w.Write(p)
	if err == nil && flush {
		err = sw.rc.Flush()
	}
	if err != nil {
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

// done clears the write deadline: the connection may serve another request.
func (sw *streamWriter) done() {
	if sw.timeout > 0 {
		_ = sw.rc.SetWriteDeadline(time.Time{})
	}
}
