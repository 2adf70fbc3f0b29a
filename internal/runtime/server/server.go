// Package server is the runtime pod's OpenAI-compatible HTTP API over the
// continuous-batching engine: completions and chat completions (JSON or
// server-sent events), the model list, liveness, readiness and Prometheus
// metrics.
//
// A request's life is its HTTP request's: the engine request is submitted
// with the request context, so a client that goes away cancels it and its
// KV blocks are freed within one iteration.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvpilot/kvpilot/internal/runtime/chatformat"
	"github.com/kvpilot/kvpilot/internal/runtime/codec"
	"github.com/kvpilot/kvpilot/internal/runtime/device"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes       = 4 << 20
	DefaultRetryAfter         = time.Second
	DefaultStreamWriteTimeout = 5 * time.Second
	DefaultStreamStallTimeout = 10 * time.Second
	DefaultStreamMaxBuffered  = 1 << 20
	// Forwarding between pods: see Config.
	DefaultForwardConnectTimeout = 5 * time.Second
	DefaultForwardHeaderTimeout  = 10 * time.Minute
)

// Config configures a Server.
// RequestObserver is told of each API request once all of its sequences
// are done. Calls may come from many goroutines at once and must not block.
type RequestObserver interface {
	// RequestGroupFinished reports an API request's n parameter, its
	// max_tokens and the longest output among its sequences (for a batched
	// completion, each prompt is one request, as in vLLM).
	RequestGroupFinished(n, maxTokens, maxGeneration int)
}

