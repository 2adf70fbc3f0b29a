// Package metrics publishes the engine's statistics as Prometheus metrics
// under vLLM's names and labels, so the Gateway API Inference Extension's
// endpoint picker, routers and the dashboards users already run for vLLM
// read kvpilot pods unchanged. The engine knows nothing of Prometheus: it
// hands an engine.Observer its per-iteration and per-request stats, and
// Engine here is that observer.
package metrics

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Bucket layouts, as vLLM declares them.
var (
	// ttftBuckets reach 2560 s: an agent's long request must not land in +Inf.
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
		1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	// tokenLatencyBuckets serve inter-token latency and time per output token.
	tokenLatencyBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1, 2.5, 5, 7.5, 10, 20, 40, 80}
	// requestLatencyBuckets serve e2e latency and the per-phase times; they
	// reach 7680 s (two hours).
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60,
		120, 240, 480, 960, 1920, 7680}
	iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	paramsNBuckets        = []float64{1, 2, 5, 10, 20}
)

// Buckets125 returns 1, 2, 5, 10, 20, 50, … up to and including max: the
// layout vLLM uses for token-count histograms, sized by the model context.
func Buckets125(max int) []float64 {
	var b []float64
	for exp := 1.0; ; exp *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := m * exp
			if v > float64(max) {
				return b
			}
			b = append(b, v)
		}
	}
}

// EngineOptions configure the engine metrics.
type EngineOptions struct {
	// ModelName is the served model name: the model_name label.
	ModelName string
	// MaxModelLen sizes the token-count histograms' buckets (vLLM's 1-2-5
	// layout up to the context length).
	MaxModelLen int
	// KVBytesPerBlock is one KV block's size in bytes, to report host-tier
	// transfers in bytes (0: counted in blocks only).
	KVBytesPerBlock int64
	// KVCacheDType is the KV cache's element type, vllm:cache_config_info's
	// cache_dtype label (kvcache.DTypeAuto, the zero value, is published as
	// vLLM's default "auto").
	KVCacheDType kvcache.DType
}

// Engine is the engine.Observer that publishes vLLM's metrics. Every child
// metric is resolved at construction, so the calls the engine makes
// allocate nothing.
type Engine struct {
	running, waiting, kvUsage, kvCachedBlocks prometheus.Gauge
	cacheInfo                                 *prometheus.GaugeVec
	cacheDType                                string
	loraInfo                                  prometheus.Gauge
	prefixQueries, prefixHits, preemptions    prometheus.Counter
	promptTokens, generationTokens            prometheus.Counter
	success                                   [completion.Error + 1]prometheus.Counter

	ttft, itl, iterationTokens                                   prometheus.Observer
	e2e, queueTime, prefillTime, decodeTime, inferenceTime, tpot prometheus.Observer
	reqPromptTokens, reqGenerationTokens, reqMaxGeneration       prometheus.Observer
	paramsMaxTokens, paramsN                                     prometheus.Observer

	// Host KV tier: blocks and bytes moved by direction, as vLLM's
	// offloading connector names them, and the tier's size and use.
	offloadBlocks, restoreBlocks prometheus.Counter
	offloadBytes, restoreBytes   prometheus.Counter
	hostHits, spilledBlocks      prometheus.Counter
	hostBlocks, hostUsed         prometheus.Gauge
	bytesPerBlock                float64
	// Copies before the iteration and beside it (an executor that
	// overlaps them), and the requests waiting out of the batch for theirs.
	copiedBefore, copiedBeside prometheus.Counter
	loading                    prometheus.Gauge

	// A hybrid model's recurrent states: slots by kind, those in use, and
	// checkpoints saved and restored.
	stateRunningSlots, stateCheckpointSlots, stateHostCheckpointSlots prometheus.Gauge
	stateRunningUsed, stateCheckpoints                                prometheus.Gauge
	stateSaved, stateRestored, stateRestoredTokens, stateSpilled      prometheus.Counter
	stateImported                                                     prometheus.Counter

	// lastKV are the previously published KV stats: the prefix-cache
	// counters advance by the difference (the engine's are cumulative);
	// lastStates the states'.
	lastKV     kvcache.Stats
	lastStates engine.StateStats
}

