package engine

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Metrics are the engine's Prometheus metrics under vLLM's names and labels
// (model_name, engine), so the Gateway API Inference Extension's endpoint
// picker and existing dashboards read kvpilot pods unchanged. All children
// are resolved at construction: updating them allocates nothing.
type Metrics struct {
	running, waiting, kvUsage, kvCachedBlocks prometheus.Gauge
	cacheInfo                                 *prometheus.GaugeVec
	prefixQueries, prefixHits, preemptions    prometheus.Counter
	promptTokens, generationTokens            prometheus.Counter
	success                                   [completion.Error + 1]prometheus.Counter
	ttft, itl, e2e, iterationTokens           prometheus.Observer
	labels                                    prometheus.Labels
}

// NewMetrics registers the engine metrics for one served model.
func NewMetrics(reg prometheus.Registerer, modelName string) (*Metrics, error) {
	labels := prometheus.Labels{"model_name": modelName, "engine": "0"}
	m := &Metrics{labels: labels}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
	}
	m.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	m.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	m.kvUsage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
	m.kvCachedBlocks = gauge("kvpilot_kv_cache_cached_blocks", "Free KV blocks still holding prefix-cache content.")
	m.cacheInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info", Help: "Information of the KV cache configuration.", ConstLabels: labels,
	}, []string{"block_size", "num_gpu_blocks"})
	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.preemptions = counter("vllm:num_preemptions_total", "Cumulative number of preemptions.")
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.generationTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	success := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total", Help: "Count of finished requests, by finish reason.", ConstLabels: labels,
	}, []string{"finished_reason"})
	for r := completion.None; r <= completion.Error; r++ {
		m.success[r] = success.WithLabelValues(finishedReasonLabel(r))
	}
	latency := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160}
	ttft := hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", latency)
	itl := hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
		[]float64{0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5})
	e2e := hist("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", latency)
	iter := hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine step.",
		[]float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384})
	m.ttft, m.itl, m.e2e, m.iterationTokens = ttft, itl, e2e, iter
	for _, c := range []prometheus.Collector{
		m.running, m.waiting, m.kvUsage, m.kvCachedBlocks, m.cacheInfo, m.prefixQueries, m.prefixHits,
		m.preemptions, m.promptTokens, m.generationTokens, success, ttft, itl, e2e, iter,
	} {
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

func (m *Metrics) setCacheConfig(blockSize, numBlocks int) {
	m.cacheInfo.WithLabelValues(strconv.Itoa(blockSize), strconv.Itoa(numBlocks)).Set(1)
}

func (m *Metrics) observeIteration(tokens, sampled, preempted int) {
	m.iterationTokens.Observe(float64(tokens))
	m.generationTokens.Add(float64(sampled))
	if preempted > 0 {
		m.preemptions.Add(float64(preempted))
	}
}

func (m *Metrics) observeFinish(r completion.Reason, promptTokens int, e2e time.Duration) {
	m.success[r].Inc()
	m.promptTokens.Add(float64(promptTokens))
	m.e2e.Observe(e2e.Seconds())
}

// setState publishes the gauges and the prefix-cache counters; last holds
// the previously published KV stats so counters advance by the difference.
func (m *Metrics) setState(running, waiting int, st kvcache.Stats, last *kvcache.Stats) {
	m.running.Set(float64(running))
	m.waiting.Set(float64(waiting))
	m.kvUsage.Set(st.Usage())
	m.kvCachedBlocks.Set(float64(st.Cached))
	if d := st.Queries - last.Queries; d > 0 {
		m.prefixQueries.Add(float64(d))
	}
	if d := st.Hits - last.Hits; d > 0 {
		m.prefixHits.Add(float64(d))
	}
	*last = st
}
