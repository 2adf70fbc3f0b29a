// Command runtime is the process every kvpilot runtime pod runs: it loads a
// model (or a simulated accelerator), runs the continuous-batching engine
// and serves the OpenAI-compatible API.
//
//	runtime                                  # the built-in tiny model on CPU, port 8000
//	runtime --model ./qwen2.5-0.5b.gguf      # a GGUF model on CPU
//	runtime --executor sim --sim-model llama-3.1-8b --sim-accelerator H100-SXM
//	runtime fetch --url hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M --cache-dir /var/cache/kvpilot
//
// Every flag can also be set by an environment variable KVPILOT_<FLAG>
// (--max-num-seqs is KVPILOT_MAX_NUM_SEQS); the flag wins. On SIGTERM or
// SIGINT the pod reports not ready, answers the requests it holds for
// paused programs at once, stops accepting connections, lets the requests
// in flight finish, aborts what is left shortly before --drain-timeout and
// exits 0 within it.
//
// Requests carrying a program id go through the program gate: they run
// here, are forwarded once to the pod their program is placed on, or wait
// while it is paused. With --control-token-file the control API on
// --control-port lets the controller read the program table and push
// placements.
//
// runtime fetch downloads a model named by a URL into a cache directory and
// prints the path to load: a pool whose model has a url runs it as an init
// container, so the same image brings its weights in.
package main

