package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/util/testing/runtimeproc"
)

// costlyPattern is a distinct pattern (by i) of about 126 bytes that the
// grammar compiler refuses on its own as too complex: six Unicode classes
// of hundreds of byte ranges each, repeated up to 99 times. Before the
// pod-wide budget, 16 at once on the built-in model peaked at 4.3 GiB of
// resident memory (docs/benchmarks.md, "Concurrent costly compiles").
func costlyPattern(i int) string {
	return strings.Repeat(fmt.Sprintf(`(\p{L}|\p{N}){0,%d}`, 99-i%5), 6) + strings.Repeat("[a-z]", i/5)
}

// memoryLimitSlack is what the real-process budget tests give the pod's
// memory limit (LimitMemory) beyond its preprocessing budget: its
// collector's lag and its connections' buffers, as the peak's slack.
const memoryLimitSlack = 128 << 20

// TestConcurrentCostlyCompilesStayInBudget sends distinct costly patterns
// at once to a pod serving the built-in model with a 256 MiB
// --preprocess-memory: each is refused, 400 (too complex) or 503 with
// Retry-After (the budget is spent), none with 500 or a hang; the pod's
// peak resident memory grows by no more than the budget plus 64 MiB (the
// collector's lag behind released charges, connections' buffers), and
// /health answers throughout.
func TestConcurrentCostlyCompilesStayInBudget(t *testing.T) {
	const (
		n      = 24
		budget = 256 << 20
		slack  = 64 << 20
	)
	p := runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options: runtimeproc.Options{Name: "pod", Env: cleanEnv(),
			Args: []string{"--executor", "cpu", "--kv-cache-memory", "64Mi", "--preprocess-memory", "256Mi"}},
		ControlToken: testControlToken,
		ReadyTimeout: startTimeout,
	})
	base := p.PeakRSS(t)
	p.LimitMemory(t, budget+memoryLimitSlack)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := json.Marshal(map[string]any{"prompt": "hi", "max_tokens": 4,
				"structured_outputs": map[string]any{"regex": costlyPattern(i)}})
			if err != nil {
				panic(err)
			}
			results[i] = post(ctx, p.API, "", string(body))
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// /health throughout, each within 2 s.
	client := &http.Client{Timeout: 2 * time.Second}
	var probes atomic.Int64
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(100 * time.Millisecond):
		}
		probes.Add(1)
		resp, err := client.Get("http://" + p.API + "/health")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("/health during the compiles: %v %v", err, resp)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}

	counts := map[int]int{}
	for i, r := range results {
		counts[r.status]++
		switch {
		case r.err != nil:
			t.Errorf("pattern %d: %v", i, r.err)
		case r.status == http.StatusBadRequest:
			if !strings.Contains(r.body, "too") {
				t.Errorf("pattern %d: 400 %s, want a refusal as too large or complex", i, r.body)
			}
		case r.status == http.StatusServiceUnavailable:
			if r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "preprocessing_memory_busy") {
				t.Errorf("pattern %d: 503 without Retry-After or code preprocessing_memory_busy: %q %s", i, r.header.Get("Retry-After"), r.body)
			}
		default:
			t.Errorf("pattern %d: status %d %s, want 400 or 503", i, r.status, tail(r.body))
		}
	}
	peak := p.PeakRSS(t)
	t.Logf("%d patterns: %v; peak RSS %d MiB over a baseline of %d MiB (budget %d MiB); %d /health probes",
		n, counts, (peak-base)>>20, base>>20, budget>>20, probes.Load())
	if peak-base > budget+slack {
		t.Errorf("peak RSS grew by %d MiB, more than the budget %d MiB + %d MiB", (peak-base)>>20, budget>>20, slack>>20)
	}
	if counts[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no request met the budget: %v (the test no longer loads it)", counts)
	}
}

