package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpilot/kvpilot/internal/runtime/codec"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// emitClock wraps an executor and records when each output token left it:
// emitted[seed][k] is the time token k of the request with that seed was
// produced (the engine pushes it to the stream right after). Requests of a
// load test get distinct seeds.
type emitClock struct {
	inner   batch.Executor
	mu      sync.Mutex
	emitted map[uint64][]time.Time
}

func (e *emitClock) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	err := e.inner.Execute(ctx, b, out)
	now := time.Now()
	e.mu.Lock()
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if !s.Sample {
			continue
		}
		k := s.Pos + len(s.Tokens) - s.PromptLen
		ts := e.emitted[s.Seed]
		for len(ts) <= k {
			ts = append(ts, time.Time{})
		}
		ts[k] = now
		e.emitted[s.Seed] = ts
	}
	e.mu.Unlock()
	return err
}

// event is one batch of tokens as a consumer received it.
type event struct {
	at     time.Time
	tokens int
}

// loadResult are a load run's latencies from token emission to receipt.
type loadResult struct {
	perToken, perEvent []time.Duration
	// steady are the per-event latencies after each request's first 8
	// tokens, once all streams are connected and decoding.
	steady         []time.Duration
	events, tokens int
	errors         int
	elapsed        time.Duration
}

func (r *loadResult) add(em *emitClock, seed uint64, evs []event) {
	em.mu.Lock()
	times := em.emitted[seed]
	em.mu.Unlock()
	k := 0
	for _, ev := range evs {
		if ev.tokens == 0 {
			continue
		}
		if k+ev.tokens > len(times) {
			r.errors++
			return
		}
		r.perEvent = append(r.perEvent, ev.at.Sub(times[k]))
		if k >= steadyAfter {
			r.steady = append(r.steady, ev.at.Sub(times[k]))
		}
		for j := k; j < k+ev.tokens; j++ {
			r.perToken = append(r.perToken, ev.at.Sub(times[j]))
		}
		k += ev.tokens
		r.events++
		r.tokens += ev.tokens
	}
}

const steadyAfter = 8

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

func (r *loadResult) String() string {
	r3 := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return fmt.Sprintf("%d events, %d tokens in %v (%.0f tokens/s), %d errors; per event p50 %v p99 %v max %v; "+
		"per token p50 %v p99 %v; steady (token >= %d) p50 %v p99 %v",
		r.events, r.tokens, r.elapsed.Round(time.Millisecond), float64(r.tokens)/r.elapsed.Seconds(), r.errors,
		r3(pct(r.perEvent, 0.5)), r3(pct(r.perEvent, 0.99)), r3(pct(r.perEvent, 1)), r3(pct(r.perToken, 0.5)), r3(pct(r.perToken, 0.99)),
		steadyAfter, r3(pct(r.steady, 0.5)), r3(pct(r.steady, 0.99)))
}

type loadSpec struct {
	streams, maxTokens int
	geometry           string
	overhead           time.Duration
}

// newLoadEngine is a real-time sim engine sized for the load.
func newLoadEngine(tb testing.TB, spec loadSpec) (*engine.Engine, *emitClock, codec.Codec) {
	tb.Helper()
	acc, _ := sim.LookupAccelerator("H100-SXM")
	geom := testGeometry
	if spec.geometry != "" {
		var err error
		if geom, err = sim.LookupGeometry(spec.geometry); err != nil {
			tb.Fatal(err)
		}
	}
	se, err := sim.New(sim.Options{Accelerator: acc, Geometry: geom, StepOverhead: spec.overhead})
	if err != nil {
		tb.Fatal(err)
	}
	em := &emitClock{inner: se, emitted: map[uint64][]time.Time{}}
	eng, err := engine.New(engine.Config{
		MaxNumSeqs: spec.streams + 8, MaxNumBatchedTokens: 16384, MaxModelLen: 4096, VocabSize: se.Vocabulary().Size(),
		KV:  kvcache.Config{NumBlocks: spec.streams * (4096/16 + 1), BlockSize: 16},
		EOS: []int32{se.EOS()}, Decoder: se.Vocabulary(), Logger: quiet,
	}, em)
	if err != nil {
		tb.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = eng.Stop(context.Background()) })
	return eng, em, codec.Sim{Vocab: se.Vocabulary()}
}

// flushClock wraps a handler's ResponseWriter and timestamps each flush:
// the moment an event's bytes are handed to the kernel, which is all the
// server can do for it. The seed header names the request.
type flushClock struct {
	mu      sync.Mutex
	flushed map[uint64][]event
}

type timedWriter struct {
	http.ResponseWriter
	clock  *flushClock
	seed   uint64
	tokens int // tokens written since the last flush
}

func (w *timedWriter) Write(b []byte) (int, error) {
	if _, text, ok := bytes.Cut(b, textField); ok {
		text, _, _ = bytes.Cut(text, quote)
		w.tokens += bytes.Count(text, space)
	}
	return w.ResponseWriter.Write(b)
}

func (w *timedWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if w.tokens > 0 {
		now := time.Now()
		w.clock.mu.Lock()
		w.clock.flushed[w.seed] = append(w.clock.flushed[w.seed], event{at: now, tokens: w.tokens})
		w.clock.mu.Unlock()
		w.tokens = 0
	}
	return err
}

func (w *timedWriter) Flush() { _ = w.FlushError() }

func (w *timedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (c *flushClock) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seed, _ := strconv.ParseUint(r.Header.Get("X-Seed"), 10, 64)
		h.ServeHTTP(&timedWriter{ResponseWriter: w, clock: c, seed: seed}, r)
	})
}

