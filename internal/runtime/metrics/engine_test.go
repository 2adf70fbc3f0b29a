package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

func TestBuckets125(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want []float64
	}{
		{1, []float64{1}},
		{4, []float64{1, 2}},
		{50, []float64{1, 2, 5, 10, 20, 50}},
		{8192, []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}},
	} {
		if diff := cmp.Diff(tc.want, Buckets125(tc.max)); diff != "" {
			t.Errorf("Buckets125(%d) (-want +got):\n%s", tc.max, diff)
		}
	}
}

// TestRequestGroups: n, max_tokens and the longest output are observed once
// per API request (RequestGroupFinished), never per sequence.
func TestRequestGroups(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewEngine(reg, EngineOptions{ModelName: "m", MaxModelLen: 100})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the three sequences of one n=3 request
		m.RequestFinished(&engine.RequestStats{FinishReason: completion.Length, PromptTokens: 4, GenerationTokens: 2})
	}
	m.RequestGroupFinished(3, 8, 6)
	m.RequestGroupFinished(1, 5, 5)
	wantHistograms(t, reg, map[string][2]float64{ // count, sum
		"vllm:request_params_n":                  {2, 4},
		"vllm:request_params_max_tokens":         {2, 13},
		"vllm:request_max_num_generation_tokens": {2, 11},
		"vllm:request_generation_tokens":         {3, 6},
	})
}

// TestPhaseTimes checks the per-request phase histograms against hand-set
// timestamps, and that a phase the request never reached is not observed.
func TestPhaseTimes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewEngine(reg, EngineOptions{ModelName: "m", MaxModelLen: 100})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	m.RequestFinished(&engine.RequestStats{FinishReason: completion.Length, PromptTokens: 10, GenerationTokens: 5, MaxTokens: 5,
		Arrival: t0, Scheduled: at(2), FirstToken: at(3), LastToken: at(7), Finished: at(7.5)})
	// Cancelled while waiting: only e2e and the counts are observed.
	m.RequestFinished(&engine.RequestStats{FinishReason: completion.Cancelled, PromptTokens: 4, MaxTokens: 8,
		Arrival: t0, Finished: at(1)})
	wantHistograms(t, reg, map[string][2]float64{ // count, sum
		"vllm:request_queue_time_seconds":            {1, 2},
		"vllm:request_prefill_time_seconds":          {1, 1},
		"vllm:request_decode_time_seconds":           {1, 4},
		"vllm:request_inference_time_seconds":        {1, 5},
		"vllm:request_time_per_output_token_seconds": {1, 1},
		"vllm:e2e_request_latency_seconds":           {2, 8.5},
		"vllm:request_prompt_tokens":                 {2, 14},
		"vllm:request_generation_tokens":             {2, 5},
	})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vllm:request_success_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			want := 0.0
			for _, l := range s.GetLabel() {
				if l.GetName() == "finished_reason" && (l.GetValue() == "abort" || l.GetValue() == "length") {
					want = 1
				}
			}
			if got := s.GetCounter().GetValue(); got != want {
				t.Errorf("vllm:request_success_total%v = %v, want %v", s.GetLabel(), got, want)
			}
		}
	}
}

// wantHistograms checks each named histogram's sample count and sum.
func wantHistograms(t *testing.T, reg *prometheus.Registry, want map[string][2]float64) {
	t.Helper()
	for name, w := range want {
		count, sum := histogram(t, reg, name)
		if count != uint64(w[0]) || sum != w[1] {
			t.Errorf("%s: count %d sum %v, want %v %v", name, count, sum, w[0], w[1])
		}
	}
}

func histogram(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0, 0
}

