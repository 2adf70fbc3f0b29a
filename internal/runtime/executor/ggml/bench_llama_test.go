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

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/gptoss"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
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

// single is llama.cpp's prefill and decode rates on the benchmark prompt.
func (l *llamaCpp) single(b *testing.B, prompt []int32) (prefill, decode rate) {
	var r struct {
		PrefillMs     float64 `json:"prefill_ms"`
		PrefillCPUMs  float64 `json:"prefill_cpu_ms"`
		PrefillTokens int     `json:"prefill_tokens"`
		DecodeMs      float64 `json:"decode_ms"`
		DecodeCPUMs   float64 `json:"decode_cpu_ms"`
		DecodeSteps   int     `json:"decode_steps"`
	}
	l.ask(b, map[string]any{"op": "single", "prompt": prompt, "decode": benchDecode}, &r)
	return msRate(r.PrefillTokens, r.PrefillMs, r.PrefillCPUMs), msRate(r.DecodeSteps, r.DecodeMs, r.DecodeCPUMs)
}

// msRate is tokens over a span of wall and CPU milliseconds.
func msRate(tokens int, wall, cpu float64) rate {
	return rate{wall: float64(tokens) / wall * 1e3, cpu: float64(tokens) / cpu * 1e3}
}

// streams is llama.cpp's output tokens per second over the concurrent
// streams of prompts, streamsGen tokens each, driven in lockstep (a decode
// of every prompt, then a decode of a token of each sequence a step); it
// fails unless the driver's decodes were exactly those, so that a
// sequence drifting out of step cannot pass for llama.cpp's batching.
func (l *llamaCpp) streams(b testing.TB, prompts [][]int32, gen int) rate {
	var r struct {
		Ms      float64 `json:"ms"`
		CPUMs   float64 `json:"cpu_ms"`
		Tokens  int     `json:"tokens"`
		Batches []int   `json:"batches"`
	}
	l.ask(b, map[string]any{"op": "streams", "prompts": prompts, "gen": gen}, &r)
	if r.Tokens != len(prompts)*gen {
		b.Fatalf("llama.cpp generated %d tokens, want %d", r.Tokens, len(prompts)*gen)
	}
	if want := lockstepBatches(prompts, gen); !slices.Equal(r.Batches, want) {
		b.Fatalf("llama.cpp's decodes held %v tokens, want %v (the streams in lockstep)", r.Batches, want)
	}
	return msRate(r.Tokens, r.Ms, r.CPUMs)
}

// TestLlamaCppStreamsInLockstep: the benchmark's llama.cpp driver runs
// concurrent streams in lockstep (llamaCpp.streams checks its decodes),
// prompts of different lengths included, on a small gpt-oss and a small
// hybrid qwen35, twice in a row on the same sequences.
func TestLlamaCppStreamsInLockstep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llama.cpp in node: not in -short (race) runs")
	}
	dir := llamacpp.Node(t)
	for _, cfg := range []model.Config{gptossConfig(), qwen35Config()} {
		t.Run(cfg.Arch, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), cfg.Arch+".gguf")
			writeGGUF(t, model.Random(cfg, 1), model.Q8_0, path)
			lc := startLlamaCpp(t, "llama-cpp-bench.mjs", dir, path, 1, kvcache.DTypeF16)
			defer lc.close()
			prompts := make([][]int32, 12)
			for s := range prompts {
				prompts[s] = make([]int32, 4+s)
				for i := range prompts[s] {
					prompts[s][i] = int32((s*37 + i*11) % cfg.VocabSize)
				}
			}
			for range 2 {
				lc.streams(t, prompts, 6)
			}
		})
	}
}

// lockstepBatches is the tokens of each decode of prompts run in lockstep
// for gen tokens each: every prompt in the first (they fit in the
// driver's batch of 512), then one token of every sequence, gen-1 times.
func lockstepBatches(prompts [][]int32, gen int) []int {
	first := 0
	for _, p := range prompts {
		first += len(p)
	}
	out := []int{first}
	for range gen - 1 {
		out = append(out, len(prompts))
	}
	return out
}