var _ engine.Observer = (*Engine)(nil)

// NewEngine registers the engine metrics for one served model on reg.
func NewEngine(reg prometheus.Registerer, o EngineOptions) (*Engine, error) {
	labels := prometheus.Labels{"model_name": o.ModelName, "engine": "0"}
	m := &Engine{bytesPerBlock: float64(o.KVBytesPerBlock), cacheDType: o.KVCacheDType.String()}
	var cs []prometheus.Collector
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
		cs = append(cs, g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		cs = append(cs, c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
		cs = append(cs, h)
		return h
	}
	m.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	m.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	m.kvUsage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
	m.kvCachedBlocks = gauge("kvpilot_kv_cache_cached_blocks", "Free KV blocks still holding prefix-cache content.")
	m.stateRunningSlots = gauge("kvpilot_recurrent_state_running_slots", "Hybrid models: recurrent-state slots for running sequences (the most that run at once).")
	m.stateCheckpointSlots = gauge("kvpilot_recurrent_state_checkpoint_slots", "Hybrid models: recurrent-state slots for checkpoints that prefix hits resume from.")
	m.stateHostCheckpointSlots = gauge("kvpilot_recurrent_state_host_checkpoint_slots", "Hybrid models: host-memory slots for checkpoints the device evicts.")
	m.stateSpilled = counter("kvpilot_recurrent_state_spills_total", "Hybrid models: checkpoints the device evicted to host memory.")
	m.stateImported = counter("kvpilot_recurrent_state_imports_total", "Hybrid models: checkpoints moved here from other pods with programs' KV.")
	m.stateRunningUsed = gauge("kvpilot_recurrent_state_running_used", "Hybrid models: running sequences holding a recurrent-state slot.")
	m.stateCheckpoints = gauge("kvpilot_recurrent_state_checkpoints", "Hybrid models: valid recurrent-state checkpoints.")
	m.stateSaved = counter("kvpilot_recurrent_state_saves_total", "Hybrid models: recurrent states saved at block boundaries.")
	m.stateRestored = counter("kvpilot_recurrent_state_restores_total", "Hybrid models: recurrent states restored for prefix hits.")
	m.stateRestoredTokens = counter("kvpilot_recurrent_state_restored_tokens_total", "Hybrid models: prompt tokens the restored states skipped.")
	m.cacheInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info", Help: "Information of the KV cache configuration.", ConstLabels: labels,
	}, []string{"block_size", "cache_dtype", "num_gpu_blocks"})
	cs = append(cs, m.cacheInfo)
	// The endpoint picker reads the adapters from the labels of the sample
	// with the newest value (a Unix time). kvpilot runs no LoRA adapters,
	// and says so: max_lora 0, none running or waiting.
	lora := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm:lora_requests_info", Help: "Running stats on LoRA requests (kvpilot serves no adapters).", ConstLabels: labels,
	}, []string{"max_lora", "waiting_lora_adapters", "running_lora_adapters"})
	cs = append(cs, lora)
	m.loraInfo = lora.WithLabelValues("0", "", "")

	// vLLM's offloading connector counts bytes by transfer_type; the block
	// counts, host hits and tier gauges are kvpilot's.
	offBytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:kv_offload_total_bytes_total", Help: "KV bytes moved between device and host memory, by direction.", ConstLabels: labels,
	}, []string{"transfer_type"})
	offBlocks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvpilot_kv_offload_blocks_total", Help: "KV blocks moved between device and host memory, by direction.", ConstLabels: labels,
	}, []string{"transfer_type"})
	cs = append(cs, offBytes, offBlocks)
	m.offloadBytes, m.restoreBytes = offBytes.WithLabelValues("GPU_to_CPU"), offBytes.WithLabelValues("CPU_to_GPU")
	m.offloadBlocks, m.restoreBlocks = offBlocks.WithLabelValues("GPU_to_CPU"), offBlocks.WithLabelValues("CPU_to_GPU")
	m.hostHits = counter("kvpilot_prefix_cache_host_hits_total", "Prefix cache hits served from the host KV tier, in tokens.")
	m.hostBlocks = gauge("kvpilot_kv_host_blocks", "Blocks of the host-memory KV tier.")
	m.hostUsed = gauge("kvpilot_kv_host_blocks_used", "Host-memory KV blocks holding offloaded KV.")
	copied := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvpilot_kv_copied_blocks_total", Help: "KV block copies between device and host memory, by when they ran: before the iteration (it waited for them) or beside it (overlapped with its compute).", ConstLabels: labels,
	}, []string{"when"})
	cs = append(cs, copied)
	m.copiedBefore, m.copiedBeside = copied.WithLabelValues("before_iteration"), copied.WithLabelValues("beside_iteration")
	m.loading = gauge("kvpilot_num_requests_loading", "Requests left out of the batch while their KV is copied back from host memory beside it.")
	m.spilledBlocks = counter("kvpilot_kv_spilled_blocks_total", "KV blocks copied to the host tier because the device evicted them (counted in the GPU_to_CPU offloads too).")

	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.preemptions = counter("vllm:num_preemptions_total", "Cumulative number of preemptions.")
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.generationTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	success := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total", Help: "Count of finished requests, by finish reason.", ConstLabels: labels,
	}, []string{"finished_reason"})
	cs = append(cs, success)
	for r := completion.None; r <= completion.Error; r++ {
		m.success[r] = success.WithLabelValues(finishedReasonLabel(r))
	}

	m.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tokenLatencyBuckets)
	m.iterationTokens = hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine step.", iterationTokenBuckets)
	m.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", requestLatencyBuckets)
	m.queueTime = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets)
	m.prefillTime = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets)
	m.decodeTime = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets)
	m.inferenceTime = hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets)
	m.tpot = hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", tokenLatencyBuckets)
	tokens := Buckets125(max(o.MaxModelLen, 1))
	m.reqPromptTokens = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
	m.reqGenerationTokens = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokens)
	m.reqMaxGeneration = hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", tokens)
	m.paramsMaxTokens = hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens)
	m.paramsN = hist("vllm:request_params_n", "Histogram of the n request parameter.", paramsNBuckets)

	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// finishedReasonLabel spells finish reasons as vLLM's metric does.