type Config struct {
	// Engine serves the requests (required). The server never starts or
	// stops it.
	Engine *engine.Engine
	// Codec tokenizes prompts and chat conversations (required).
	Codec codec.Codec
	// ToolCallParser and ReasoningParser name the formats the model's
	// output is read in (chatformat's names, "none" for none), overriding
	// what its chat template shows; "" keeps the detected ones.
	ToolCallParser, ReasoningParser string
	// ModelName is the served model's name (required): requests naming
	// another model get 404; an empty "model" means this one.
	ModelName string
	// ModelArchitecture is the model's architecture as /v1/models reports
	// it ("" when the executor runs no model file).
	ModelArchitecture string
	// DefaultMaxTokens caps the output of requests without max_tokens; the
	// room left in the context caps it too (0 = only the context).
	DefaultMaxTokens int
	// Stop are the stop strings of requests that give none.
	Stop []string
	// MaxResponseChars limits every response's text in runes (0 = none).
	MaxResponseChars int
	// MaxBodyBytes limits request bodies (default 4 MiB).
	MaxBodyBytes int64
	// APIKeys, when set, are required as "Authorization: Bearer <key>" (or
	// Anthropic's "x-api-key: <key>") on the API routes; /health, /ready
	// and /metrics stay open. Each key is a tenant: its programs are its
	// own (programs.Owner).
	APIKeys []string
	// Registry receives the HTTP metrics and is what /metrics serves (the
	// engine's and the devices' metrics belong in it too). Nil: a private one.
	Registry *prometheus.Registry
	// Requests, when set, is told of every API request once all of its
	// sequences are done (the per-request metrics that vLLM keeps per
	// request, not per sequence).
	Requests RequestObserver
	// Devices are reported on /ready.
	Devices []device.Device
	// RetryAfter is the Retry-After of a 429 (default 1 s).
	RetryAfter time.Duration
	// StreamWriteTimeout bounds each write of a streaming response, so a
	// client that stops reading is cancelled (default 5 s; negative: none).
	StreamWriteTimeout time.Duration
	// StreamStallTimeout cancels a streaming request whose output has
	// waited this long for a client whose receive window does not move
	// (it reads nothing; where the platform reports the window: Linux),
	// without waiting for our send buffer to fill (default 10 s;
	// negative: none).
	StreamStallTimeout time.Duration
	// StreamMaxBufferedBytes bounds the output of a streaming response
	// sent but not yet read by the client (the socket's send queue, where
	// the platform reports it: Linux); beyond it the request is cancelled
	// (default 1 MiB; negative: no bound).
	StreamMaxBufferedBytes int64
	// Programs, when set, is the program gate: requests with a program id
	// run here, are forwarded once to the pod their program is placed on,
	// or are held while it is paused; POST /programs/release ends one.
	Programs *programs.Table
	// ForwardKey signs the requests this pod forwards to another pod of
	// its pool and verifies those forwarded to it (HeaderForwarded): the
	// pool's control token, which every pod mounts. Empty: no request is
	// taken as forwarded.
	ForwardKey []byte
	// AdvertiseAddr is this pod's API address (host:port) as the
	// controller's placements name it, which the other pods forward to
	// (the runtime's --advertise-addr). A forwarded request's signature
	// names it (HeaderForwarded), so one sent to another pod does not
	// verify here. Empty: no request is taken as forwarded.
	AdvertiseAddr string
	// ForwardConnectTimeout bounds connecting to the pod a request is
	// forwarded to (default 5 s): a black-holed pod address fails fast with
	// 503 instead of hanging the request.
	ForwardConnectTimeout time.Duration
	// ForwardHeaderTimeout bounds the wait for the response headers of a
	// forwarded request (default 10 min). A non-streaming response's
	// headers come only once its generation is done, so this is generous;
	// a dead peer on a live connection is found sooner by TCP keep-alives.
	ForwardHeaderTimeout time.Duration
	// ResponsesStoreEntries and ResponsesStoreBytes bound the responses
	// POST /v1/responses keeps for previous_response_id (defaults 1024
	// and 64 MiB; the least recently used response of the API key holding
	// the most is evicted first, see responseStore). A negative
	// ResponsesStoreEntries keeps none.
	ResponsesStoreEntries int
	ResponsesStoreBytes   int64
	// PromptTokensDetails reports usage.prompt_tokens_details.cached_tokens
	// (vLLM's --enable-prompt-tokens-details). Off, usage has no details:
	// a client could otherwise tell from its own hits whether another
	// client's prompt is cached.
	PromptTokensDetails bool
	// SharePrefixCacheAcrossKeys lets requests of different API keys hit
	// each other's prefix-cache entries (vLLM's behaviour). Off (the
	// default), each key's owner salts its requests' prefix hashes, so
	// neither cached_tokens nor timing tells one tenant what another
	// sent; clients of one key still share, and cache_salt splits further
	// within a key. Without API keys every client is one owner and shares.
	SharePrefixCacheAcrossKeys bool
	// Clock dates and checks forwarded requests' signatures (default: the
	// real clock).
	Clock clock.Clock
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg Config
	// format is how the model's output is read (tool calls, reasoning).
	format      chatformat.Spec
	eng         *engine.Engine
	maxModelLen int
	// kvTokens is what the whole device KV cache holds: one sequence
	// longer than it can never run.
	kvTokens    int
	keys        *keySet
	metrics     *httpMetrics
	promHandler http.Handler
	log         *slog.Logger
	created     int64
	retryAfter  string
	ready       atomic.Bool
	defaults    openai.Defaults
	forwarder   *http.Client
	heldGauge   prometheus.Gauge
	grammars    *grammars
	stalled     *prometheus.CounterVec
	store       *responseStore
	clk         clock.Clock
	nonces      *nonceCache // of verified forwarded requests

	// drainCtx ends when the pod starts draining (BeginDrain): held and
	// queued requests are answered at once. abortCtx ends when the drain
	// deadline cuts forwarded requests short (AbortForwards).
	drainCtx      context.Context
	beginDrain    context.CancelFunc
	abortCtx      context.Context
	abortForwards context.CancelFunc
}