// TestObserverAllocatesNothing: the engine calls the adapter inside its
// iteration loop, which must stay allocation-free.
func TestObserverAllocatesNothing(t *testing.T) {
	m, err := NewEngine(prometheus.NewRegistry(), EngineOptions{ModelName: "m", MaxModelLen: 4096})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	it := &engine.IterationStats{Time: now, Running: 3, Waiting: 1, Scheduled: 3, Tokens: 40, PromptTokens: 37, Sampled: 3, Preempted: 1,
		KV:               kvcache.Stats{Total: 10, Used: 4, Queries: 100, Hits: 50},
		TimeToFirstToken: []time.Duration{time.Millisecond}, InterTokenLatency: []time.Duration{time.Millisecond, 2 * time.Millisecond}}
	rq := &engine.RequestStats{FinishReason: completion.Stop, PromptTokens: 37, GenerationTokens: 9, MaxTokens: 16,
		Arrival: now, Scheduled: now, FirstToken: now.Add(time.Millisecond), LastToken: now.Add(9 * time.Millisecond), Finished: now.Add(9 * time.Millisecond)}
	if n := testing.AllocsPerRun(100, func() {
		it.KV.Queries += 10
		m.Iteration(it)
		m.RequestFinished(rq)
	}); n != 0 {
		t.Errorf("%v allocations per Iteration+RequestFinished, want 0", n)
	}
}

// TestHostTierMetrics: offloads and restores advance vLLM's offload byte
// counter by direction, and the block counters, by the difference between
// iterations.
func TestHostTierMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewEngine(reg, EngineOptions{ModelName: "m", MaxModelLen: 100, KVBytesPerBlock: 1000})
	if err != nil {
		t.Fatal(err)
	}
	m.Iteration(&engine.IterationStats{KV: kvcache.Stats{HostTotal: 64, HostUsed: 5, Offloaded: 5}, CopiedBefore: 5, Loading: 2})
	m.Iteration(&engine.IterationStats{KV: kvcache.Stats{HostTotal: 64, HostUsed: 3, Offloaded: 7, Restored: 4, Spilled: 2, HostHits: 64},
		CopiedBefore: 1, CopiedBeside: 5, Loading: 1})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				if l.GetName() == "transfer_type" || l.GetName() == "when" {
					key += "{" + l.GetValue() + "}"
				}
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				got[key] = mt.GetGauge().GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"vllm:kv_offload_total_bytes_total{GPU_to_CPU}":    7000,
		"vllm:kv_offload_total_bytes_total{CPU_to_GPU}":    4000,
		"kvpilot_kv_offload_blocks_total{GPU_to_CPU}":      7,
		"kvpilot_kv_offload_blocks_total{CPU_to_GPU}":      4,
		"kvpilot_prefix_cache_host_hits_total":             64,
		"kvpilot_kv_host_blocks":                           64,
		"kvpilot_kv_host_blocks_used":                      3,
		"kvpilot_kv_spilled_blocks_total":                  2,
		"kvpilot_kv_copied_blocks_total{before_iteration}": 6,
		"kvpilot_kv_copied_blocks_total{beside_iteration}": 5,
		"kvpilot_num_requests_loading":                     1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

// TestCacheConfigInfo: vllm:cache_config_info carries the block size, the
// block count and the KV cache's element type (cache_dtype, as vLLM's).
func TestCacheConfigInfo(t *testing.T) {
	for d, want := range map[kvcache.DType]string{kvcache.DTypeQ8_0: "q8_0", kvcache.DTypeF16: "f16", kvcache.DTypeAuto: "auto"} {
		reg := prometheus.NewRegistry()
		m, err := NewEngine(reg, EngineOptions{ModelName: "m", KVCacheDType: d})
		if err != nil {
			t.Fatal(err)
		}
		m.CacheConfig(16, 4096)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, mf := range mfs {
			if mf.GetName() != "vllm:cache_config_info" {
				continue
			}
			for _, l := range mf.GetMetric()[0].GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
		}
		wantLabels := map[string]string{"block_size": "16", "num_gpu_blocks": "4096", "cache_dtype": want, "engine": "0", "model_name": "m"}
		if diff := cmp.Diff(wantLabels, got); diff != "" {
			t.Errorf("%s: vllm:cache_config_info labels (-want +got):\n%s", d, diff)
		}
	}
}
