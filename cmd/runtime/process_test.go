package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	"github.com/kvpilot/kvpilot/internal/util/testing/runtimeproc"
)

// This file runs the runtime binary as real processes on loopback.

const testControlToken = "test-control-token"

// pod is one runtime process.
type pod struct {
	*runtimeproc.Pod
	t testing.TB
}

// startPod runs the sim executor with a control API; extra flags follow.
func startPod(t testing.TB, name string, extra ...string) *pod {
	t.Helper()
	p := runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options: runtimeproc.Options{
			Name: name,
			Args: append([]string{"--kv-cache-blocks", "2048", "--max-model-len", "8192"}, extra...),
			Env:  cleanEnv(),
		},
		ControlToken: testControlToken,
		ReadyTimeout: startTimeout,
	})
	return &pod{Pod: p, t: t}
}

func (p *pod) push(pl *wire.Placement) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := controlclient.New(testControlToken, 5*time.Second).Push(ctx, p.Control, pl); err != nil {
		p.t.Fatalf("push to %s: %v", p.Name, err)
	}
}

// metrics scrapes /metrics: each family's samples summed.
func (p *pod) metrics() map[string]float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.API + "/metrics")
	if err != nil {
		p.t.Fatalf("scrape %s: %v", p.Name, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		p.t.Fatalf("parse %s metrics: %v", p.Name, err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name] += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] += m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// result is what one client got.
type result struct {
	status     int
	header     http.Header
	body       string
	err        error
	answeredAt time.Time
}

func post(ctx context.Context, addr, program, body string) result {
	return postTo(ctx, addr, "/v1/completions", program, body)
}

// postTo is post to another endpoint than /v1/completions.
func postTo(ctx context.Context, addr, path, program, body string) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if program != "" {
		req.Header.Set("X-Program-Id", program)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{err: err, answeredAt: time.Now()}
	}
	defer resp.Body.Close()
	r := result{status: resp.StatusCode, header: resp.Header, answeredAt: time.Now()}
	b, err := io.ReadAll(resp.Body)
	r.body, r.err = string(b), err
	return r
}