import (
	"strings"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kvpilot/kvpilot/internal/runtime/control"
	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/device"
	"github.com/kvpilot/kvpilot/internal/runtime/metrics"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/runtime/server"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, stop, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// maxAbortGrace bounds the part of the drain timeout kept, after in-flight
// requests are aborted, for their handlers to write their last events; the
// whole shutdown fits in --drain-timeout.
const maxAbortGrace = time.Second

// run serves until ctx is done (a signal), then drains. releaseSignals
// restores default signal handling once draining starts, so a second
// Ctrl-C kills the process. It returns the exit code.
func run(ctx context.Context, releaseSignals func(), args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "fetch" {
		return runFetch(ctx, args[1:], getenv, stdout, stderr)
	}
	o, err := parseOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "runtime:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.LogLevel}))
	slog.SetDefault(log)
	if err := serve(ctx, releaseSignals, o, log, stdout); err != nil {
		log.Error("runtime failed", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, releaseSignals func(), o *options, log *slog.Logger, stdout io.Writer) error {
	devs, err := device.Discover(device.Options{})
	if err != nil {
		log.Warn("device discovery failed; continuing without devices", "err", err)
	}
	for _, d := range devs {
		log.Info("device", "index", d.Index, "vendor", d.Vendor, "name", d.Name, "memory_bytes", d.MemoryBytes)
	}
	if len(devs) == 0 {
		log.Info("no accelerator found (NVML absent or no devices)")
	}
	if o.PprofAddr != "" {
		_, stopPprof, err := startPprof(o.PprofAddr, log)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	var controlToken string
	if o.ControlTokenFile != "" {
		b, err := os.ReadFile(o.ControlTokenFile)
		if err != nil {
			return fmt.Errorf("--control-token-file: %w", err)
		}
		if controlToken = strings.TrimSpace(string(b)); controlToken == "" {
			return fmt.Errorf("--control-token-file %s is empty", o.ControlTokenFile)
		}
	}

	var keys []string
	if o.APIKeyFile != "" {
		if keys, err = server.LoadAPIKeys(o.APIKeyFile); err != nil {
			return err
		}
		log.Info("API keys required", "keys", len(keys))
	}

	be, err := buildBackend(o, devs, log)
	if err != nil {
		return err
	}
	defer be.close()
	if ctx.Err() != nil {
		log.Info("signalled while loading; exiting")
		return nil
	}
	name := o.ServedModelName
	if name == "" {
		name = be.servedName
	}
	maxModelLen := be.contextLen
	if o.MaxModelLen > be.contextLen {
		return fmt.Errorf("--max-model-len %d exceeds the model's context of %d tokens", o.MaxModelLen, be.contextLen)
	}
	if o.MaxModelLen > 0 {
		maxModelLen = o.MaxModelLen
	}
	if capacity := be.numBlocks * o.BlockSize; capacity < maxModelLen {
		log.Warn("the KV cache holds less than one full context; longer requests are refused",
			"kv_tokens", capacity, "max_model_len", maxModelLen)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := device.Register(reg, devs); err != nil {
		return err
	}
	engineMetrics, err := metrics.NewEngine(reg, metrics.EngineOptions{ModelName: name, MaxModelLen: maxModelLen, KVBytesPerBlock: be.kvBytesPerBlock, KVCacheDType: be.kvDType})
	if err != nil {
		return err
	}
	// A hybrid model's host tier keeps its attending layers' blocks and
	// its recurrent-state checkpoints, half of its memory each.
	hostBlocks, hostStates := o.KVHostBlocks, 0
	if be.stateSlots > 0 && hostBlocks > 0 {
		hostBlocks, hostStates = kvcache.SplitHostTier(hostBlocks, be.kvBytesPerBlock, be.stateBytes)
		log.Info("hybrid model: the host KV tier keeps blocks and state checkpoints", "host_blocks", hostBlocks, "host_state_slots", hostStates,
			"kv_host_blocks_asked", o.KVHostBlocks)
	}
	eng, err := engine.New(engine.Config{
		MaxNumSeqs: o.MaxNumSeqs, MaxNumBatchedTokens: o.MaxNumBatchedTokens, MaxQueue: o.MaxQueue,
		MaxModelLen: maxModelLen, VocabSize: be.vocabSize,
		LongPrefillTokenThreshold: o.LongPrefillTokenThreshold, MaxNumPartialPrefills: o.MaxNumPartialPrefills, MaxLongPartialPrefills: o.MaxLongPartialPrefills,
		KV:               kvcache.Config{NumBlocks: be.numBlocks, BlockSize: o.BlockSize, EnablePrefixCache: true, HostBlocks: hostBlocks},
		StateCheckpoints: o.StateCheckpoints, HostStateSlots: hostStates,
		AgingRate: o.AgingRate, WarmupIterations: o.WarmupIterations, IterationTimeout: o.IterationTimeout,
		EOS: be.eos, Decoder: be.decoder, Observer: engineMetrics, Logger: log,
	}, be.exec)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return err
	}
	// kvMove serves this pod's programs' KV to the other pods and fetches
	// theirs (the control port's GET /v1/kv, placements' fetch).
	var kvMove *control.KVTransfer
	var bytesPerToken int64
	if f, ok := eng.BlockFormat(); ok {
		bytesPerToken = f.Geometry.BytesPerToken()
	}
	// advertise names this pod's API as placements do: the programs table
	// tells routes to it from routes elsewhere, and forwarded requests'
	// signatures name it (server.HeaderForwarded).
	advertise := advertiseAddr(o, ln.Addr())
	table := programs.New(programs.Config{
		Pod: podName(o), Addr: advertise, IdleTimeout: o.ProgramIdle, Logger: log,
		MaxProgramsPerOwner: o.MaxProgramsPerKey,
		KV: func() wire.KVReport {
			st := eng.KVStats()
			return wire.KVReport{BlockSize: eng.BlockSize(), TotalBlocks: st.Total, UsedBlocks: st.Used, CachedBlocks: st.Cached,
				HostTotalBlocks: st.HostTotal, HostUsedBlocks: st.HostUsed, BytesPerToken: bytesPerToken, MaxModelLen: maxModelLen,
				StateTokens: be.stateTokens}
		},
		Offload: func(salt string, tokens []int32) { eng.OffloadSaltedPrefix(salt, tokens) },
		Restore: func(salt string, tokens []int32) { eng.RestoreSaltedPrefix(salt, tokens) },
		FetchKV: func(ctx context.Context, id, addr string, done func()) {
			go func() {
				defer done()
				start := time.Now()
				n, err := kvMove.Fetch(ctx, controlclient.New(controlToken, programs.DefaultFetchTimeout), addr, id)
				if err != nil {
					log.Warn("KV fetch from another pod failed or was cut short; the rest is recomputed",
						"program", id, "from", addr, "blocks", n, "err", err)
					return
				}
				log.Info("fetched a program's KV from another pod", "program", id, "from", addr, "blocks", n,
					"elapsed", time.Since(start).Round(time.Millisecond))
			}()
		},
	})
	kvMetrics, err := control.NewKVMetrics(reg)
	if err != nil {
		return err
	}
	kvMove = &control.KVTransfer{Engine: eng, Table: table, MaxChainTokens: maxModelLen, Metrics: kvMetrics, Logger: log}
	srv, err := server.New(server.Config{
		Engine: eng, Codec: be.codec, ModelName: name, ModelArchitecture: be.architecture, DefaultMaxTokens: o.DefaultMaxTokens, Stop: o.Stop,
		MaxResponseChars: o.MaxResponseChars, MaxBodyBytes: int64(o.MaxBodyBytes), PreprocessMemory: int64(o.PreprocessMemory), APIKeys: keys,
		ToolCallParser: o.ToolCallParser, ReasoningParser: o.ReasoningParser,
		StreamWriteTimeout: noLimit(o.StreamWriteTimeout), StreamMaxBufferedBytes: noLimit(int64(o.StreamMaxBuffered)),
		StreamStallTimeout: noLimit(o.StreamStallTimeout), Registry: reg, Requests: engineMetrics, Devices: devs, Logger: log, Programs: table, ForwardKey: []byte(controlToken), AdvertiseAddr: advertise,
		ResponsesStoreEntries: int(noLimit(int64(o.ResponsesStoreEntries))), ResponsesStoreBytes: int64(o.ResponsesStoreBytes),
		PromptTokensDetails: o.EnablePromptTokensDetails, SharePrefixCacheAcrossKeys: o.SharePrefixCache,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	stopControl, err := serveControl(ctx, o, table, kvMove, controlToken, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer stopControl()
	evicted, err := server.NewConnEvictedCounter(reg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	conns := server.NewConnLimiter(apiConnLimit(o.MaxConnections), evicted)
	httpSrv := &http.Server{
		Handler:           srv,
		ConnContext:       server.ConnContext,
		ConnState:         conns.ConnState,
		ReadHeaderTimeout: 10 * time.Second,
		// Bounds reading a request (headers and body); a response streams
		// as long as it needs (the server clears the read deadline once the
		// body is read).
		ReadTimeout: 2 * time.Minute,
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- httpSrv.Serve(conns.Listener(ln)) }()
	log.Info("listening", "addr", ln.Addr().String(), "max_connections", conns.Limit(), "model", name, "backend", be.description, "max_model_len", maxModelLen)

	if err := eng.Start(ctx); err != nil {
		_ = httpSrv.Close()
		return fmt.Errorf("start engine: %w", err)
	}
	srv.SetReady(true)
	log.Info("ready", "addr", ln.Addr().String())
	fmt.Fprintf(stdout, "\nkvpilot runtime is serving %q. Try:\n\n  %s\n\n", name, curlCommand(ln.Addr(), name, len(keys) > 0))

	select {
	case <-ctx.Done():
	case err := <-served:
		_ = eng.Stop(context.Background())
		return fmt.Errorf("http server: %w", err)
	}
	releaseSignals()
	return drain(eng, srv, httpSrv, o.DrainTimeout, log)
}

// drain stops taking traffic and lets in-flight requests finish, all within
// timeout: readiness goes false, held requests are answered at once
// (forwarded to their program's pod or 503 with Retry-After), the listener
// and idle keep-alive connections close, the engine refuses new requests
// and finishes the rest; shortly before the deadline what is left is
// aborted (forwarded streams cut too) so handlers write their last events,
// and at the deadline remaining connections are closed.
func drain(eng *engine.Engine, srv *server.Server, httpSrv *http.Server, timeout time.Duration, log *slog.Logger) error {
	running, waiting := eng.Pending()
	log.Info("shutting down: draining", "running", running, "waiting", waiting, "drain_timeout", timeout)
	start := time.Now()
	deadline := start.Add(timeout)
	abortAt := deadline.Add(-min(timeout/10, maxAbortGrace))
	srv.SetReady(false)
	srv.BeginDrain()

	engCtx, cancelEng := context.WithDeadline(context.Background(), abortAt)
	defer cancelEng()
	stopped := make(chan error, 1)
	go func() { stopped <- eng.Stop(engCtx) }()
	abortForwards := time.AfterFunc(time.Until(abortAt), srv.AbortForwards)
	defer abortForwards.Stop()

	httpCtx, cancelHTTP := context.WithDeadline(context.Background(), deadline)
	defer cancelHTTP()
	if err := httpSrv.Shutdown(httpCtx); err != nil {
		log.Warn("HTTP connections still open at the drain deadline; closing them", "err", err)
		_ = httpSrv.Close()
	}
	if err := <-stopped; err != nil {
		log.Warn("drain deadline passed; aborted the requests left", "err", err)
	}
	log.Info("stopped", "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// noLimit maps a flag's 0 ("no limit") to the server's negative.
func noLimit[T ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// curlCommand is a request to paste into a shell.
func curlCommand(addr net.Addr, model string, auth bool) string {
	host, port := "127.0.0.1", ""
	if ta, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
		if !ta.IP.IsUnspecified() {
			host = ta.IP.String()
		}
	}
	authHeader := ""
	if auth {
		authHeader = ` -H "Authorization: Bearer $KVPILOT_API_KEY"`
	}
	return fmt.Sprintf(`curl -s http://%s/v1/chat/completions -H 'Content-Type: application/json'%s -d '{"model":%q,"messages":[{"role":"user","content":"Hello!"}],"max_tokens":32}'`,
		net.JoinHostPort(host, port), authHeader, model)
}

// serveControl starts the control API (when a token is configured) and the
// program table's timers; the returned func stops both.
func serveControl(ctx context.Context, o *options, table *programs.Table, kv *control.KVTransfer, token string, log *slog.Logger) (func(), error) {
	tickCtx, stopTick := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				table.Tick()
			case <-tickCtx.Done():
				return
			}
		}
	}()
	if token == "" {
		log.Info("control API off (no --control-token-file): programs are scheduled on this pod only")
		return stopTick, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.ControlPort)))
	if err != nil {
		stopTick()
		return nil, fmt.Errorf("control API: %w", err)
	}
	routes := control.Routes(table)
	kv.AddRoutes(routes)
	srv := control.NewServer(control.Authorize(token, routes), log)
	go func() { _ = srv.Serve(control.GuardListener(ln, control.MaxUnauthenticatedConns)) }()
	log.Info("control API listening", "addr", ln.Addr().String())
	return func() {
		stopTick()
		_ = srv.Close()
	}, nil
}

// podName is this pod's name in program reports.
func podName(o *options) string {
	if o.PodName != "" {
		return o.PodName
	}
	if n := os.Getenv("POD_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}

// advertiseAddr is the address placements name this pod's API by.
func advertiseAddr(o *options, listen net.Addr) string {
	if o.AdvertiseAddr != "" {
		return o.AdvertiseAddr
	}
	port := strconv.Itoa(o.Port)
	if ta, ok := listen.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
	}
	if ip := os.Getenv("POD_IP"); ip != "" {
		return net.JoinHostPort(ip, port)
	}
	return listen.String()
}

// apiConnLimit is --max-connections, or when it is 0 three quarters of
// the process's open-file limit: the rest stays for the control port, the
// model's files and the connections the pod opens itself (requests
// forwarded to other pods, KV moves).
func apiConnLimit(flag int) int {
	if flag > 0 {
		return flag
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<20 {
		return 1 << 15
	}
	return max(int(rl.Cur)*3/4, 16)
}