// engineStreams runs prompts as concurrent greedy requests of streamsGen
// tokens through the engine over e (in process: llama.cpp's side has no
// HTTP server either) and returns output tokens per second.
func engineStreams(b *testing.B, e batch.Executor, m *model.Model, blocks int, prompts [][]int32) rate {
	// llama.cpp runs every stream at once: so must the engine, which runs
	// no more sequences than the executor has state slots.
	if sk, ok := e.(batch.StateKeeper); ok && sk.StateSlots() > 0 && sk.StateSlots() < len(prompts) {
		b.Fatalf("the executor keeps %d state slots, fewer than the %d streams", sk.StateSlots(), len(prompts))
	}
	eng, err := engine.New(engine.Config{
		MaxNumSeqs: len(prompts), MaxModelLen: m.Config.ContextLen, VocabSize: m.Config.VocabSize,
		KV:  kvcache.Config{NumBlocks: blocks, BlockSize: benchBlockSize},
		EOS: m.Config.EOS, Decoder: m.Tokenizer, Logger: slog.New(slog.DiscardHandler),
	}, e)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	total := 0
	var mu sync.Mutex
	mt := startMeter()
	// Every stream is queued before the engine starts, as llama.cpp's
	// driver queues every prompt in one tick: the first iteration then
	// prefills them all, as llama.cpp's first decode does, where streams
	// submitted to a running engine split between its first iterations
	// as they arrive.
	streams := make([]*engine.Stream, len(prompts))
	for i, p := range prompts {
		if streams[i], err = eng.Submit(ctx, &engine.Request{ID: strconv.Itoa(i), Prompt: p, Params: engine.Params{MaxTokens: streamsGen, IgnoreEOS: true}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = eng.Stop(ctx) }()
	for _, s := range streams {
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
	return mt.rate(total)
}

// BenchmarkVsLlamaCpp holds the ggml executor against llama.cpp itself
// (node-llama-cpp 3.22.1, the release bundle the ggml libraries come from)
// on a random Qwen2-0.5B-shaped model in Q8_0 and in F16: vsLlamaCpp's
// prefill, decode and 32 streams. Part of `make bench-executors`.
func BenchmarkVsLlamaCpp(b *testing.B) {
	for _, typ := range []model.DType{model.Q8_0, model.F16} {
		runVsLlamaCpp(b, vsModel{label: "qwen2", file: "qwen2-0.5b-shape", cfg: qwen05Config, typ: typ, streams: true})
	}
}

// qwen3moeBenchConfig is Qwen3-30B-A3B's layout (Qwen3-Coder-30B-A3B's)
// scaled down for a small CPU: heads of 128 wider than the embedding
// together (16 over 2 KV heads, its 8:1 grouping; hidden 1024), per-head
// q/k norms, 8 layers of 64 experts of 256, 8 a token (its 128 of 768,
// 8 a token), an untied head and a 32,768-token vocabulary instead of its
// 151,936.
var qwen3moeBenchConfig = model.Config{
	Arch: model.ArchQwen3MoE, VocabSize: 32768, Dim: 1024, Layers: 8, Heads: 16, KVHeads: 2, HeadDim: 128, FFN: 256,
	ContextLen: 4096, RopeTheta: 1e6, NormEps: 1e-6, Experts: 64, ExpertsUsed: 8, ExpertFFN: 256,
}

// gptossBenchConfig is gpt-oss-20b's layout scaled down for a small CPU:
// heads of 64 (16 over 2 KV heads, its 8:1 grouping; hidden 1024) with
// q/k/v/o biases and sinks, 8 layers alternating a sliding window of 128
// tokens (its own, shorter than the 512-token prompt) with full
// attention, 32 experts of 512, 4 a token (its 32 of 2880, 4 a token),
// biased router and experts, YaRN 32× over 4,096 tokens, an untied head
// and a 32,768-token vocabulary instead of its 201,088.
var gptossBenchConfig = model.Config{
	Arch: model.ArchGptOss, VocabSize: 32768, Dim: 1024, Layers: 8, Heads: 16, KVHeads: 2, HeadDim: 64, FFN: 512, ContextLen: 4096,
	QKVBias: true, RopeTheta: 150000, NormEps: 1e-5, SlidingWindow: 128, LayerKinds: gptoss.LayerKinds(8, 2),
	Experts: 32, ExpertsUsed: 4, ExpertFFN: 512, ExpertGating: arch.GatingSoftmaxWeight,
	RopeScaling: arch.RopeScaling{Type: "yarn", Factor: 32, OrigContext: 4096},
}

// BenchmarkMoEVsLlamaCpp is BenchmarkVsLlamaCpp for the mixtures of
// experts agents run: a qwen3moe (Q8_0) and a gpt-oss (Q8_0, its experts
// in MXFP4 as released), scaled down (qwen3moeBenchConfig,
// gptossBenchConfig). Part of `make bench-executors`.
func BenchmarkMoEVsLlamaCpp(b *testing.B) {
	runVsLlamaCpp(b, vsModel{label: "qwen3moe", file: "qwen3moe-bench", cfg: qwen3moeBenchConfig, typ: model.Q8_0, streams: true})
	runVsLlamaCpp(b, vsModel{label: "gpt-oss", file: "gpt-oss-bench", cfg: gptossBenchConfig, typ: model.Q8_0, mxfp4: true, streams: true})
}

// vsModel is a random model the benchmarks against llama.cpp write to a
// GGUF and run on both.
type vsModel struct {
	label, file string // the summary lines' name, the GGUF's
	cfg         model.Config
	typ         model.DType // the matrices'
	mxfp4       bool        // the expert stacks in MXFP4 (gpt-oss as released)
	streams     bool        // the 32-stream arm too
}

func (v vsModel) weights() string {
	if v.mxfp4 {
		return v.typ.String() + ", MXFP4 experts"
	}
	return v.typ.String()
}

// gguf writes v's model to a file in dir.
func (v vsModel) gguf(b *testing.B, dir string) string {
	m, err := model.Random(v.cfg, 1).Convert(v.typ)
	if err != nil {
		b.Fatal(err)
	}
	if v.mxfp4 {
		if m, err = m.WithMXFP4Experts(); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(dir, v.file+"-"+strings.ToLower(strings.ReplaceAll(v.weights(), ", ", "-"))+".gguf")
	writeModel(b, m, path)
	return path
}

// runVsLlamaCpp runs vsLlamaCpp on v as a sub-benchmark named by its label
// and weights ("qwen3moe-Q8_0", "gpt-oss-Q8_0-MXFP4"), so that -bench can
// pick one.
func runVsLlamaCpp(b *testing.B, v vsModel) {
	name := v.label + "-" + v.typ.String()
	if v.mxfp4 {
		name += "-MXFP4"
	}
	b.Run(name, func(b *testing.B) { vsLlamaCpp(b, v) })
}

// vsLlamaCpp runs v on the ggml executor and on llama.cpp, the same GGUF,
// the same threads (KVPILOT_BENCH_GGML_THREADS, else GOMAXPROCS) and the
// same KV cache type (the executor's auto: F16), both with flash
// attention: a 512-token prefill in one batch, decode steps of one
// sequence, and (v.streams) 32 concurrent streams of 16-token prompts and
// 32 greedy tokens each, the engine in process against llama.cpp driven in
// lockstep (llamaCpp.streams). The two alternate arm by arm,
// KVPILOT_BENCH_REPS rounds (default 3) after a warm-up round; each ratio
// is ggml's over llama.cpp's of the same round, by wall time and by each
// process's CPU time (rate: steadier than wall time on a loaded machine),
// and a line of each prints the medians and the minimums, the first with
// the load average before and after.
func vsLlamaCpp(b *testing.B, v vsModel) {
	dir, lib, threads, reps := llamaCppBench(b)
	vocab := v.cfg.VocabSize
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
	gguf := v.gguf(b, b.TempDir())
	m, err := model.Open(gguf, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const blocks = 256
	// As the runtime runs it by default: sliding layers in the window
	// cache (--swa-cache window, as llama.cpp keeps them), and the state
	// slots (a hybrid model's, the window cache's) it gives --max-num-seqs
	// 32, so that the engine runs the 32 streams at once, as llama.cpp does.
	ge, err := New(m, blocks, benchBlockSize, Options{LibDir: lib, Device: testDevice(), Threads: threads, StateSlots: StateSlotsFor(streamsN), WindowCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer ge.Close()
	lc := startLlamaCpp(b, "llama-cpp-bench.mjs", dir, gguf, threads, ge.KV().DType)
	defer lc.close()
	fmt.Printf("%s %s (%.0fM parameters): ggml executor on %s, weights %s, KV %s; llama.cpp (node-llama-cpp 3.22.1) %d threads, KV %s, flash attention\n",
		v.label, v.weights(), float64(m.Config.NumParams())/1e6, ge.Device(), ge.Weights(), ge.KV().DType, threads, ge.KV().DType)
	// Warm both: page the file in, grow the buffers.
	singleStream(b, ge, vocab)
	lc.single(b, prompt)
	load := loadAvg()
	// The per-round ratios, ggml's over llama.cpp's, of each arm by wall
	// time and by CPU time.
	arms := []string{"prefill", "decode"}
	if v.streams {
		arms = append(arms, fmt.Sprintf("%d streams", streamsN))
	}
	wall, cpu := make([][]float64, len(arms)), make([][]float64, len(arms))
	for r := range reps {
		gp, gd := singleStream(b, ge, vocab)
		lp, ld := lc.single(b, prompt)
		got := [][2]rate{{gp, lp}, {gd, ld}}
		if v.streams {
			gs := engineStreams(b, ge, m, blocks, prompts)
			ls := lc.streams(b, prompts, streamsGen)
			got = append(got, [2]rate{gs, ls})
		}
		line := fmt.Sprintf("%s %s round %d:", v.label, v.weights(), r+1)
		for i, g := range got {
			wall[i], cpu[i] = append(wall[i], g[0].wall/g[1].wall), append(cpu[i], g[0].cpu/g[1].cpu)
			line += fmt.Sprintf(" %s ggml %.2f, llama.cpp %.2f tok/s (CPU time %.2f, %.2f);", arms[i], g[0].wall, g[1].wall, g[0].cpu, g[1].cpu)
		}
		fmt.Println(strings.TrimSuffix(line, ";"))
	}
	ratios := func(rs [][]float64, f func([]float64) float64) string {
		parts := make([]string, len(arms))
		for i, a := range arms {
			parts[i] = fmt.Sprintf("%s: %.2f×", a, f(rs[i]))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Printf("ggml/llama.cpp %s %s (%s, %d threads, median of %d rounds; min %s; load %s → %s)\n",
		v.label, ratios(wall, median), v.weights(), threads, reps, ratios(wall, slices.Min), load, loadAvg())
	fmt.Printf("ggml/llama.cpp %s by CPU time %s (%s, %d threads, median of %d rounds; min %s)\n",
		v.label, ratios(cpu, median), v.weights(), threads, reps, ratios(cpu, slices.Min))
}

// loadAvg is the machine's 1-minute load average.
func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); len(f) > 0 {
		return f[0]
	}
	return "?"
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
	writeModel(b, m, path)
}

func writeModel(b testing.TB, m *model.Model, path string) {
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