// TestProcessSIGTERMWithHeldRequests (issue 11, item 1): a pod holding
// requests for paused programs gets SIGTERM. Every client gets a status or
// is served elsewhere, the held one at once, and the process exits within
// the drain timeout (+1 s for the process to go).
func TestProcessSIGTERMWithHeldRequests(t *testing.T) {
	const drainTimeout = 4 * time.Second
	a := startPod(t, "pod-a", "--drain-timeout", drainTimeout.String())
	b := startPod(t, "pod-b")
	a.push(&wire.Placement{Version: 1, Routes: map[string]string{"held": "", "moved": ""}})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held := make(chan result, 1)
	moved := make(chan result, 1)
	local := make(chan result, 1)
	go func() { held <- post(ctx, a.API, "held", `{"prompt":"wait for me","max_tokens":8}`) }()
	go func() {
		moved <- post(ctx, a.API, "moved", `{"prompt":"move me","max_tokens":250,"ignore_eos":true,"stream":true}`)
	}()
	poll.Until(t, 10*time.Second, "two held requests", func() bool { return a.metrics()["kvpilot_held_requests"] == 2 })

	// The controller places "moved" on pod B: its held request is forwarded
	// there and streams through A when A is told to stop.
	a.push(&wire.Placement{Version: 2, Routes: map[string]string{"moved": b.API}})
	poll.Until(t, 10*time.Second, "the moved program running on pod B", func() bool {
		return b.metrics()["vllm:num_requests_running"] == 1
	})
	// A local request far longer than the drain timeout.
	go func() {
		local <- post(ctx, a.API, "", `{"prompt":"long","max_tokens":6000,"ignore_eos":true,"stream":true}`)
	}()
	poll.Until(t, 10*time.Second, "the local request running on pod A", func() bool {
		return a.metrics()["vllm:num_requests_running"] == 1
	})

	sigterm := time.Now()
	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	r := <-held
	if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"draining"`) {
		t.Errorf("held request: %d %v %q Retry-After %q; want 503 draining with Retry-After", r.status, r.err, r.body, r.header.Get("Retry-After"))
	}
	if d := r.answeredAt.Sub(sigterm); d > time.Second {
		t.Errorf("the held request was answered %v after SIGTERM; want at once", d)
	}
	r = <-moved
	if r.err != nil || r.status != http.StatusOK || r.header.Get("X-Kvpilot-Served-By") != b.API || !strings.HasSuffix(strings.TrimSpace(r.body), "data: [DONE]") {
		t.Errorf("moved request: %d %v served by %q; want a whole stream from pod B", r.status, r.err, r.header.Get("X-Kvpilot-Served-By"))
	}
	r = <-local
	if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, `"error"`) || !strings.HasSuffix(strings.TrimSpace(r.body), "data: [DONE]") {
		t.Errorf("local request cut by the deadline: %d %v, tail %q; want an error event and [DONE]", r.status, r.err, tail(r.body))
	}

	select {
	case <-a.Exited():
	case <-time.After(drainTimeout + 5*time.Second):
		t.Fatalf("pod A still running %v after SIGTERM", time.Since(sigterm))
	}
	if took := time.Since(sigterm); took > drainTimeout+time.Second {
		t.Errorf("shutdown took %v; want at most the drain timeout %v + 1 s", took, drainTimeout)
	}
	if err := a.ExitErr(); err != nil {
		t.Errorf("exit: %v", err)
	}
	if strings.Contains(a.Log(), "level=ERROR") {
		t.Errorf("a normal drain logged errors")
	}
}

func tail(s string) string {
	if len(s) > 300 {
		return s[len(s)-300:]
	}
	return s
}

// TestProcessCancelsStalledReaders (issue 11, item 2): clients that keep the
// socket open but stop reading lose their batch slot and KV within
// seconds, counted in kvpilot_stream_stalled_total, while a client that
// reads is served to the end.
func TestProcessCancelsStalledReaders(t *testing.T) {
	a := startPod(t, "pod-a", "--stream-write-timeout", "2s", "--stream-max-buffered-bytes", "64Ki")
	const stalled = 4
	var conns []net.Conn
	for i := range stalled {
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			// A small receive window, so the pod's send queue fills fast.
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			if err != nil {
				return err
			}
			return serr
		}}
		c, err := d.Dial("tcp", a.API)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		defer c.Close()
		body := fmt.Sprintf(`{"prompt":"reader %d stops reading","max_tokens":7000,"ignore_eos":true,"stream":true}`, i)
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", a.API, len(body), body)
	}
	poll.Until(t, 10*time.Second, "the stalled requests running", func() bool {
		return a.metrics()["vllm:num_requests_running"] == stalled
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader := post(ctx, a.API, "", `{"prompt":"I read everything","max_tokens":400,"ignore_eos":true,"stream":true}`)
	if reader.err != nil || reader.status != http.StatusOK || !strings.HasSuffix(strings.TrimSpace(reader.body), "data: [DONE]") || strings.Contains(reader.body, `"error"`) {
		t.Errorf("reading client: %d %v, tail %q", reader.status, reader.err, tail(reader.body))
	}
	start := time.Now()
	poll.Until(t, 30*time.Second, "every stalled stream cancelled and its KV freed", func() bool {
		m := a.metrics()
		return m["kvpilot_stream_stalled_total"] == stalled && m["vllm:num_requests_running"] == 0 && m["vllm:kv_cache_usage_perc"] == 0
	})
	t.Logf("stalled streams cancelled %v after the reader finished", time.Since(start).Round(time.Millisecond))
	if m := a.metrics(); m["vllm:request_success_total"] < stalled+1 {
		t.Errorf("finished requests %v", m["vllm:request_success_total"])
	}
}

// TestProcessForwardToUnreachablePod (issue 11, item 4): a program placed
// on a pod that is gone gets 503 upstream_unavailable with Retry-After, not
// "draining", and the log names the pod.
func TestProcessForwardToUnreachablePod(t *testing.T) {
	a := startPod(t, "pod-a")
	gone := runtimeproc.FreeAddr(t) // nothing listens there
	a.push(&wire.Placement{Version: 1, Routes: map[string]string{"orphan": gone}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := post(ctx, a.API, "orphan", `{"prompt":"hello","max_tokens":4}`)
	if r.err != nil || r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"code":"upstream_unavailable"`) {
		t.Errorf("got %d %v %s; want 503 upstream_unavailable", r.status, r.err, r.body)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	poll.Until(t, 5*time.Second, "a log line naming the pod", func() bool {
		return strings.Contains(a.Log(), "pod="+gone) && strings.Contains(a.Log(), "program=orphan")
	})
}