var textField, quote, space = []byte(`"text":"`), []byte(`"`), []byte(" ")

const loadPrompt = "the agent reads the file and calls the tool to run the test"

// runHTTPLoad streams spec.streams concurrent requests over loopback HTTP.
// It returns the latencies to the client and to the server's flushes.
func runHTTPLoad(tb testing.TB, spec loadSpec) (client, server *loadResult) {
	eng, em, codec := newLoadEngine(tb, spec)
	srv, err := New(Config{Engine: eng, Codec: codec, ModelName: testModel, Registry: prometheus.NewRegistry(), Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	srv.SetReady(true)
	fc := &flushClock{flushed: map[uint64][]event{}}
	ts := httptest.NewServer(fc.wrap(srv))
	defer ts.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: spec.streams, DisableCompression: true}}
	defer hc.CloseIdleConnections()

	res := &loadResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range spec.streams {
		wg.Go(func() {
			seed := uint64(i + 1)
			body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"seed":%d,"stream":true}`, loadPrompt, spec.maxTokens, seed)
			evs, err := streamEvents(hc, ts.URL+"/v1/completions", body, seed)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errors++
				return
			}
			res.add(em, seed, evs)
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	flushed := &loadResult{elapsed: res.elapsed}
	for seed, evs := range fc.flushed {
		flushed.add(em, seed, evs)
	}
	return res, flushed
}

// streamEvents posts a streaming request and timestamps each event's tokens
// (one sim token is one space-prefixed word).
func streamEvents(client *http.Client, url, body string, seed uint64) ([]event, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Seed", strconv.FormatUint(seed, 10))
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var evs []event
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		at := time.Now()
		if string(line) == "data: [DONE]" {
			done = true
			continue
		}
		_, text, ok := bytes.Cut(line, textField)
		if !ok {
			return nil, fmt.Errorf("unexpected event %s", line)
		}
		text, _, _ = bytes.Cut(text, quote)
		evs = append(evs, event{at: at, tokens: bytes.Count(text, space)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !done {
		return nil, fmt.Errorf("stream ended without [DONE]")
	}
	return evs, nil
}

// runDirectLoad is the same load consumed straight from the engine's
// streams: the baseline without HTTP.
func runDirectLoad(tb testing.TB, spec loadSpec) *loadResult {
	eng, em, codec := newLoadEngine(tb, spec)
	prompt := codec.EncodePrompt(loadPrompt)
	res := &loadResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range spec.streams {
		wg.Go(func() {
			seed := uint64(i + 1)
			st, err := eng.Submit(context.Background(), &engine.Request{Prompt: prompt,
				Params: engine.Params{MaxTokens: spec.maxTokens, Seed: seed, HasSeed: true}})
			var evs []event
			for err == nil {
				var c engine.Chunk
				if c, err = st.Next(context.Background()); err != nil {
					break
				}
				evs = append(evs, event{at: time.Now(), tokens: len(c.TokenIDs)})
				if c.Done {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errors++
				return
			}
			res.add(em, seed, evs)
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// TestManyConcurrentStreams is a small load run: every stream completes
// with every token.
func TestManyConcurrentStreams(t *testing.T) {
	spec := loadSpec{streams: 100, maxTokens: 16, overhead: 500 * time.Microsecond}
	res, flushed := runHTTPLoad(t, spec)
	for _, r := range []*loadResult{res, flushed} {
		if r.errors != 0 || r.tokens != spec.streams*spec.maxTokens {
			t.Fatalf("%v; want %d tokens", r, spec.streams*spec.maxTokens)
		}
	}
	t.Log(res)
}

// BenchmarkStream1000 holds 1,000 concurrent streaming requests on the sim
// executor (llama-3.1-8b on an H100, real time) over loopback HTTP and
// measures, per token event, the latency from the token leaving the
// executor to (a) the server flushing it to the socket, (b) the client
// reading it, and, as the baseline without HTTP, (c) a consumer of the
// engine stream receiving it. (a) − (c) is what the HTTP server adds; (b)
// includes the in-process client competing for the same cores.
//
//	go test -run '^$' -bench Stream1000 -benchtime 1x ./internal/runtime/server/
func BenchmarkStream1000(b *testing.B) {
	spec := loadSpec{streams: 1000, maxTokens: 64, geometry: "llama-3.1-8b"}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for b.Loop() {
		direct := runDirectLoad(b, spec)
		client, flushed := runHTTPLoad(b, spec)
		for _, r := range []*loadResult{direct, client, flushed} {
			if r.errors != 0 || r.tokens != spec.streams*spec.maxTokens {
				b.Fatalf("%v; want %d tokens", r, spec.streams*spec.maxTokens)
			}
		}
		b.Logf("engine stream (no HTTP): %v", direct)
		b.Logf("server flush:            %v", flushed)
		b.Logf("client receipt:          %v", client)
		b.ReportMetric(ms(pct(direct.perEvent, 0.99)), "direct-p99-ms")
		b.ReportMetric(ms(pct(flushed.perEvent, 0.99)), "flush-p99-ms")
		b.ReportMetric(ms(pct(client.perEvent, 0.99)), "client-p99-ms")
		b.ReportMetric(ms(pct(flushed.perEvent, 0.99)-pct(direct.perEvent, 0.99)), "added-p99-ms")
		b.ReportMetric(ms(pct(flushed.steady, 0.99)-pct(direct.steady, 0.99)), "steady-added-p99-ms")
		b.ReportMetric(float64(client.tokens)/client.elapsed.Seconds(), "tokens/s")
	}
}
