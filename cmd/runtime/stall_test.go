package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// stallStream opens a streaming completion on a plain connection and
// never reads it: the client of issue 34 that stopped reading. rcvbuf,
// when not 0, is its socket's receive buffer (SO_RCVBUF); 0 leaves the
// kernel's default.
func stallStream(t testing.TB, addr string, rcvbuf int, body string) net.Conn {
	t.Helper()
	c, err := dialer(rcvbuf).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	return c
}

// dialer sets SO_RCVBUF to rcvbuf on its connections unless it is 0.
func dialer(rcvbuf int) *net.Dialer {
	if rcvbuf == 0 {
		return &net.Dialer{}
	}
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) }); err != nil {
			return err
		}
		return serr
	}}
}

// readStream posts a streaming completion and reads its events, each
// after wait, on a connection of its own (rcvbuf as stallStream's); it
// returns when the headers arrived and then when each event was read,
// the last event's data and any error. A done ctx ends it.
func readStream(ctx context.Context, addr string, rcvbuf int, body string, wait time.Duration) (arrivals []time.Time, last string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{DialContext: dialer(rcvbuf).DialContext}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("status %d", resp.StatusCode)
	}
	arrivals = append(arrivals, time.Now())
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		arrivals = append(arrivals, time.Now())
		last = line
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return arrivals, last, ctx.Err()
			}
		}
	}
	return arrivals, last, sc.Err()
}

