package server

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsVLLMParity scrapes /metrics over HTTP after two requests and
// checks every vLLM family a router or dashboard reads: its name, its type,
// its label set, and for the request histograms the observations and the
// bucket range.
func TestMetricsVLLMParity(t *testing.T) {
	env := newEnv(t, envOpts{})
	for range 2 {
		if r := env.post("/v1/completions", `{"prompt":"hello there","max_tokens":3,"ignore_eos":true}`); r.status != http.StatusOK {
			t.Fatalf("completion: %d %s", r.status, r.body)
		}
	}
	// The engine records a request's stats under its lock just after
	// handing the final chunk to the stream, so a client can have its
	// answer first: wait until the loop is idle (Pending takes that lock).
	poll.Until(t, waitTimeout, "the engine loop idle", func() bool { run, wait := env.eng.Pending(); return run+wait == 0 })
	r := env.do(http.MethodGet, "/metrics", "")
	if r.status != http.StatusOK {
		t.Fatalf("/metrics: %d", r.status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}

	base := []string{"engine", "model_name"}
	with := func(extra ...string) []string {
		l := append(slices.Clone(base), extra...)
		sort.Strings(l)
		return l
	}
	G, C, H := dto.MetricType_GAUGE, dto.MetricType_COUNTER, dto.MetricType_HISTOGRAM
	want := map[string]struct {
		typ    dto.MetricType
		labels []string
	}{
		"vllm:num_requests_running":                  {G, base},
		"vllm:num_requests_waiting":                  {G, base},
		"vllm:kv_cache_usage_perc":                   {G, base},
		"vllm:cache_config_info":                     {G, with("block_size", "cache_dtype", "num_gpu_blocks")},
		"vllm:lora_requests_info":                    {G, with("max_lora", "running_lora_adapters", "waiting_lora_adapters")},
		"vllm:prefix_cache_queries_total":            {C, base},
		"vllm:prefix_cache_hits_total":               {C, base},
		"vllm:num_preemptions_total":                 {C, base},
		"vllm:prompt_tokens_total":                   {C, base},
		"vllm:generation_tokens_total":               {C, base},
		"vllm:request_success_total":                 {C, with("finished_reason")},
		"vllm:time_to_first_token_seconds":           {H, base},
		"vllm:inter_token_latency_seconds":           {H, base},
		"vllm:e2e_request_latency_seconds":           {H, base},
		"vllm:iteration_tokens_total":                {H, base},
		"vllm:request_queue_time_seconds":            {H, base},
		"vllm:request_prefill_time_seconds":          {H, base},
		"vllm:request_decode_time_seconds":           {H, base},
		"vllm:request_inference_time_seconds":        {H, base},
		"vllm:request_prompt_tokens":                 {H, base},
		"vllm:request_generation_tokens":             {H, base},
		"vllm:request_time_per_output_token_seconds": {H, base},
		"vllm:request_params_max_tokens":             {H, base},
		"vllm:request_params_n":                      {H, base},
		"vllm:request_max_num_generation_tokens":     {H, base},
	}
	for name, w := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("/metrics lacks %s", name)
			continue
		}
		if f.GetType() != w.typ {
			t.Errorf("%s is a %v, want %v", name, f.GetType(), w.typ)
		}
		for _, m := range f.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName())
			}
			sort.Strings(got)
			if diff := cmp.Diff(w.labels, got); diff != "" {
				t.Errorf("%s labels (-want +got):\n%s", name, diff)
			}
			if lv := labelValue(m, "model_name"); lv != testModel {
				t.Errorf("%s model_name=%q, want %q", name, lv, testModel)
			}
		}
	}

	// Two requests of 3 generated tokens each.
	hist := func(name string) *dto.Histogram {
		f := fams[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("%s: want one series", name)
		}
		return f.GetMetric()[0].GetHistogram()
	}
	for name, sum := range map[string]float64{
		"vllm:request_params_n":                  2,
		"vllm:request_params_max_tokens":         6,
		"vllm:request_generation_tokens":         6,
		"vllm:request_max_num_generation_tokens": 6,
	} {
		if h := hist(name); h.GetSampleCount() != 2 || h.GetSampleSum() != sum {
			t.Errorf("%s: count %d sum %v, want 2 and %v", name, h.GetSampleCount(), h.GetSampleSum(), sum)
		}
	}
	for _, name := range []string{
		"vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
		"vllm:request_inference_time_seconds", "vllm:request_time_per_output_token_seconds", "vllm:request_prompt_tokens",
		"vllm:e2e_request_latency_seconds", "vllm:time_to_first_token_seconds",
	} {
		if n := hist(name).GetSampleCount(); n != 2 {
			t.Errorf("%s: %d observations, want 2", name, n)
		}
	}
	if n := hist("vllm:inter_token_latency_seconds").GetSampleCount(); n != 4 {
		t.Errorf("inter-token latency: %d observations, want 4", n)
	}

	// vLLM's ranges: an agent's request of minutes must not land in +Inf.
	top := func(name string) float64 { // the largest finite bucket
		var ub float64
		for _, b := range hist(name).GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				ub = max(ub, b.GetUpperBound())
			}
		}
		return ub
	}
	for name, want := range map[string]float64{
		"vllm:e2e_request_latency_seconds":           7680,
		"vllm:request_queue_time_seconds":            7680,
		"vllm:request_inference_time_seconds":        7680,
		"vllm:time_to_first_token_seconds":           2560,
		"vllm:inter_token_latency_seconds":           80,
		"vllm:request_time_per_output_token_seconds": 80,
		"vllm:request_params_n":                      20,
		// 1-2-5 buckets up to the test model's context of 512 tokens.
		"vllm:request_prompt_tokens":     500,
		"vllm:request_params_max_tokens": 500,
	} {
		if got := top(name); got != want {
			t.Errorf("%s: largest bucket %v, want %v", name, got, want)
		}
	}

	// The endpoint picker reads LoRA adapters from this series: none.
	lora := fams["vllm:lora_requests_info"].GetMetric()[0]
	for l, v := range map[string]string{"max_lora": "0", "running_lora_adapters": "", "waiting_lora_adapters": ""} {
		if got := labelValue(lora, l); got != v {
			t.Errorf("vllm:lora_requests_info %s=%q, want %q", l, got, v)
		}
	}
	if lora.GetGauge().GetValue() < 1.7e9 {
		t.Errorf("vllm:lora_requests_info value %v: want the Unix time of the last update", lora.GetGauge().GetValue())
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return "<absent>"
}
