package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/chatformat"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// EnvPrefix prefixes the environment variable of every flag: --max-num-seqs
// is also KVPILOT_MAX_NUM_SEQS. A flag on the command line wins.
const EnvPrefix = "KVPILOT_"

// options are the runtime's settings.
type options struct {
	Model           string
	ServedModelName string
	Executor        string
	SimAccelerator  string
	SimModel        string
	SimWeightBits   float64
	TensorParallel  int
	CPUThreads      int
	Device          string
	GGMLLib         string
	// GGMLFlashMaxSeqs is ggml.Options.FlashMaxSeqs (-1: the device's
	// default, ggmlFlashAuto), GGMLDeviceArgmax ggml.Options.DeviceArgmax
	// (GGMLDeviceArgmaxSet: given, flag or environment), GGMLCUDAGraphs
	// ggml.Options.CUDAGraphs.
	GGMLFlashMaxSeqs    int
	GGMLDeviceArgmax    bool
	GGMLDeviceArgmaxSet bool
	GGMLCUDAGraphs      bool
	KVCacheDType        kvcache.DType
	PprofAddr           string

	Host             string
	Port             int
	ControlPort      int
	ControlTokenFile string
	AdvertiseAddr    string
	PodName          string
	ProgramIdle      time.Duration
	APIKeyFile       string
	// Tenancy.
	MaxProgramsPerKey         int
	EnablePromptTokensDetails bool
	SharePrefixCache          bool

	MaxNumSeqs          int
	MaxNumBatchedTokens int
	// LongPrefillTokenThreshold, MaxNumPartialPrefills and
	// MaxLongPartialPrefills are the engine Config's.
	LongPrefillTokenThreshold int
	MaxNumPartialPrefills     int
	MaxLongPartialPrefills    int
	BlockSize                 int
	KVCacheBlocks             int
	KVHostBlocks              int
	StateCheckpoints          engine.CheckpointMode
	// SWACache is --swa-cache: swaCacheWindow or swaCacheFull.
	SWACache              string
	KVCacheMemory         byteSize
	KVCacheMemoryFraction float64
	// KVCacheMemoryFractionSet: --kv-cache-memory-fraction was given (flag
	// or environment), not left at the sim executor's default.
	KVCacheMemoryFractionSet bool

	MaxQueue              int
	AgingRate             float64
	MaxModelLen           int
	DefaultMaxTokens      int
	Stop                  stringList
	MaxResponseChars      int
	ToolCallParser        string
	ReasoningParser       string
	DrainTimeout          time.Duration
	IterationTimeout      time.Duration
	WarmupIterations      int
	MaxBodyBytes          byteSize
	PreprocessMemory      byteSize
	StreamWriteTimeout    time.Duration
	StreamStallTimeout    time.Duration
	MaxConnections        int
	StreamMaxBuffered     byteSize
	ResponsesStoreEntries int
	ResponsesStoreBytes   byteSize
	LogLevel              slog.Level

	// TokenizerPreFallback is model.LoadOptions.PreTokenizerFallback.
	TokenizerPreFallback string
}

const (
	executorCPU  = "cpu"
	executorSim  = "sim"
	executorGGML = "ggml"

	// --swa-cache's values.
	swaCacheWindow = "window"
	swaCacheFull   = "full"
)