// TestConcurrentLargeBodiesStayInBudget sends 32 bodies of 4 MiB at once
// (a prompt the built-in model's context refuses once tokenized) to a pod
// with the default 512 MiB --preprocess-memory: each is answered, 400 or
// 503 with Retry-After, and the peak resident memory grows by no more
// than the budget plus 128 MiB (the collector lags behind the released
// charges, more so under load; it grew by 522 MiB on a loaded 2-core
// machine when each body cost about 16 times its size, 433 MiB since the
// tokenizer's merges take memory linear in a word). Without the budget they peaked at 1.6 GiB (docs/benchmarks.md,
// "Request body amplification").
func TestConcurrentLargeBodiesStayInBudget(t *testing.T) {
	const (
		n      = 32
		size   = 4 << 20
		budget = 512 << 20
		slack  = 128 << 20
	)
	p := runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options: runtimeproc.Options{Name: "pod", Env: cleanEnv(),
			Args: []string{"--executor", "cpu", "--kv-cache-memory", "64Mi", "--max-body-bytes", "8Mi"}},
		ControlToken: testControlToken,
		ReadyTimeout: startTimeout,
	})
	base := p.PeakRSS(t)
	prompt := strings.Repeat("hello world ", size/12)
	body := `{"max_tokens":1,"prompt":"` + prompt + `"}`

	refusedWithinBudget(t, p, base, fmt.Sprintf("bodies of %d MiB", size>>20), n, budget, slack, func(ctx context.Context, _ int) result {
		return post(ctx, p.API, "", body)
	})
}

// repeatingModel writes the built-in model with a chat template that
// renders each message a thousand times, as a GGUF file in dir.
func repeatingModel(t *testing.T, dir string) string {
	t.Helper()
	m, err := model.Open("builtin:tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.ChatTemplate, err = model.NewJinjaTemplate(`{% for m in messages %}<|{{ m.role }}|>{% for i in range(1000) %}{{ m.content }}{% endfor %}{% endfor %}<|assistant|>`, "", ""); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "repeating.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := model.WriteGGUF(f, m); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConcurrentLargeRenderingsStayInBudget sends 16 chat requests at
// once whose 10 KB bodies the model's template renders into 10 MB of
// prompt each, to a pod with a 256 MiB --preprocess-memory: each is
// answered, 400 (the prompt is over the context, once rendered and
// tokenized) or 503 with Retry-After, and the peak resident memory grows
// by no more than the budget plus 64 MiB. Charged through the body alone
// they peaked 1,352 MiB over the baseline (docs/benchmarks.md, "Request
// preprocessing memory").
func TestConcurrentLargeRenderingsStayInBudget(t *testing.T) {
	const (
		n      = 16
		budget = 256 << 20
		slack  = 64 << 20
	)
	p := runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options: runtimeproc.Options{Name: "pod", Env: cleanEnv(),
			Args: []string{"--executor", "cpu", "--model", repeatingModel(t, t.TempDir()), "--kv-cache-memory", "64Mi", "--preprocess-memory", "256Mi"}},
		ControlToken: testControlToken,
		ReadyTimeout: startTimeout,
	})
	base := p.PeakRSS(t)

	counts := refusedWithinBudget(t, p, base, "renderings of 10 MB", n, budget, slack, func(ctx context.Context, i int) result {
		body := fmt.Sprintf(`{"max_tokens":1,"messages":[{"role":"user","content":"%d %s"}]}`, i, strings.Repeat("x", 10_000))
		return postTo(ctx, p.API, "/v1/chat/completions", "", body)
	})
	if counts[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no request met the budget: %v (the test no longer loads it)", counts)
	}
}

// refusedWithinBudget sends n requests at once (send(ctx, i) each) to p,
// whose peak resident memory was base before them, under a memory limit
// of the budget and memoryLimitSlack: each must be answered 400
// context_length_exceeded or 503 with Retry-After and code
// preprocessing_memory_busy, and the peak must grow by no more than the
// budget plus slack. what names the requests in the log. It returns how
// many got each status.
func refusedWithinBudget(t *testing.T, p *runtimeproc.Pod, base int64, what string, n int, budget, slack int64, send func(ctx context.Context, i int) result) map[int]int {
	t.Helper()
	p.LimitMemory(t, budget+memoryLimitSlack)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = send(ctx, i) }()
	}
	wg.Wait()
	counts := map[int]int{}
	for i, r := range results {
		counts[r.status]++
		switch {
		case r.err != nil:
			t.Errorf("request %d: %v", i, r.err)
		case r.status == http.StatusBadRequest && strings.Contains(r.body, "context_length_exceeded"):
		case r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") != "" && strings.Contains(r.body, "preprocessing_memory_busy"):
		default:
			t.Errorf("request %d: %d %s, want 400 context_length_exceeded or 503 with Retry-After", i, r.status, tail(r.body))
		}
	}
	peak := p.PeakRSS(t)
	t.Logf("%d %s: %v; peak RSS %d MiB over a baseline of %d MiB (budget %d MiB)",
		n, what, counts, (peak-base)>>20, base>>20, budget>>20)
	if peak-base > budget+slack {
		t.Errorf("peak RSS grew by %d MiB, more than the budget %d MiB + %d MiB", (peak-base)>>20, budget>>20, slack>>20)
	}
	return counts
}
