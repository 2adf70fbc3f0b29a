//go:build linux && (amd64 || arm64)

package ggml

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// EnvLlamaCpp names the directory hack/setup-llama-cpp.sh prints (node-llama-cpp
// installed there); BenchmarkVsLlamaCpp skips without it.
const envLlamaCpp = "KVPILOT_LLAMA_CPP_DIR"

// Shape of the 32-stream arm: each stream a 16-token prompt and 32 greedy
// output tokens, all submitted at once.
const (
	streamsN      = 32
	streamsPrompt = 16
	streamsGen    = 32
)

// llamaCpp is a driver in hack/ (llama-cpp-bench.mjs, llama-cpp-greedy.mjs)
// running in node: llama.cpp (the same release bundle as the ggml
// libraries) with one GGUF loaded, answering one request at a time.
type llamaCpp struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startLlamaCpp starts hack/<driver> on gguf with llama.cpp installed in dir.
func startLlamaCpp(b testing.TB, driver, dir, gguf string, threads int, kv kvcache.DType) *llamaCpp {
	b.Helper()
	script, err := filepath.Abs("../../../../hack/" + driver)
	if err != nil {
		b.Fatal(err)
	}
	kvName := map[kvcache.DType]string{kvcache.DTypeF32: "F32", kvcache.DTypeF16: "F16", kvcache.DTypeBF16: "BF16", kvcache.DTypeQ8_0: "Q8_0"}[kv]
	cmd := exec.Command("node", script, dir, gguf, strconv.Itoa(threads), kvName)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	l := &llamaCpp{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	// The greedy driver's answers hold every step's logits.
	l.out.Buffer(make([]byte, 1<<20), 16<<20)
	var ready struct{ Ready bool }
	l.read(b, &ready)
	if !ready.Ready {
		b.Fatal("llama.cpp did not start")
	}
	return l
}

func (l *llamaCpp) read(b testing.TB, v any) {
	b.Helper()
	if !l.out.Scan() {
		b.Fatalf("llama.cpp exited: %v", l.out.Err())
	}
	var e struct{ Error string }
	if json.Unmarshal(l.out.Bytes(), &e) == nil && e.Error != "" {
		b.Fatalf("llama.cpp: %s", e.Error)
	}
	if err := json.Unmarshal(l.out.Bytes(), v); err != nil {
		b.Fatalf("llama.cpp answered %q: %v", l.out.Text(), err)
	}
}

func (l *llamaCpp) ask(b testing.TB, req, resp any) {
	b.Helper()
	line, _ := json.Marshal(req)
	if _, err := l.in.Write(append(line, '\n')); err != nil {
		b.Fatal(err)
	}
	l.read(b, resp)
}

func (l *llamaCpp) close() {
	_ = l.in.Close()
	_ = l.cmd.Wait()
}

// single is llama.cpp's prefill and decode rates (tokens per second) on
// the benchmark prompt.
func (l *llamaCpp) single(b *testing.B, prompt []int32) (prefill, decode float64) {
	var r struct {
		PrefillMs     float64 `json:"prefill_ms"`
		PrefillTokens int     `json:"prefill_tokens"`
		DecodeMs      float64 `json:"decode_ms"`
		DecodeSteps   int     `json:"decode_steps"`
	}
	l.ask(b, map[string]any{"op": "single", "prompt": prompt, "decode": benchDecode}, &r)
	return float64(r.PrefillTokens) / r.PrefillMs * 1e3, float64(r.DecodeSteps) / r.DecodeMs * 1e3
}

// streams is llama.cpp's output tokens per second over the 32 streams.
func (l *llamaCpp) streams(b *testing.B, prompts [][]int32) float64 {
	var r struct {
		Ms     float64 `json:"ms"`
		Tokens int     `json:"tokens"`
	}
	l.ask(b, map[string]any{"op": "streams", "prompts": prompts, "gen": streamsGen}, &r)
	if r.Tokens != len(prompts)*streamsGen {
		b.Fatalf("llama.cpp generated %d tokens, want %d", r.Tokens, len(prompts)*streamsGen)
	}
	return float64(r.Tokens) / r.Ms * 1e3
}

// engineStreams runs prompts as concurrent greedy requests of streamsGen
// tokens through the engine over e (in process: llama.cpp's side has no
// HTTP server either) and returns output tokens per second.
func engineStreams(b *testing.B, e batch.Executor, m *model.Model, blocks int, prompts [][]int32) float64 {
	eng, err := engine.New(engine.Config{
		MaxNumSeqs: len(prompts), MaxModelLen: m.Config.ContextLen, VocabSize: m.Config.VocabSize,
		KV:  kvcache.Config{NumBlocks: blocks, BlockSize: benchBlockSize},
		EOS: m.Config.EOS, Decoder: m.Tokenizer, Logger: slog.New(slog.DiscardHandler),
	}, e)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = eng.Stop(ctx) }()
	var wg sync.WaitGroup
	total := 0
	var mu sync.Mutex
	start := time.Now()
	for i, p := range prompts {
		s, err := eng.Submit(ctx, &engine.Request{ID: strconv.Itoa(i), Prompt: p, Params: engine.Params{MaxTokens: streamsGen, IgnoreEOS: true}})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks, _, _, err := s.Wait(ctx)
			if err != nil {
				b.Error(err)
			}
			mu.Lock()
			total += len(toks)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != len(prompts)*streamsGen {
		b.Fatalf("the engine generated %d tokens, want %d", total, len(prompts)*streamsGen)
	}
	return float64(total) / time.Since(start).Seconds()
}

// BenchmarkVsLlamaCpp holds the ggml executor against llama.cpp itself
// (node-llama-cpp 3.22.1, the release bundle the ggml libraries come from)
// on the same GGUF file (a random Qwen2-0.5B-shaped model written by the
// model package, in Q8_0 and in F16), the same threads
// (KVPILOT_BENCH_GGML_THREADS, else GOMAXPROCS) and the same KV cache type
// (the executor's auto: F16), both with flash attention: a 512-token
// prefill in one batch, decode steps of one sequence, and 32 concurrent
// streams (16-token prompts, 32 greedy tokens each; the engine in process
// against node-llama-cpp's batching of sequences). The two alternate arm
// by arm, KVPILOT_BENCH_REPS rounds (default 3) after a warm-up round, and
// each ratio is ggml's over llama.cpp's of the same round; the min and
// median over rounds are printed. Part of `make bench-executors`.
func BenchmarkVsLlamaCpp(b *testing.B) {
	dir, lib, threads, reps := llamaCppBench(b)
	base := model.Random(qwen05Config, 1)
	vocab := qwen05Config.VocabSize
	prompt := make([]int32, benchPrompt)
	for i := range prompt {
		prompt[i] = int32((i * 7919) % vocab)
	}
	prompts := make([][]int32, streamsN)
	for s := range prompts {
		prompts[s] = make([]int32, streamsPrompt)
		for i := range prompts[s] {
			prompts[s][i] = int32((s*1009 + i*31) % vocab)
		}
	}
	for _, typ := range []model.DType{model.Q8_0, model.F16} {
		gguf := filepath.Join(b.TempDir(), "qwen2-0.5b-shape-"+strings.ToLower(typ.String())+".gguf")
		writeGGUF(b, base, typ, gguf)
		m, err := model.Open(gguf, nil)
		if err != nil {
			b.Fatal(err)
		}
		const blocks = 256
		ge, err := New(m, blocks, benchBlockSize, Options{LibDir: lib, Device: testDevice(), Threads: threads})
		if err != nil {
			b.Fatal(err)
		}
		lc := startLlamaCpp(b, "llama-cpp-bench.mjs", dir, gguf, threads, ge.KV().DType)
		fmt.Printf("%s: ggml executor on %s, weights %s, KV %s; llama.cpp (node-llama-cpp 3.22.1) %d threads, KV %s, flash attention\n",
			typ, ge.Device(), ge.Weights(), ge.KV().DType, threads, ge.KV().DType)
		// Warm both: page the file in, grow the buffers.
		singleStream(b, ge, vocab)
		lc.single(b, prompt)
		var pre, dec, str []float64
		for r := range reps {
			gp, gd := singleStream(b, ge, vocab)
			lp, ld := lc.single(b, prompt)
			gs := engineStreams(b, ge, m, blocks, prompts)
			ls := lc.streams(b, prompts)
			pre, dec, str = append(pre, gp/lp), append(dec, gd/ld), append(str, gs/ls)
			fmt.Printf("%s round %d: prefill ggml %.1f, llama.cpp %.1f tok/s; decode ggml %.2f, llama.cpp %.2f tok/s; %d streams ggml %.2f, llama.cpp %.2f tok/s\n",
				typ, r+1, gp, lp, gd, ld, streamsN, gs, ls)
		}
		fmt.Printf("ggml/llama.cpp prefill: %.2f×, decode: %.2f×, %d streams: %.2f× (%s, median of %d rounds)\n", median(pre), median(dec), streamsN, median(str), typ, reps)
		fmt.Printf("ggml/llama.cpp prefill: %.2f×, decode: %.2f×, %d streams: %.2f× (%s, min of %d rounds)\n", slices.Min(pre), slices.Min(dec), streamsN, slices.Min(str), typ, reps)
		lc.close()
		ge.Close()
		_ = m.Close()
	}
}

// llamaCppBench is what a benchmark against llama.cpp needs, or skips
// without: `make bench-executors`' switch, llama.cpp's install and node,
// the ggml libraries, the threads and the rounds (KVPILOT_BENCH_REPS, 3
// by default).
func llamaCppBench(b *testing.B) (dir, lib string, threads, reps int) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("minutes long and a few GiB: run `make bench-executors`")
	}
	dir = os.Getenv(envLlamaCpp)
	if dir == "" {
		b.Skipf("llama.cpp not installed: run hack/setup-llama-cpp.sh and set %s (make bench-executors does both)", envLlamaCpp)
	}
	if _, err := exec.LookPath("node"); err != nil {
		b.Skip("node is not installed: llama.cpp runs in node-llama-cpp")
	}
	threads, reps = benchGGMLThreads(), 3
	if v, err := strconv.Atoi(os.Getenv("KVPILOT_BENCH_REPS")); err == nil && v > 0 {
		reps = v
	}
	return dir, testLibDir(b), threads, reps
}

func writeGGUF(b testing.TB, base *model.Model, typ model.DType, path string) {
	m, err := base.Convert(typ)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := model.WriteGGUF(f, m); err != nil {
		b.Fatal(err)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
