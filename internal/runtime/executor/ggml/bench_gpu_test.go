//go:build linux && (amd64 || arm64)

package ggml

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/util/testing/runtimeproc"
)

// envLlamaServer names llama.cpp's llama-server binary (CUDA build) that
// BenchmarkGPUVsLlamaServer serves against; make bench-gpu builds it with
// hack/build-llama-server-cuda.sh.
const envLlamaServer = "KVPILOT_LLAMA_SERVER"

// gpuBenchConfig is Qwen2-0.5B's geometry with a 16k context, so that the
// 8k-token prefill fits.
func gpuBenchConfig() model.Config {
	c := qwen05Config
	c.ContextLen = 16384
	return c
}

// httpServer is one OpenAI-compatible completion server under load.
type httpServer struct {
	name, url string
}

// complete sends one greedy completion of maxTokens tokens after prompt
// (token ids) and returns the completion tokens the server reports.
func (s httpServer) complete(prompt []int32, maxTokens int) (int, error) {
	body, _ := json.Marshal(map[string]any{"model": "bench", "prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "ignore_eos": true})
	resp, err := http.Post(s.url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.name, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &r) != nil {
		return 0, fmt.Errorf("%s: status %d: %s", s.name, resp.StatusCode, raw)
	}
	return r.Usage.CompletionTokens, nil
}

// streams runs n concurrent greedy completions (promptLen-token prompts,
// gen tokens each) and returns output tokens per second over the run.
func (s httpServer) streams(b *testing.B, n, promptLen, gen, vocab int) float64 {
	var wg sync.WaitGroup
	var mu sync.Mutex
	total, errs := 0, []error(nil)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]int32, promptLen)
			for j := range p {
				p[j] = int32((i*1009 + j*31) % vocab)
			}
			k, err := s.complete(p, gen)
			mu.Lock()
			total += k
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		b.Fatal(errs[0])
	}
	return float64(total) / time.Since(start).Seconds()
}

