package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpilot/kvpilot/internal/runtime/codec"
	"github.com/kvpilot/kvpilot/internal/runtime/device"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/metrics"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

const (
	testModel      = "test-model"
	waitTimeout    = 5 * time.Second
	requestTimeout = 10 * time.Second
)

// testGeometry is a small model: the sim's step time is its overhead.
var testGeometry = sim.Geometry{Name: "test", Layers: 2, Hidden: 64, Heads: 2, KVHeads: 1, HeadDim: 32, FFN: 128,
	Vocab: 1000, Params: 1_000_000, DTypeBytes: 2, ContextLen: 512}

// gateExec wraps an executor; while closed, Execute blocks until released.
type gateExec struct {
	inner   batch.Executor
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	entered chan struct{}
	// steps counts the engine steps run (the calls to Execute).
	steps atomic.Int64
}

func (g *gateExec) close() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateExec) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

// SamplesTokens forwards the inner executor's batch.TokenSampler answer.
func (g *gateExec) SamplesTokens() bool {
	ts, ok := g.inner.(batch.TokenSampler)
	return ok && ts.SamplesTokens()
}

func (g *gateExec) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	g.steps.Add(1)
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.inner.Execute(ctx, b, out)
}

type envOpts struct {
	maxQueue, maxNumSeqs, numBlocks, maxModelLen int
	defaultMaxTokens                             int
	stop                                         []string
	keys                                         []string
	maxBodyBytes                                 int64
	exec                                         batch.Executor // nil: sim
	codec                                        codec.Codec
	decoder                                      engine.TokenDecoder
	eos                                          []int32
	vocabSize                                    int
	devices                                      []device.Device
	programs                                     *programs.Table
	forwardKey                                   string
	forwardConnect, forwardHeader                time.Duration
	promptTokensDetails                          bool
	sharePrefixCache                             bool
	responsesStoreEntries                        int
	preprocessMemory                             int64
	// wrap, when set, wraps the server's handler (to watch what reaches
	// the pod).
	wrap func(http.Handler) http.Handler
}

var quiet = slog.New(slog.DiscardHandler)

type testEnv struct {
	t      testing.TB
	eng    *engine.Engine
	srv    *Server
	ts     *httptest.Server
	reg    *prometheus.Registry
	gate   *gateExec
	client *http.Client
}

func newEnv(t testing.TB, o envOpts) *testEnv {
	t.Helper()
	if o.exec == nil {
		acc, err := sim.LookupAccelerator("H100-SXM")
		if err != nil {
			t.Fatal(err)
		}
		se, err := sim.New(sim.Options{Accelerator: acc, Geometry: testGeometry, StepOverhead: 100 * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		o.exec, o.codec, o.decoder = se, codec.Sim{Vocab: se.Vocabulary()}, se.Vocabulary()
		o.eos, o.vocabSize = []int32{se.EOS()}, se.Vocabulary().Size()
	}
	if o.maxModelLen == 0 {
		o.maxModelLen = testGeometry.ContextLen
	}
	if o.numBlocks == 0 {
		o.numBlocks = 512
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.NewEngine(reg, metrics.EngineOptions{ModelName: testModel, MaxModelLen: o.maxModelLen})
	if err != nil {
		t.Fatal(err)
	}
	gate := &gateExec{inner: o.exec, entered: make(chan struct{}, 1)}
	eng, err := engine.New(engine.Config{
		MaxNumSeqs: o.maxNumSeqs, MaxQueue: o.maxQueue, MaxModelLen: o.maxModelLen, VocabSize: o.vocabSize,
		KV:  kvcache.Config{NumBlocks: o.numBlocks, BlockSize: 16, EnablePrefixCache: true},
		EOS: o.eos, Decoder: o.decoder, Observer: m, Logger: quiet,
	}, gate)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The listener first: the pod's advertised address is its own.
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv, err := New(Config{
		Engine: eng, Codec: o.codec, ModelName: testModel, DefaultMaxTokens: o.defaultMaxTokens, Stop: o.stop,
		APIKeys: o.keys, MaxBodyBytes: o.maxBodyBytes, Registry: reg, Requests: m, Logger: quiet, Devices: o.devices,
		Programs: o.programs, ForwardKey: []byte(o.forwardKey), AdvertiseAddr: ts.Listener.Addr().String(),
		ForwardConnectTimeout: o.forwardConnect, ForwardHeaderTimeout: o.forwardHeader,
		PromptTokensDetails: o.promptTokensDetails, SharePrefixCacheAcrossKeys: o.sharePrefixCache, ResponsesStoreEntries: o.responsesStoreEntries,
		PreprocessMemory: o.preprocessMemory,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetReady(true)
	var h http.Handler = srv
	if o.wrap != nil {
		h = o.wrap(srv)
	}
	ts.Config.Handler = h
	ts.Config.ConnContext = ConnContext
	ts.Start()
	env := &testEnv{t: t, eng: eng, srv: srv, ts: ts, reg: reg, gate: gate, client: ts.Client()}
	t.Cleanup(func() {
		gate.open()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := eng.Stop(ctx); err != nil {
			t.Errorf("engine.Stop: %v", err)
		}
		ts.Close()
		env.checkNoLeak(t)
	})
	return env
}

// checkNoLeak requires the engine idle with every KV block free.
func (e *testEnv) checkNoLeak(t testing.TB) {
	t.Helper()
	poll.UntilOK(t, waitTimeout, func() string {
		// Pending takes the engine lock: once it reports idle, the loop has
		// finished its last KV update and reading the stats is safe.
		if running, waiting := e.eng.Pending(); running != 0 || waiting != 0 {
			return fmt.Sprintf("engine not idle: %d running, %d waiting", running, waiting)
		}
		if used := e.eng.KV().Stats().Used; used != 0 {
			return fmt.Sprintf("%d KV blocks still used with no request left", used)
		}
		return ""
	})
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (e *testEnv) do(method, path, body string, header ...string) response {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func (e *testEnv) post(path, body string, header ...string) response {
	e.t.Helper()
	return e.do(http.MethodPost, path, body, header...)
}

// decodeStrict decodes JSON rejecting fields the type does not know.
func decodeStrict(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %T from %s: %v", v, b, err)
	}
}

// readEvents reads a whole SSE body: the data payloads in order. Every event
// must be a single data line followed by a blank line.
func readEvents(t testing.TB, body io.Reader) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			if line != "" {
				t.Fatalf("event not followed by a blank line: %q", line)
			}
			expectBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected SSE line %q", line)
		}
		events = append(events, data)
		expectBlank = true
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return events
}