// TestIdleControlConnectionsDoNotStarveHealth: a thousand connections to
// the control port that never authenticate (some idle, some that announce
// a body they never send) do not use up the pod's file descriptors (256
// here): /health and the controller's calls still answer. Before the
// control port bounded such connections, they held one descriptor each
// until the pod could accept nothing, and its liveness probe failed.
func TestIdleControlConnectionsDoNotStarveHealth(t *testing.T) {
	p := runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options:      runtimeproc.Options{Name: "pod", Env: cleanEnv(), MaxOpenFiles: 256},
		ControlToken: testControlToken,
		ReadyTimeout: startTimeout,
	})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for i := range 1000 {
		c, err := net.DialTimeout("tcp", p.Control, 2*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%2 == 0 {
			_, _ = c.Write([]byte("PUT /v1/placement HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"))
		}
	}
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get("http://" + p.API + "/health")
	if err != nil {
		t.Fatalf("/health with 1000 idle control connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := controlclient.New(testControlToken, 3*time.Second).State(ctx, p.Control); err != nil {
		t.Errorf("the controller's call with 1000 idle control connections: %v", err)
	}
}

// TestSlowBodyFloodDoesNotStarveHealth (issue 34, item 3): 1,020
// connections to the API port that send a request's headers and then
// trickle (or never send) its body, under a 1,024 open-file limit, would
// hold a descriptor each until the pod could accept nothing: /health,
// /ready and the control port then time out. With the API port's
// connections bounded (three quarters of the limit here), the oldest
// slow ones are closed to make room and the probes and the controller's
// calls answer; a request being answered meanwhile is never closed.
func TestSlowBodyFloodDoesNotStarveHealth(t *testing.T) {
	p := &pod{t: t, Pod: runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options:      runtimeproc.Options{Name: "pod", Env: cleanEnv(), MaxOpenFiles: 1024},
		ControlToken: testControlToken,
		ReadyTimeout: startTimeout,
	})}
	// A stream that runs through the flood.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	streamed := make(chan result, 1)
	go func() {
		streamed <- post(ctx, p.API, "", `{"prompt":"hello","max_tokens":400,"ignore_eos":true,"stream":true}`)
	}()
	poll.Until(t, 10*time.Second, "the stream running", func() bool { return p.metrics()["vllm:num_requests_running"] == 1 })

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for i := range 1020 {
		c, err := net.DialTimeout("tcp", p.API, 2*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%2 == 0 {
			_, _ = c.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"prompt\":"))
		}
	}
	client := &http.Client{Timeout: 3 * time.Second}
	for _, path := range []string{"/health", "/ready"} {
		resp, err := client.Get("http://" + p.API + path)
		if err != nil {
			t.Fatalf("%s with 1020 slow connections: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if _, err := controlclient.New(testControlToken, 3*time.Second).State(cctx, p.Control); err != nil {
		t.Errorf("the controller's call with 1020 slow API connections: %v", err)
	}
	if got := p.metrics()["kvpilot_api_connections_evicted_total"]; got < 1020-768 {
		t.Errorf("kvpilot_api_connections_evicted_total = %v, want at least %d", got, 1020-768)
	}
	r := <-streamed
	if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, "[DONE]") {
		t.Errorf("the stream answered during the flood: status %d, err %v, body ends %q", r.status, r.err, tail(r.body))
	}
}