// newFlagSet declares the flags over o, with their defaults.
func newFlagSet(o *options, output io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("runtime", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(output, "Usage: runtime [flags]\n\nServes a model over an OpenAI-compatible API. "+
			"Every flag can also be set with the environment variable %s<FLAG_NAME> (e.g. %sMAX_NUM_SEQS); the flag wins.\n\n",
			EnvPrefix, EnvPrefix)
		fs.PrintDefaults()
	}

	fs.StringVar(&o.Model, "model", "builtin:tiny", "model to serve with the cpu or ggml executor: a GGUF file path, or builtin:tiny")
	fs.StringVar(&o.TokenizerPreFallback, "tokenizer-pre-fallback", "", "tokenizer.ggml.pre to split text with when the GGUF's is one kvpilot does not support (e.g. gpt-2), instead of refusing the model; tokens then differ from the model's training (logged as a warning): for trying a model out")
	fs.StringVar(&o.ServedModelName, "served-model-name", "", "model name in the API (default: derived from --model, or --sim-model with the sim executor)")
	fs.StringVar(&o.Executor, "executor", executorCPU, "executor: cpu (pure-Go transformer), ggml (ggml's CPU or CUDA kernels; libraries from hack/setup-ggml.sh) or sim (roofline model of an accelerator)")
	fs.StringVar(&o.Device, "device", "", "ggml executor: cuda or cpu (default: cuda when NVML finds a GPU and the CUDA backend loads, else cpu)")
	fs.StringVar(&o.GGMLLib, "ggml-lib", "", "ggml executor: directory of the ggml libraries (default: $KVPILOT_GGML_LIB; hack/setup-ggml.sh prints it)")
	fs.BoolVar(&o.GGMLDeviceArgmax, "ggml-device-argmax", true, "ggml executor: take the argmax of greedy rows (no logprobs, processors or constraint) on the device and read back their token instead of their logits")
	fs.IntVar(&o.GGMLFlashMaxSeqs, "ggml-flash-max-seqs", ggmlFlashAuto, "ggml executor: batches of at most this many sequences run flash attention per sequence, larger ones the plain attention (0: every batch on the cpu device, none on cuda; -1: every batch on cpu, and on cuda a lone sequence where ggml has the kernels for the KV cache's type, else none; a count on cuda needs those kernels)")
	fs.BoolVar(&o.GGMLCUDAGraphs, "ggml-cuda-graphs", false, "ggml executor on cuda: leave ggml's CUDA graphs on (off by default: with them the runtime aborted under 128 streams on an H100 and an H200; see docs/executors.md)")
	fs.StringVar(&o.SimAccelerator, "sim-accelerator", "H100-SXM", "sim executor: accelerator profile (H100-SXM, H200, A100-80GB, L4)")
	fs.StringVar(&o.SimModel, "sim-model", "llama-3.1-8b", "sim executor: model geometry ("+strings.Join(sim.GeometryNames(), ", ")+")")
	fs.Float64Var(&o.SimWeightBits, "sim-weight-bits", 0, "sim executor: bits a weight, routed experts included, for a quantized checkpoint (8: FP8, about 4.9: Q4_K_M; 0: the profile's own)")
	fs.IntVar(&o.TensorParallel, "tensor-parallel", 1, "sim executor: devices one replica spans (the cpu and ggml executors run on one device: 1 only)")
	fs.IntVar(&o.CPUThreads, "cpu-threads", 0, "cpu executor, and ggml on the cpu device: threads (0: GOMAXPROCS for cpu; for ggml up to one per physical core of the CPUs this process is given, its cgroup's CPU quota, then its CPU affinity, each graph on the count measured fastest)")
	fs.TextVar(&o.KVCacheDType, "kv-cache-dtype", kvcache.DTypeAuto, "KV cache element type: auto, f16, bf16, q8_0 or f32 (auto: the model's activation type, as vLLM's; ggml: f16 unless the weights are F32 or BF16; cpu keeps f32 and refuses the others; sim: the geometry's bf16)")
	fs.StringVar(&o.PprofAddr, "pprof-addr", "", "serve Go's net/http/pprof profiles on this address, e.g. 127.0.0.1:6060 (off when empty; keep it off public interfaces)")

	fs.StringVar(&o.Host, "host", "0.0.0.0", "address to listen on")
	fs.IntVar(&o.Port, "port", 8000, "port of the OpenAI-compatible API (0: any free port)")
	fs.IntVar(&o.ControlPort, "control-port", 8081, "port of the control API for the controller (0: any free port); served only with --control-token-file")
	fs.StringVar(&o.ControlTokenFile, "control-token-file", "", "file with the control API's bearer token; without it the control API is off and programs are only scheduled locally")
	fs.StringVar(&o.AdvertiseAddr, "advertise-addr", "", "host:port other pods reach this pod's API at, as the controller's placements name it (default: $POD_IP:--port, else the listen address)")
	fs.StringVar(&o.PodName, "pod-name", "", "this pod's name in program reports (default: $POD_NAME, else the host name)")
	fs.DurationVar(&o.ProgramIdle, "program-idle-timeout", 10*time.Minute, "a program with no request for this long ends")
	fs.StringVar(&o.APIKeyFile, "api-key-file", "", "file of API keys, one per line; when set, /v1/* requires Authorization: Bearer <key> (or x-api-key), and each key's programs are its own")
	fs.IntVar(&o.MaxProgramsPerKey, "max-programs-per-key", 0, "most live programs one API key may have on this pod; a request starting one more gets 429 with Retry-After (0: no limit)")
	fs.BoolVar(&o.SharePrefixCache, "share-prefix-cache-across-keys", false, "let requests of different API keys hit each other's prefix-cache entries, as vLLM does (off: each key's prefixes are salted with its owner, so hits and timing reveal nothing across keys)")
	fs.BoolVar(&o.EnablePromptTokensDetails, "enable-prompt-tokens-details", false, "report prefix-cache hits in usage (chat and completions: prompt_tokens_details.cached_tokens; Responses: input_tokens_details.cached_tokens; Messages: cache_read_input_tokens; 0 when off); off by default, as in vLLM, since hits tell one client about another's prompts)")

	fs.IntVar(&o.MaxNumSeqs, "max-num-seqs", 256, "most sequences in one iteration")
	fs.IntVar(&o.MaxNumBatchedTokens, "max-num-batched-tokens", 2048, "most tokens in one iteration (longer prompts are prefilled in chunks)")
	fs.IntVar(&o.LongPrefillTokenThreshold, "long-prefill-token-threshold", 0,
		"a prompt with more tokens than this left to prefill takes at most this many of an iteration's tokens until the other requests, running and waiting, have had theirs, so a short request is prefilled beside a long one instead of after it; alone it still takes them all (0: a quarter of --max-num-batched-tokens; negative: off)")
	fs.IntVar(&o.MaxNumPartialPrefills, "max-num-partial-prefills", 4,
		"most prompts in the middle of a prefill at once; a request that would be one more waits, unless its prompt fits in what is left of the iteration's tokens")
	fs.IntVar(&o.MaxLongPartialPrefills, "max-long-partial-prefills", 0,
		"most prompts longer than --long-prefill-token-threshold that prefill in one iteration; the next one is admitted and waits for its turn without holding back the short requests behind it (0: --max-num-partial-prefills)")
	fs.IntVar(&o.BlockSize, "block-size", 16, "tokens per KV block")
	fs.IntVar(&o.KVCacheBlocks, "kv-cache-blocks", 0, "KV cache size in blocks (0: from --kv-cache-memory, or from device memory)")
	fs.TextVar(&o.StateCheckpoints, "state-checkpoints", engine.CheckpointPrograms, "hybrid models (qwen35, qwen35moe, qwen3next): which recurrent states are kept for prefix hits: programs (each prompt's last block boundary and each sequence's latest decoded one: a program's next turn resumes within a block of its last turn's end), prompts (each prompt's last block boundary only) or none")
	fs.StringVar(&o.SWACache, "swa-cache", swaCacheWindow, "ggml and sim executors, models with sliding-window layers (gpt-oss): window keeps those layers' keys and values per sequence in a ring of the window and one chunk of 512 tokens, carved from the KV budget as state slots, so the paged cache holds the full-attention layers only (gpt-oss: twice the tokens); prefix hits then resume from checkpoints at block boundaries, and KV moves between pods carry the rings, as hybrid models' recurrent states; full pages every layer and masks the window (block-granular prefix caching)")
	fs.IntVar(&o.KVHostBlocks, "kv-host-blocks", 0, "host-memory KV tier in blocks: paused programs' KV, and cached blocks the device evicts, move there instead of being dropped, and come back without recompute at the program's next request (0: none)")
	fs.Var(&o.KVCacheMemory, "kv-cache-memory", "KV cache size in bytes, e.g. 512Mi or 8Gi (0: sim and, when given, ggml on cuda: --kv-cache-memory-fraction of device memory; otherwise 1Gi)")
	fs.Float64Var(&o.KVCacheMemoryFraction, "kv-cache-memory-fraction", 0.9, "sim executor, and ggml on cuda when given: fraction of the GPU's memory for weights, activations and KV cache (the cpu executor and ggml on the cpu refuse it)")
	fs.IntVar(&o.MaxQueue, "max-queue", 4096, "most waiting requests; more get 429")
	fs.Float64Var(&o.AgingRate, "aging-rate", 0.1, "priority levels a waiting request gains per second (negative: no aging)")
	fs.IntVar(&o.MaxModelLen, "max-model-len", 0, "context length in tokens (0: the model's)")
	fs.IntVar(&o.DefaultMaxTokens, "default-max-tokens", 0, "max_tokens of requests without one, capped by the room left in the context (0: the room left)")
	fs.Var(&o.Stop, "stop", "stop string of requests that give none (repeatable; env: a JSON array or one string)")
	fs.IntVar(&o.MaxResponseChars, "max-response-chars", 0, "most characters of one response (0: no limit)")
	fs.StringVar(&o.ToolCallParser, "tool-call-parser", "", "tool-call format of the model's output, overriding the one its chat template shows ("+strings.Join(chatformat.Names(), ", ")+", or none)")
	fs.StringVar(&o.ReasoningParser, "reasoning-parser", "", "reasoning format of the model's output, overriding the one its chat template shows ("+strings.Join(chatformat.ReasoningNames(), ", ")+", or none)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long in-flight requests may run before they are aborted")
	fs.DurationVar(&o.IterationTimeout, "iteration-timeout", 0, "most time one executor iteration may take (0: no limit)")
	fs.IntVar(&o.WarmupIterations, "warmup-iterations", 0, "executor iterations run before the server is ready")
	o.MaxBodyBytes = 4 << 20
	fs.Var(&o.MaxBodyBytes, "max-body-bytes", "largest request body, e.g. 4Mi")
	o.PreprocessMemory = 512 << 20
	fs.Var(&o.PreprocessMemory, "preprocess-memory", "pod-wide budget of request preprocessing memory shared by all in-flight requests (bodies decoded and tokenized at 16x their size, constraint compiles as their automata grow), e.g. 512Mi; a request it cannot serve now gets 503 with Retry-After")
	fs.DurationVar(&o.StreamWriteTimeout, "stream-write-timeout", 5*time.Second,
		"a streaming response whose write blocks this long (the client stopped reading) is cancelled and its KV freed (0: no limit)")
	fs.DurationVar(&o.StreamStallTimeout, "stream-stall-timeout", 10*time.Second,
		"a streaming response whose output waits this long for a client whose TCP receive window does not move (it reads nothing; Linux) is cancelled and its KV freed (0: off)")
	fs.IntVar(&o.MaxConnections, "max-connections", 0,
		"most open connections on the API port; one over closes the oldest still sending its request or idle (0: three quarters of the open-file limit)")
	o.StreamMaxBuffered = 1 << 20
	fs.Var(&o.StreamMaxBuffered, "stream-max-buffered-bytes",
		"a streaming response with more than this sent but not read by the client (Linux: the socket's send queue) is cancelled and its KV freed (0: no limit)")
	fs.IntVar(&o.ResponsesStoreEntries, "responses-store-entries", 1024,
		"most responses /v1/responses keeps for previous_response_id (least recently used evicted first; 0: keep none)")
	o.ResponsesStoreBytes = 64 << 20
	fs.Var(&o.ResponsesStoreBytes, "responses-store-bytes", "most bytes of responses /v1/responses keeps, e.g. 64Mi")
	fs.TextVar(&o.LogLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	return fs
}

// parseOptions reads flags from args and, for flags not given there, from
// the environment.
func parseOptions(args []string, getenv func(string) string, output io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(o, output)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := EnvName(f.Name)
		v := getenv(env)
		if v == "" {
			return
		}
		if sl, ok := f.Value.(*stringList); ok {
			if err := sl.setEnv(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
		}
		set[f.Name] = true
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o.KVCacheMemoryFractionSet = set["kv-cache-memory-fraction"]
	o.GGMLDeviceArgmaxSet = set["ggml-device-argmax"]
	return o, o.validate()
}

// EnvName is a flag's environment variable: KVPILOT_ and the name in upper
// case with '-' as '_'.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (o *options) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.Executor == executorCPU || o.Executor == executorSim || o.Executor == executorGGML, "--executor must be cpu, ggml or sim, got %q", o.Executor)
	check(o.Device == "" || o.Device == "cpu" || o.Device == "cuda", "--device must be cuda or cpu, got %q", o.Device)
	check(o.SWACache == swaCacheWindow || o.SWACache == swaCacheFull, "--swa-cache must be window or full, got %q", o.SWACache)
	check(o.Device == "" || o.Executor == executorGGML, "--device applies to --executor ggml only")
	check(o.Port >= 0 && o.Port <= 65535, "--port %d out of range", o.Port)
	check(o.ControlPort >= 0 && o.ControlPort <= 65535, "--control-port %d out of range", o.ControlPort)
	check(o.TensorParallel >= 1, "--tensor-parallel must be >= 1")
	check(o.TensorParallel <= 1 || o.Executor == executorSim,
		"--tensor-parallel %d: only the sim executor spans several devices; the %s executor runs the model on one device (use 1)", o.TensorParallel, o.Executor)
	check(!math.IsNaN(o.AgingRate) && !math.IsInf(o.AgingRate, 0), "--aging-rate must be a finite number (negative: no aging), got %v", o.AgingRate)
	check(o.MaxNumSeqs >= 1, "--max-num-seqs must be >= 1")
	check(o.MaxNumBatchedTokens >= 1, "--max-num-batched-tokens must be >= 1")
	check(o.MaxNumPartialPrefills >= 1, "--max-num-partial-prefills must be >= 1")
	check(o.MaxLongPartialPrefills >= 0 && o.MaxLongPartialPrefills <= o.MaxNumPartialPrefills,
		"--max-long-partial-prefills must be between 0 and --max-num-partial-prefills (%d), got %d", o.MaxNumPartialPrefills, o.MaxLongPartialPrefills)
	check(o.BlockSize >= 1, "--block-size must be >= 1")
	check(o.KVCacheBlocks >= 0, "--kv-cache-blocks must be >= 0")
	check(o.KVHostBlocks >= 0, "--kv-host-blocks must be >= 0")
	check(o.KVCacheMemoryFraction > 0 && o.KVCacheMemoryFraction <= 1, "--kv-cache-memory-fraction must be in (0, 1]")
	if o.KVCacheMemoryFractionSet {
		check(o.Executor != executorCPU,
			"--kv-cache-memory-fraction sizes the KV cache from a GPU's memory, which the cpu executor does not use: size it with --kv-cache-memory or --kv-cache-blocks")
		check(o.Executor != executorGGML || o.Device != "cpu",
			"--kv-cache-memory-fraction sizes the KV cache from a GPU's memory, which ggml on --device cpu does not use: size it with --kv-cache-memory or --kv-cache-blocks")
		check(o.KVCacheMemory == 0 && o.KVCacheBlocks == 0,
			"set at most one of --kv-cache-blocks, --kv-cache-memory and --kv-cache-memory-fraction")
	}
	check(o.MaxQueue >= 1, "--max-queue must be >= 1")
	check(o.MaxProgramsPerKey >= 0, "--max-programs-per-key must be >= 0")
	check(o.MaxModelLen >= 0, "--max-model-len must be >= 0")
	check(o.DefaultMaxTokens >= 0, "--default-max-tokens must be >= 0")
	check(o.StreamStallTimeout >= 0, "--stream-stall-timeout must be >= 0, got %v", o.StreamStallTimeout)
	check(o.MaxResponseChars >= 0, "--max-response-chars must be >= 0")
	// The names are checked here; whether they go together with the
	// formats detected from the template, when the model is loaded.
	if p := o.ToolCallParser; p != "" && p != "none" {
		_, err := chatformat.Lookup(p)
		check(err == nil, "--tool-call-parser: %v", err)
	}
	if r := o.ReasoningParser; r != "" && r != "none" {
		check(slices.Contains(chatformat.ReasoningNames(), r), "--reasoning-parser %q: want %s or none", r, strings.Join(chatformat.ReasoningNames(), ", "))
	}
	check(o.DrainTimeout >= 0, "--drain-timeout must be >= 0")
	check(o.IterationTimeout >= 0, "--iteration-timeout must be >= 0")
	check(o.WarmupIterations >= 0, "--warmup-iterations must be >= 0")
	check(o.MaxBodyBytes > 0, "--max-body-bytes must be > 0")
	check(o.PreprocessMemory > 0, "--preprocess-memory must be > 0")
	check(o.ResponsesStoreEntries >= 0, "--responses-store-entries must be >= 0")
	check(o.ResponsesStoreBytes > 0, "--responses-store-bytes must be > 0")
	check(o.CPUThreads >= 0, "--cpu-threads must be >= 0")
	check(o.GGMLFlashMaxSeqs >= ggmlFlashAuto, "--ggml-flash-max-seqs must be >= -1")
	check(o.SimWeightBits == 0 || (o.SimWeightBits >= 1 && o.SimWeightBits <= 32), "--sim-weight-bits must be 0 (the profile's) or between 1 and 32, got %g", o.SimWeightBits)
	check(o.SimWeightBits == 0 || o.Executor == executorSim, "--sim-weight-bits applies to --executor sim only")
	check(o.GGMLFlashMaxSeqs <= 0 || o.Executor == executorGGML, "--ggml-flash-max-seqs applies to --executor ggml only")
	check(!o.GGMLDeviceArgmaxSet || !o.GGMLDeviceArgmax || o.Executor == executorGGML, "--ggml-device-argmax applies to --executor ggml only")
	check(!o.GGMLCUDAGraphs || o.Executor == executorGGML, "--ggml-cuda-graphs applies to --executor ggml only")
	check(o.Executor != executorCPU || o.KVCacheDType.ResolveAuto(kvcache.DTypeF32) == kvcache.DTypeF32,
		"--kv-cache-dtype %s: the cpu executor keeps its KV cache in f32 (use auto or f32, or --executor ggml)", o.KVCacheDType)
	for _, s := range o.Stop {
		check(s != "", "--stop must not be empty")
	}
	return errors.Join(errs...)
}

// byteSize is a size in bytes written as a number with an optional binary
// (Ki, Mi, Gi, Ti) or decimal (K, M, G, T) suffix, and an optional B.
type byteSize int64

var sizeSuffixes = []struct {
	suffix string
	mult   float64
}{
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12},
}

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	v, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(v)
	return nil
}

func parseByteSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	mult := 1.0
	for _, sf := range sizeSuffixes {
		if num, ok := strings.CutSuffix(t, sf.suffix); ok {
			t, mult = strings.TrimSpace(num), sf.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("invalid size %q: want bytes, e.g. 1073741824, 512Mi or 8Gi", s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return int64(v), nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// setEnv reads the list from an environment variable: a JSON array of
// strings, or one string.
func (l *stringList) setEnv(v string) error {
	if strings.HasPrefix(strings.TrimSpace(v), "[") {
		var list []string
		if err := json.Unmarshal([]byte(v), &list); err != nil {
			return fmt.Errorf("want a JSON array of strings: %w", err)
		}
		*l = list
		return nil
	}
	*l = stringList{v}
	return nil
}