func finishedReasonLabel(r completion.Reason) string {
	switch r {
	case completion.Cancelled:
		return "abort"
	case completion.None:
		return "unknown"
	}
	return r.String()
}

// CacheConfig publishes vllm:cache_config_info.
func (m *Engine) CacheConfig(blockSize, numBlocks int) {
	m.cacheInfo.WithLabelValues(strconv.Itoa(blockSize), m.cacheDType, strconv.Itoa(numBlocks)).Set(1)
}

// Iteration publishes the gauges, the token and preemption counters and the
// per-token latencies.
func (m *Engine) Iteration(st *engine.IterationStats) {
	m.running.Set(float64(st.Running))
	m.waiting.Set(float64(st.Waiting))
	m.kvUsage.Set(st.KV.Usage())
	m.kvCachedBlocks.Set(float64(st.KV.Cached))
	m.states(&st.States)
	if d := st.KV.Queries - m.lastKV.Queries; d > 0 {
		m.prefixQueries.Add(float64(d))
	}
	if d := st.KV.Hits - m.lastKV.Hits; d > 0 {
		m.prefixHits.Add(float64(d))
	}
	if d := st.KV.HostHits - m.lastKV.HostHits; d > 0 {
		m.hostHits.Add(float64(d))
	}
	if d := st.KV.Offloaded - m.lastKV.Offloaded; d > 0 {
		m.offloadBlocks.Add(float64(d))
		m.offloadBytes.Add(float64(d) * m.bytesPerBlock)
	}
	if d := st.KV.Spilled - m.lastKV.Spilled; d > 0 {
		m.spilledBlocks.Add(float64(d))
	}
	if d := st.KV.Restored - m.lastKV.Restored; d > 0 {
		m.restoreBlocks.Add(float64(d))
		m.restoreBytes.Add(float64(d) * m.bytesPerBlock)
	}
	if st.CopiedBefore > 0 {
		m.copiedBefore.Add(float64(st.CopiedBefore))
	}
	if st.CopiedBeside > 0 {
		m.copiedBeside.Add(float64(st.CopiedBeside))
	}
	m.loading.Set(float64(st.Loading))
	m.hostBlocks.Set(float64(st.KV.HostTotal))
	m.hostUsed.Set(float64(st.KV.HostUsed))
	m.lastKV = st.KV
	if st.Preempted > 0 {
		m.preemptions.Add(float64(st.Preempted))
	}
	if st.PromptTokens > 0 {
		m.promptTokens.Add(float64(st.PromptTokens))
	}
	if st.Sampled > 0 {
		m.generationTokens.Add(float64(st.Sampled))
	}
	if st.Scheduled > 0 {
		m.iterationTokens.Observe(float64(st.Tokens))
	}
	for _, d := range st.TimeToFirstToken {
		m.ttft.Observe(d.Seconds())
	}
	for _, d := range st.InterTokenLatency {
		m.itl.Observe(d.Seconds())
	}
	m.loraInfo.Set(float64(st.Time.UnixNano()) / 1e9)
}