// TestProcessCancelsStreamsWhoseClientReadsNothing (issue 34, item 2):
// with the runtime's default flags, 50 clients that stop reading are
// cancelled by the receive-window check (reason not_reading) within 15 s
// and their KV freed, while the clients beside them that read are served
// to the end. The stalled clients' receive buffers are small, so their
// windows close at once: with the kernel's default buffers a Linux 6.x
// client that reads nothing grows its buffer while small writes arrive
// (up to net.ipv4.tcp_rmem's maximum) and cannot be told from a reader
// until it stops (see docs/api.md).
func TestProcessCancelsStreamsWhoseClientReadsNothing(t *testing.T) {
	const stalled, readers = 50, 3
	a := startPod(t, "pod-a", "--kv-cache-blocks", "40000")
	start := time.Now()
	for i := range stalled {
		stallStream(t, a.API, 4096, fmt.Sprintf(`{"prompt":"reader %d stops reading","max_tokens":7000,"ignore_eos":true,"stream":true}`, i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, readers)
	for i := range readers {
		go func() {
			_, last, err := readStream(ctx, a.API, 0, fmt.Sprintf(`{"prompt":"reader %d reads","max_tokens":2000,"ignore_eos":true,"stream":true}`, i), 0)
			if err == nil && last != "data: [DONE]" {
				err = fmt.Errorf("the stream ended with %q", last)
			}
			errs <- err
		}()
	}
	poll.Until(t, 40*time.Second, "every stalled stream cancelled and its KV freed", func() bool {
		m := a.metrics()
		return m["kvpilot_stream_stalled_total"] >= stalled && m["vllm:num_requests_running"] <= readers
	})
	took := time.Since(start)
	t.Logf("%d stalled streams cancelled %v after they started", stalled, took.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("the stalled streams were cancelled %v after they started; want within 15 s", took.Round(time.Millisecond))
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Errorf("reading client: %v", err)
		}
	}
	poll.Until(t, 10*time.Second, "the KV freed", func() bool {
		m := a.metrics()
		return m["vllm:num_requests_running"] == 0 && m["vllm:kv_cache_usage_perc"] == 0
	})
	if got := stalledByReason(t, a)["not_reading"]; got != stalled {
		t.Errorf("kvpilot_stream_stalled_total{reason=\"not_reading\"} = %v; want %d", got, stalled)
	}
}

// TestProcessSlowOrIdleStreamsNotCancelled (issue 34, item 2): the
// receive-window check spares a client that reads one event a second and
// a stream that sends nothing for 12 s (its request waits in the queue)
// before its tokens come.
func TestProcessSlowOrIdleStreamsNotCancelled(t *testing.T) {
	a := startPod(t, "pod-a", "--max-num-seqs", "2")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type outcome struct {
		arrivals []time.Time
		last     string
		err      error
	}
	run := func(body string, wait time.Duration) chan outcome {
		c := make(chan outcome, 1)
		go func() {
			arr, last, err := readStream(ctx, a.API, 0, body, wait)
			c <- outcome{arr, last, err}
		}()
		return c
	}
	// The slow reader and the stream ahead of the idle one take both
	// slots; the idle stream's headers go out at once, its tokens once
	// the one ahead finished.
	slow := run(`{"prompt":"read me slowly","max_tokens":4000,"ignore_eos":true,"stream":true}`, time.Second)
	poll.Until(t, 10*time.Second, "the slow reader running", func() bool { return a.metrics()["vllm:num_requests_running"] == 1 })
	ahead := run(`{"prompt":"ahead","max_tokens":2200,"ignore_eos":true,"stream":true}`, 0)
	poll.Until(t, 10*time.Second, "the stream ahead running", func() bool { return a.metrics()["vllm:num_requests_running"] == 2 })
	idle := run(`{"prompt":"wait for a slot","max_tokens":50,"ignore_eos":true,"stream":true}`, 0)
	o := <-idle
	if o.err != nil || o.last != "data: [DONE]" {
		t.Fatalf("idle stream: %v, last event %q", o.err, o.last)
	}
	if gap := o.arrivals[1].Sub(o.arrivals[0]); gap < 12*time.Second { // headers to first token
		t.Errorf("the idle stream waited %v for its first token; the test wants at least 12 s (the stream ahead is too short on this machine)", gap)
	} else {
		t.Logf("the idle stream waited %v for its first token", gap.Round(time.Millisecond))
	}
	if o := <-ahead; o.err != nil || o.last != "data: [DONE]" {
		t.Errorf("stream ahead: %v, last event %q", o.err, o.last)
	}
	// The slow reader has read for more than 12 s by now; it is dropped
	// (its connection closed) without being counted.
	m := a.metrics()
	if m["kvpilot_stream_stalled_total"] != 0 {
		t.Errorf("kvpilot_stream_stalled_total = %v; want 0 (%v)", m["kvpilot_stream_stalled_total"], stalledByReason(t, a))
	}
	if m["vllm:num_requests_running"] != 1 {
		t.Errorf("running requests %v; want the slow reader's", m["vllm:num_requests_running"])
	}
	cancel()
	<-slow
}

// stalledByReason is kvpilot_stream_stalled_total by reason.
func stalledByReason(t testing.TB, p *pod) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.API + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range fams["kvpilot_stream_stalled_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				out[l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// BenchmarkStalledReaders (issue 34, item 2) measures what 200 clients
// that stop reading cost the clients beside them that read. Phase
// "reading" runs 4 reading clients beside 200 streams whose clients read
// everything; phase "stalled" beside 200 streams whose clients read
// nothing (plain connections, default buffers). Each reports the reading
// clients' inter-token latency (the gaps between their events after the
// first); "stalled" also reports when its stalled streams were cancelled.
// It runs once, whatever b.N:
//
//	go test -run '^$' -bench BenchmarkStalledReaders -benchtime 1x ./cmd/runtime
//
// The numbers are in docs/benchmarks.md. KVPILOT_STALL_BENCH_OTHERS
// changes the 200, KVPILOT_STALL_BENCH_BODY the others' request body,
// KVPILOT_STALL_BENCH_RCVBUF sets the stalled clients' SO_RCVBUF,
// KVPILOT_STALL_BENCH_ARGS adds runtime flags (space-separated).
func BenchmarkStalledReaders(b *testing.B) {
	others := 200
	if v := os.Getenv("KVPILOT_STALL_BENCH_OTHERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		others = n
	}
	rcvbuf := 0
	if v := os.Getenv("KVPILOT_STALL_BENCH_RCVBUF"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		rcvbuf = n
	}
	const readers = 4
	otherBody := `{"prompt":"another stream %d","max_tokens":4000,"ignore_eos":true,"stream":true}`
	if v := os.Getenv("KVPILOT_STALL_BENCH_BODY"); v != "" {
		otherBody = v
	}
	a := startPod(b, "pod-a", append([]string{"--kv-cache-blocks", "80000"}, strings.Fields(os.Getenv("KVPILOT_STALL_BENCH_ARGS"))...)...)
	b.ResetTimer()
	for _, stall := range []bool{false, true} {
		name := map[bool]string{false: "reading", true: "stalled"}[stall]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		before := a.metrics()["kvpilot_stream_stalled_total"]
		start := time.Now()
		var conns []net.Conn
		for i := range others {
			body := otherBody
			if strings.Contains(body, "%d") {
				body = fmt.Sprintf(body, i)
			}
			if stall {
				conns = append(conns, stallStream(b, a.API, rcvbuf, body))
			} else {
				go readStream(ctx, a.API, 0, body, 0)
			}
		}
		poll.Until(b, time.Minute, "the other streams running", func() bool {
			return a.metrics()["vllm:num_requests_running"] >= float64(others)
		})
		gaps := make(chan []time.Duration, readers)
		for i := range readers {
			go func() {
				arr, last, err := readStream(ctx, a.API, 0, fmt.Sprintf(`{"prompt":"reader %d","max_tokens":1000,"ignore_eos":true,"stream":true}`, i), 0)
				if err != nil || last != "data: [DONE]" {
					b.Errorf("%s: reading client: %v, last event %q", name, err, last)
				}
				var g []time.Duration
				for k := 2; k < len(arr); k++ { // after the headers and the first token
					g = append(g, arr[k].Sub(arr[k-1]))
				}
				gaps <- g
			}()
		}
		var all []time.Duration
		for range readers {
			all = append(all, <-gaps...)
		}
		slices.Sort(all)
		q := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))] }
		b.Logf("%s: readers' inter-token latency p50 %v p99 %v max %v (%d gaps)", name, q(0.5), q(0.99), all[len(all)-1], len(all))
		b.ReportMetric(float64(q(0.5).Microseconds())/1000, "itl-p50-ms-"+name)
		b.ReportMetric(float64(q(0.99).Microseconds())/1000, "itl-p99-ms-"+name)
		if stall {
			// Until every stalled stream is cancelled or finished.
			var allCancelled time.Duration
			poll.Until(b, 8*time.Minute, "the stalled streams cancelled or finished", func() bool {
				m := a.metrics()
				if allCancelled == 0 && m["kvpilot_stream_stalled_total"]-before >= float64(others) {
					allCancelled = time.Since(start)
				}
				return m["vllm:num_requests_running"] == 0
			})
			m := a.metrics()
			b.Logf("stalled: %v cancelled (all by %v after they started); none running %v after they started; KV usage %v",
				m["kvpilot_stream_stalled_total"]-before, allCancelled, time.Since(start).Round(time.Millisecond), m["vllm:kv_cache_usage_perc"])
			b.ReportMetric(allCancelled.Seconds(), "s-to-cancel-all")
			for _, c := range conns {
				c.Close()
			}
		}
		cancel()
		poll.Until(b, time.Minute, "an idle pod", func() bool { return a.metrics()["vllm:num_requests_running"] == 0 })
	}
	for _, l := range strings.Split(a.Log(), "\n") {
		if strings.Contains(l, "stopped reading") {
			b.Log(l)
			break
		}
	}
}