// New builds a Server. It is not ready until SetReady(true).
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Engine == nil:
		return nil, errors.New("server: Config.Engine is required")
	case cfg.Codec == nil:
		return nil, errors.New("server: Config.Codec is required")
	case cfg.ModelName == "":
		return nil, errors.New("server: Config.ModelName is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.StreamWriteTimeout == 0 {
		cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if cfg.StreamStallTimeout == 0 {
		cfg.StreamStallTimeout = DefaultStreamStallTimeout
	}
	if cfg.StreamMaxBufferedBytes == 0 {
		cfg.StreamMaxBufferedBytes = DefaultStreamMaxBuffered
	}
	if cfg.ForwardConnectTimeout <= 0 {
		cfg.ForwardConnectTimeout = DefaultForwardConnectTimeout
	}
	if cfg.ForwardHeaderTimeout <= 0 {
		cfg.ForwardHeaderTimeout = DefaultForwardHeaderTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ResponsesStoreEntries == 0 {
		cfg.ResponsesStoreEntries = DefaultResponsesStoreEntries
	}
	if cfg.ResponsesStoreBytes <= 0 {
		cfg.ResponsesStoreBytes = DefaultResponsesStoreBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	format, err := codec.FormatOf(cfg.Codec).Override(cfg.ToolCallParser, cfg.ReasoningParser)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	m, err := newHTTPMetrics(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("server: HTTP metrics: %w", err)
	}
	s := &Server{
		cfg:         cfg,
		format:      format,
		eng:         cfg.Engine,
		maxModelLen: cfg.Engine.Config().MaxModelLen,
		kvTokens:    cfg.Engine.Config().KV.NumBlocks * cfg.Engine.BlockSize(),
		metrics:     m,
		promHandler: promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}),
		log:         cfg.Logger,
		created:     time.Now().Unix(),
		retryAfter:  fmt.Sprint(max(1, int(cfg.RetryAfter.Round(time.Second)/time.Second))),
		defaults:    openai.Defaults{Stop: cfg.Stop, MaxResponseChars: cfg.MaxResponseChars},
		grammars:    newGrammars(cfg.Engine.Config().VocabSize, cfg.Engine.Config().Decoder),
		store:       newResponseStore(cfg.ResponsesStoreEntries, cfg.ResponsesStoreBytes),
		clk:         cfg.Clock,
		nonces:      newNonceCache(maxSeenNonces),
	}
	s.drainCtx, s.beginDrain = context.WithCancel(context.Background())
	s.abortCtx, s.abortForwards = context.WithCancel(context.Background())
	if len(cfg.APIKeys) > 0 {
		s.keys = newKeySet(cfg.APIKeys, cfg.ForwardKey)
		s.cfg.APIKeys = nil // only their digests are kept
	}
	// Forwarded requests stream for as long as generation takes: no overall
	// timeout, only on connecting and on the response headers.
	dialer := &net.Dialer{Timeout: cfg.ForwardConnectTimeout, KeepAlive: 15 * time.Second}
	s.forwarder = &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		MaxIdleConnsPerHost:   64,
		ResponseHeaderTimeout: cfg.ForwardHeaderTimeout,
		IdleConnTimeout:       90 * time.Second,
	}}
	s.heldGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kvpilot_held_requests", Help: "Requests held while their program is paused.",
	})
	if err := cfg.Registry.Register(s.heldGauge); err != nil {
		return nil, fmt.Errorf("server: held-requests gauge: %w", err)
	}
	if s.stalled, err = newStalledCounter(cfg.Registry); err != nil {
		return nil, fmt.Errorf("server: stalled-streams counter: %w", err)
	}
	return s, nil
}

// SetReady marks the model loaded and the server willing to take traffic
// (true), or not, as when draining (false). /ready also requires the engine
// to be running.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// BeginDrain starts the pod's drain on the HTTP side: requests held by the
// program gate (and any held later) are answered at once, forwarded to the
// pod their program is routed to or refused with a retryable 503, so that
// shutdown waits for nothing that cannot finish. Call SetReady(false) too.
func (s *Server) BeginDrain() { s.beginDrain() }

// AbortForwards cuts short the requests still being forwarded to other
// pods: the drain deadline has come.
func (s *Server) AbortForwards() { s.abortForwards() }

// Ready reports what /ready answers.
func (s *Server) Ready() bool { return s.ready.Load() && s.eng.Running() }

// Routes, also the path label of the HTTP metrics.
const (
	routeCompletions = "/v1/completions"
	routeChat        = "/v1/chat/completions"
	routeResponses   = "/v1/responses"
	routeMessages    = "/v1/messages"
	routeCountTokens = "/v1/messages/count_tokens"
	routeModels      = "/v1/models"
	routeTokenize    = "/tokenize"
	routeDetokenize  = "/detokenize"
	routeHealth      = "/health"
	routeReady       = "/ready"
	routeMetrics     = "/metrics"
	routeOther       = "other"
	// routeRelease ("/programs/release") is in gate.go.
)