// RequestFinished publishes the per-request histograms. A phase the request
// never reached (a request cancelled while waiting was never scheduled) is
// not observed, rather than observed as a made-up zero.
func (m *Engine) RequestFinished(st *engine.RequestStats) {
	m.success[st.FinishReason].Inc()
	m.e2e.Observe(seconds(st.Arrival, st.Finished))
	if !st.Scheduled.IsZero() {
		m.queueTime.Observe(seconds(st.Arrival, st.Scheduled))
		if !st.LastToken.IsZero() {
			m.inferenceTime.Observe(seconds(st.Scheduled, st.LastToken))
		}
		if !st.FirstToken.IsZero() {
			m.prefillTime.Observe(seconds(st.Scheduled, st.FirstToken))
		}
	}
	if !st.FirstToken.IsZero() {
		decode := seconds(st.FirstToken, st.LastToken)
		m.decodeTime.Observe(decode)
		if st.GenerationTokens > 1 {
			m.tpot.Observe(decode / float64(st.GenerationTokens-1))
		}
	}
	m.reqPromptTokens.Observe(float64(st.PromptTokens))
	m.reqGenerationTokens.Observe(float64(st.GenerationTokens))
}

// RequestGroupFinished publishes the histograms vLLM keeps per API request
// rather than per sequence: an API request with n (or best_of) choices is
// several engine requests, so the server reports the group once all of its
// sequences are done. n is the request's n parameter, maxTokens its
// max_tokens, maxGeneration the longest output among its sequences.
func (m *Engine) RequestGroupFinished(n, maxTokens, maxGeneration int) {
	m.paramsN.Observe(float64(n))
	m.paramsMaxTokens.Observe(float64(maxTokens))
	m.reqMaxGeneration.Observe(float64(maxGeneration))
}

// seconds is b−a in seconds, never negative (clocks are monotonic in the
// engine, but a zero or reordered time must not make a histogram lie).
func seconds(a, b time.Time) float64 {
	return math.Max(b.Sub(a).Seconds(), 0)
}

// states publishes a hybrid model's recurrent-state statistics.
func (m *Engine) states(st *engine.StateStats) {
	m.stateRunningSlots.Set(float64(st.RunningSlots))
	m.stateCheckpointSlots.Set(float64(st.CheckpointSlots))
	m.stateHostCheckpointSlots.Set(float64(st.HostCheckpointSlots))
	if d := st.Spilled - m.lastStates.Spilled; d > 0 {
		m.stateSpilled.Add(float64(d))
	}
	if d := st.Imported - m.lastStates.Imported; d > 0 {
		m.stateImported.Add(float64(d))
	}
	m.stateRunningUsed.Set(float64(st.RunningUsed))
	m.stateCheckpoints.Set(float64(st.Checkpoints))
	if d := st.Saved - m.lastStates.Saved; d > 0 {
		m.stateSaved.Add(float64(d))
	}
	if d := st.Restored - m.lastStates.Restored; d > 0 {
		m.stateRestored.Add(float64(d))
	}
	if d := st.RestoredTokens - m.lastStates.RestoredTokens; d > 0 {
		m.stateRestoredTokens.Add(float64(d))
	}
	m.lastStates = *st
}
