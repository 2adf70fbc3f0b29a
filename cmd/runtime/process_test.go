package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kvpilot/kvpilot/internal/runtime/control"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// This file runs the runtime binary as real processes on loopback.

var (
	binOnce sync.Once
	binFile string
	binErr  error
)

// runtimeBin builds the binary once per test run.
func runtimeBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kvpilot-runtime-test")
		if err != nil {
			binErr = err
			return
		}
		binFile = filepath.Join(dir, "runtime")
		if out, err := exec.Command("go", "build", "-o", binFile, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binFile
}

const testControlToken = "test-control-token"

// pod is one runtime process.
type pod struct {
	t        *testing.T
	name     string
	cmd      *exec.Cmd
	api, ctl string
	exited   chan struct{}
	exitErr  error

	mu   sync.Mutex
	logs bytes.Buffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPod runs the sim executor with a control API; extra flags follow.
func startPod(t *testing.T, name string, extra ...string) *pod {
	t.Helper()
	bin := runtimeBin(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testControlToken), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &pod{t: t, name: name, api: freeAddr(t), ctl: freeAddr(t), exited: make(chan struct{})}
	_, apiPort, _ := net.SplitHostPort(p.api)
	_, ctlPort, _ := net.SplitHostPort(p.ctl)
	args := append([]string{"--executor", "sim", "--host", "127.0.0.1", "--port", apiPort,
		"--control-port", ctlPort, "--control-token-file", tokenFile, "--advertise-addr", p.api, "--pod-name", name,
		"--kv-cache-blocks", "2048", "--max-model-len", "8192", "--log-level", "info"}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = cleanEnv()
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exitErr = p.cmd.Wait(); pw.Close(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("--- %s logs ---\n%s", name, p.logText())
		}
	})
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + p.api + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited during start:\n%s", name, p.logText())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s not ready after %v", name, startTimeout)
	return nil
}

func (p *pod) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func (p *pod) push(pl *wire.Placement) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := control.NewClient(testControlToken, 5*time.Second).Push(ctx, p.ctl, pl); err != nil {
		p.t.Fatalf("push to %s: %v", p.name, err)
	}
}

// metrics scrapes /metrics: each family's samples summed.
func (p *pod) metrics() map[string]float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.api + "/metrics")
	if err != nil {
		p.t.Fatalf("scrape %s: %v", p.name, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		p.t.Fatalf("parse %s metrics: %v", p.name, err)
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

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/completions", strings.NewReader(body))
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
	go func() { held <- post(ctx, a.api, "held", `{"prompt":"wait for me","max_tokens":8}`) }()
	go func() {
		moved <- post(ctx, a.api, "moved", `{"prompt":"move me","max_tokens":250,"ignore_eos":true,"stream":true}`)
	}()
	waitUntil(t, "two held requests", 10*time.Second, func() bool { return a.metrics()["kvpilot_held_requests"] == 2 })

	// The controller places "moved" on pod B: its held request is forwarded
	// there and streams through A when A is told to stop.
	a.push(&wire.Placement{Version: 2, Routes: map[string]string{"moved": b.api}})
	waitUntil(t, "the moved program running on pod B", 10*time.Second, func() bool {
		return b.metrics()["vllm:num_requests_running"] == 1
	})
	// A local request far longer than the drain timeout.
	go func() {
		local <- post(ctx, a.api, "", `{"prompt":"long","max_tokens":6000,"ignore_eos":true,"stream":true}`)
	}()
	waitUntil(t, "the local request running on pod A", 10*time.Second, func() bool {
		return a.metrics()["vllm:num_requests_running"] == 1
	})

	sigterm := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
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
	if r.err != nil || r.status != http.StatusOK || r.header.Get("X-Kvpilot-Served-By") != b.api || !strings.HasSuffix(strings.TrimSpace(r.body), "data: [DONE]") {
		t.Errorf("moved request: %d %v served by %q; want a whole stream from pod B", r.status, r.err, r.header.Get("X-Kvpilot-Served-By"))
	}
	r = <-local
	if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, `"error"`) || !strings.HasSuffix(strings.TrimSpace(r.body), "data: [DONE]") {
		t.Errorf("local request cut by the deadline: %d %v, tail %q; want an error event and [DONE]", r.status, r.err, tail(r.body))
	}

	select {
	case <-a.exited:
	case <-time.After(drainTimeout + 5*time.Second):
		t.Fatalf("pod A still running %v after SIGTERM", time.Since(sigterm))
	}
	if took := time.Since(sigterm); took > drainTimeout+time.Second {
		t.Errorf("shutdown took %v; want at most the drain timeout %v + 1 s", took, drainTimeout)
	}
	if a.exitErr != nil {
		t.Errorf("exit: %v", a.exitErr)
	}
	if strings.Contains(a.logText(), "level=ERROR") {
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
		c, err := d.Dial("tcp", a.api)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		defer c.Close()
		body := fmt.Sprintf(`{"prompt":"reader %d stops reading","max_tokens":7000,"ignore_eos":true,"stream":true}`, i)
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", a.api, len(body), body)
	}
	waitUntil(t, "the stalled requests running", 10*time.Second, func() bool {
		return a.metrics()["vllm:num_requests_running"] == stalled
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader := post(ctx, a.api, "", `{"prompt":"I read everything","max_tokens":400,"ignore_eos":true,"stream":true}`)
	if reader.err != nil || reader.status != http.StatusOK || !strings.HasSuffix(strings.TrimSpace(reader.body), "data: [DONE]") || strings.Contains(reader.body, `"error"`) {
		t.Errorf("reading client: %d %v, tail %q", reader.status, reader.err, tail(reader.body))
	}
	start := time.Now()
	waitUntil(t, "every stalled stream cancelled and its KV freed", 30*time.Second, func() bool {
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
	gone := freeAddr(t) // nothing listens there
	a.push(&wire.Placement{Version: 1, Routes: map[string]string{"orphan": gone}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := post(ctx, a.api, "orphan", `{"prompt":"hello","max_tokens":4}`)
	if r.err != nil || r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"code":"upstream_unavailable"`) {
		t.Errorf("got %d %v %s; want 503 upstream_unavailable", r.status, r.err, r.body)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	waitUntil(t, "a log line naming the pod", 5*time.Second, func() bool {
		return strings.Contains(a.logText(), "pod="+gone) && strings.Contains(a.logText(), "program=orphan")
	})
}