type route struct {
	name    string
	methods string // allowed methods, as the Allow header lists them
	open    bool   // no API key needed
	handle  func(*Server, http.ResponseWriter, *http.Request)
}

var routes = map[string]route{
	routeCompletions: {routeCompletions, "POST", false, (*Server).completions},
	routeChat:        {routeChat, "POST", false, (*Server).chat},
	routeResponses:   {routeResponses, "POST", false, (*Server).responses},
	routeMessages:    {routeMessages, "POST", false, (*Server).messages},
	routeCountTokens: {routeCountTokens, "POST", false, (*Server).countTokens},
	routeModels:      {routeModels, "GET, HEAD", false, (*Server).models},
	routeTokenize:    {routeTokenize, "POST", false, (*Server).tokenize},
	routeDetokenize:  {routeDetokenize, "POST", false, (*Server).detokenize},
	routeHealth:      {routeHealth, "GET, HEAD", true, (*Server).health},
	routeReady:       {routeReady, "GET, HEAD", true, (*Server).readiness},
	routeMetrics:     {routeMetrics, "GET, HEAD", true, (*Server).serveMetrics},
	routeRelease:     {routeRelease, "POST", false, (*Server).releaseProgram},
}

func lookup(path string) (route, bool) {
	if r, ok := routes[path]; ok {
		return r, true
	}
	if p := strings.TrimSuffix(path, "/"); p != path {
		if r, ok := routes[p]; ok {
			return r, true
		}
	}
	if strings.HasPrefix(path, routeResponses+"/") {
		return route{routeResponses, "GET, HEAD, DELETE", false, (*Server).storedResponse}, true
	}
	if strings.HasPrefix(path, routeModels+"/") {
		return route{routeModels, "GET, HEAD", false, (*Server).model}, true
	}
	return route{}, false
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r = takeForwarded(r)
	sw := &statusWriter{ResponseWriter: w}
	// out is what every answer is written to: on Anthropic's paths it
	// rewrites errors into Anthropic's shape, those written here before
	// any handler runs (401, 404, 405) included.
	var out http.ResponseWriter = sw
	finish := func() {}
	if anthropicPath(r.URL.Path) {
		out, finish = anthropicShaped(sw)
	}
	rt, known := lookup(r.URL.Path)
	label := routeOther
	if known {
		label = rt.name
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("handler panicked", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			finish() // an error already written goes out as it is
			if sw.code == 0 {
				s.writeError(out, openai.Internal("internal error"))
			}
		}
		finish()
		s.metrics.observe(label, sw.status(), time.Since(start))
	}()
	switch {
	case !known:
		s.writeError(out, openai.NotFound(r.URL.Path))
	case !allowed(rt.methods, r.Method):
		out.Header().Set("Allow", rt.methods)
		s.writeError(out, openai.MethodNotAllowed(r.Method, r.URL.Path))
	default:
		if !rt.open {
			var ok bool
			if r, ok = s.authenticate(r); !ok {
				out.Header().Set("WWW-Authenticate", `Bearer realm="kvpilot"`)
				// Nothing of the body is read: the connection closes.
				out.Header().Set("Connection", "close")
				s.writeError(out, openai.Unauthorized())
				return
			}
		}
		if apiErr := checkContentType(r); apiErr != nil {
			s.writeError(out, apiErr)
			return
		}
		rt.handle(s, out, r)
	}
}

// anthropicPath reports whether path is Anthropic's Messages API's, or
// under it: every error answered there is in Anthropic's shape, whatever
// writes it.
func anthropicPath(path string) bool {
	return path == routeMessages || strings.HasPrefix(path, routeMessages+"/")
}

// allowed reports whether method is one of the comma-separated methods.
func allowed(methods, method string) bool {
	for m := range strings.SplitSeq(methods, ",") {
		if strings.TrimSpace(m) == method {
			return true
		}
	}
	return false
}