// prefill times one request of a prompt of n tokens and one output token:
// prompt tokens per second, to the first token.
func (s httpServer) prefill(b *testing.B, n, vocab, salt int) float64 {
	p := make([]int32, n)
	for j := range p {
		p[j] = int32(((salt*7919+j*104729)%vocab + vocab) % vocab) // salt is -1 for the warm-up
	}
	start := time.Now()
	if _, err := s.complete(p, 1); err != nil {
		b.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// startLlamaServer runs llama-server on gguf with every layer on the GPU,
// 128 slots sharing one unified KV cache (so that one 8k prompt fits as
// well as 128 short ones), flash attention as llama.cpp decides.
func startLlamaServer(b *testing.B, bin, gguf string) httpServer {
	addr := runtimeproc.FreeAddr(b)
	host, port, _ := strings.Cut(addr, ":")
	var log bytes.Buffer
	args := []string{"-m", gguf, "--host", host, "--port", port, "-ngl", "999", "-np", "128", "-kvu", "-c", "262144", "--no-webui"}
	// KVPILOT_BENCH_LLAMA_ARGS adds llama-server flags (space-separated),
	// e.g. "--cache-ram 0" to try its prompt cache off.
	args = append(args, strings.Fields(os.Getenv("KVPILOT_BENCH_LLAMA_ARGS"))...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if r, err := http.Get("http://" + addr + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return httpServer{name: "llama-server", url: "http://" + addr}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatalf("llama-server not ready after 5 minutes:\n%s", log.String())
	return httpServer{}
}

// gpuBenchModels are the GGUFs BenchmarkGPUVsLlamaServer serves: the
// Qwen2-0.5B shape (gpuBenchConfig, Q8_0) with kvpilot's variants, and
// the qwen3moe and gpt-oss shapes of BenchmarkMoEVsLlamaCpp (gpt-oss's
// experts in MXFP4), each with a 16k context.
func gpuBenchModels() []gpuBenchModel {
	long := func(c model.Config) model.Config {
		c.ContextLen = 16384
		return c
	}
	return []gpuBenchModel{
		{vsModel: vsModel{label: "qwen2", file: "qwen2-0.5b-shape", cfg: gpuBenchConfig(), typ: model.Q8_0}, variants: true},
		{vsModel: vsModel{label: "qwen3moe", file: "qwen3moe-bench", cfg: long(qwen3moeBenchConfig), typ: model.Q8_0}},
		{vsModel: vsModel{label: "gpt-oss", file: "gpt-oss-bench", cfg: long(gptossBenchConfig), typ: model.Q8_0, mxfp4: true}},
	}
}

// gpuBenchModel is one of them; variants: kvpilot's variants run beside
// it as shipped (else kvpilot as shipped alone).
type gpuBenchModel struct {
	vsModel
	variants bool
}

// BenchmarkGPUVsLlamaServer serves each of gpuBenchModels (a sub-benchmark
// each, named by its label: -bench GPUVsLlamaServer/gpt-oss runs one) on
// one NVIDIA GPU with kvpilot's runtime (--executor ggml on the device
// KVPILOT_GGML_DEVICE names, cuda under make bench-gpu) and with
// llama.cpp's llama-server of the same release, both on the ggml
// libraries hack/build-llama-server-cuda.sh builds beside llama-server,
// over HTTP on loopback and driven by the same client: 1, 8, 32 and 128
// concurrent greedy completions (32 prompt tokens, 128 output tokens:
// output tokens per second) and single prefills of 512 and 8,192 tokens
// (prompt tokens per second to the first token). The servers alternate
// config by config, KVPILOT_BENCH_REPS rounds (default 2) after a
// warm-up; ratios are kvpilot's over llama-server's per round, min and
// median printed. `make bench-gpu`; it skips without KVPILOT_BENCH_GPU.
func BenchmarkGPUVsLlamaServer(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_GPU") == "" {
		b.Skip("needs an NVIDIA GPU: run `make bench-gpu`")
	}
	bin := os.Getenv(envLlamaServer)
	if bin == "" {
		b.Skipf("%s is not set: make bench-gpu builds llama-server with hack/build-llama-server-cuda.sh", envLlamaServer)
	}
	lib := testLibDir(b)
	reps := 2
	if v, err := strconv.Atoi(os.Getenv("KVPILOT_BENCH_REPS")); err == nil && v > 0 {
		reps = v
	}
	for _, v := range gpuBenchModels() {
		// A sub-benchmark each, so that its servers stop before the next
		// model's start (their cleanups run at its end).
		b.Run(v.label, func(b *testing.B) { gpuVsLlamaServer(b, bin, lib, reps, v) })
	}
}

// gpuVsLlamaServer is BenchmarkGPUVsLlamaServer on one model.
func gpuVsLlamaServer(b *testing.B, bin, lib string, reps int, v gpuBenchModel) {
	cfg := v.cfg
	gguf := v.gguf(b, b.TempDir())
	kvps := startKVPilots(b, lib, gguf, cfg.ContextLen, v.variants)
	ls := startLlamaServer(b, bin, gguf)

	type arm struct {
		name string
		run  func(s httpServer, round int) float64
	}
	vocab := cfg.VocabSize
	var arms []arm
	for _, n := range []int{1, 8, 32, 128} {
		arms = append(arms, arm{fmt.Sprintf("%d streams", n), func(s httpServer, _ int) float64 { return s.streams(b, n, 32, 128, vocab) }})
	}
	for _, n := range []int{512, 8192} {
		arms = append(arms, arm{fmt.Sprintf("prefill %d", n), func(s httpServer, round int) float64 { return s.prefill(b, n, vocab, round) }})
	}
	servers := append(slices.Clone(kvps), ls)
	// Warm every server: CUDA graphs, allocator growth.
	for _, a := range arms {
		for _, s := range servers {
			a.run(s, -1)
		}
	}
	ratios := map[string][]float64{} // by kvpilot server and arm
	for r := range reps {
		for _, a := range arms {
			got := make([]float64, len(servers))
			for i, s := range servers {
				got[i] = a.run(s, r)
			}
			l := got[len(servers)-1]
			line := fmt.Sprintf("round %d %s %s:", r+1, v.label, a.name)
			for i, k := range got[:len(kvps)] {
				ratios[kvps[i].name+"|"+a.name] = append(ratios[kvps[i].name+"|"+a.name], k/l)
				line += fmt.Sprintf(" %s %.1f (%.2f×),", kvps[i].name, k, k/l)
			}
			fmt.Printf("%s llama-server %.1f tok/s\n", line, l)
		}
	}
	for _, kv := range kvps {
		for _, stat := range []struct {
			name string
			f    func([]float64) float64
		}{{"median", median}, {"min", slices.Min[[]float64]}} {
			parts := make([]string, len(arms))
			for i, a := range arms {
				parts[i] = fmt.Sprintf("%s: %.2f×", a.name, stat.f(ratios[kv.name+"|"+a.name]))
			}
			fmt.Printf("%s/llama-server %s %s (%s, %s of %d rounds)\n", kv.name, v.label, strings.Join(parts, ", "), v.weights(), stat.name, reps)
		}
	}
}

// startKVPilots starts kvpilot's runtime serving gguf on the GPU: as
// shipped and, with variants, the runtime as it shipped before the
// H200's run of 2026-11-28 ("kvpilot, plain attention, host argmax":
// --ggml-flash-max-seqs 0 --ggml-device-argmax=false; KVPILOT_BENCH_BEFORE=0
// leaves it out), and on request (KVPILOT_BENCH_FLASH_SEQS=N) flash
// attention for batches of at most N sequences and
// (KVPILOT_BENCH_CUDA_GRAPHS=1) ggml's CUDA graphs on (--ggml-cuda-graphs,
// with which the runtime aborted under 128 streams).
func startKVPilots(b *testing.B, lib, gguf string, contextLen int, variants bool) []httpServer {
	startKV := func(name string, extra ...string) httpServer {
		addr := runtimeproc.FreeAddr(b)
		host, port, _ := strings.Cut(addr, ":")
		kv := runtimeproc.Start(b, runtimeproc.Options{Name: name, Args: append([]string{
			"--executor", "ggml", "--device", testDevice(), "--ggml-lib", lib, "--model", gguf, "--served-model-name", "bench", "--host", host, "--port", port,
			"--kv-cache-memory", "8Gi", "--max-num-seqs", "128", "--max-num-batched-tokens", "2048", "--max-model-len", strconv.Itoa(contextLen),
		}, extra...)})
		kv.WaitReady(b, addr, 5*time.Minute)
		return httpServer{name: name, url: "http://" + addr}
	}
	kvps := []httpServer{startKV("kvpilot")}
	if !variants {
		return kvps
	}
	if os.Getenv("KVPILOT_BENCH_BEFORE") != "0" {
		kvps = append(kvps, startKV("kvpilot, plain attention, host argmax", "--ggml-flash-max-seqs", "0", "--ggml-device-argmax=false"))
	}
	if v := os.Getenv("KVPILOT_BENCH_FLASH_SEQS"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("KVPILOT_BENCH_FLASH_SEQS=%q: want a count of sequences", v)
		}
		kvps = append(kvps, startKV("kvpilot, flash attention ≤ "+v+" seqs", "--ggml-flash-max-seqs", v))
	}
	if os.Getenv("KVPILOT_BENCH_CUDA_GRAPHS") == "1" {
		kvps = append(kvps, startKV("kvpilot, CUDA graphs", "--ggml-cuda-graphs"))
	}
	return kvps
}
