//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/codec"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/cpu"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/server"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// qwen05Config is Qwen2-0.5B's geometry (hidden 896, 24 layers, 14 heads,
// 2 KV heads, FFN 4864, its 151,936-token vocabulary, tied head), with
// random weights and the byte tokenizer.
var qwen05Config = model.Config{
	Arch: model.ArchQwen2, VocabSize: 151936, Dim: 896, Layers: 24, Heads: 14, KVHeads: 2, FFN: 4864,
	ContextLen: 4096, RopeTheta: 1e6, NormEps: 1e-6, QKVBias: true, TiedEmbeddings: true,
}

// benchDecode is how many decode steps a single stream's decode rate is
// timed over (llama.cpp's too): 64, not 16, because on the development
// VM the first step after a 512-token prefill runs 8× slower than the
// rest on both sides (its first pass over the mapped weights), which over
// 16 steps made the figure mostly that one step (docs/benchmarks.md).
const (
	benchBlockSize = 16
	benchPrompt    = 512
	benchDecode    = 64
	benchRounds    = 2
)

// singleStream times a 512-token prefill in one step, then benchDecode
// decode steps, on a fresh set of blocks; it returns tokens per second of
// each phase.
func singleStream(b *testing.B, e batch.Executor, vocab int) (prefill, decode rate) {
	blocks := contiguous(0, (benchPrompt+benchDecode)/benchBlockSize+1)
	prompt := make([]int32, benchPrompt)
	for i := range prompt {
		prompt[i] = int32((i * 7919) % vocab)
	}
	run := func(seq batch.Seq) int32 {
		bt := &batch.Batch{Seqs: []batch.Seq{seq}, NumTokens: len(seq.Tokens), BlockSize: benchBlockSize}
		out := &batch.Output{Logits: make([][]float32, 1)}
		if err := e.Execute(context.Background(), bt, out); err != nil {
			b.Fatal(err)
		}
		return argmax(out.Logits[0])
	}
	m := startMeter()
	tok := run(batch.Seq{Tokens: prompt, Blocks: blocks, Sample: true})
	prefill = m.rate(benchPrompt)
	m = startMeter()
	for i := range benchDecode {
		tok = run(batch.Seq{Tokens: []int32{tok}, Pos: benchPrompt + i, Blocks: blocks, Sample: true})
	}
	decode = m.rate(benchDecode)
	return prefill, decode
}

// rate is tokens per second of wall time and of this process's CPU time
// (every thread's, user and system). On a machine whose cores other work
// oversubscribes, wall time swings with what else runs; with one compute
// thread the CPU time a token takes does much less.
type rate struct{ wall, cpu float64 }

// meter is where a timed span began.
type meter struct {
	wall time.Time
	cpu  time.Duration
}

func startMeter() meter { return meter{wall: time.Now(), cpu: processCPU()} }

// rate is tokens over the span since m began.
func (m meter) rate(tokens int) rate {
	return rate{wall: float64(tokens) / time.Since(m.wall).Seconds(), cpu: float64(tokens) / (processCPU() - m.cpu).Seconds()}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// aggregateDecode serves e through the real HTTP server and engine and runs
// streams concurrent greedy completions of 16 prompt tokens and 32 output
// tokens; it returns output tokens per second over the run.
func aggregateDecode(b *testing.B, e batch.Executor, m *model.Model, streams int) float64 {
	const promptLen, outLen = 16, 32
	eng, err := engine.New(engine.Config{
		MaxNumSeqs: 32, MaxModelLen: m.Config.ContextLen, VocabSize: m.Config.VocabSize,
		KV:  kvcache.Config{NumBlocks: 256, BlockSize: benchBlockSize, EnablePrefixCache: true},
		EOS: m.Config.EOS, Decoder: m.Tokenizer, Logger: slog.New(slog.DiscardHandler),
	}, e)
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = eng.Stop(context.Background()) }()
	srv, err := server.New(server.Config{Engine: eng, Codec: codec.Model{Tokenizer: m.Tokenizer, Template: m.ChatTemplate}, ModelName: "bench", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	srv.SetReady(true)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	return httpServer{name: "kvpilot", url: hs.URL}.streams(b, streams, promptLen, outLen, m.Config.VocabSize)
}

// benchGGMLThreads is ggml's CPU thread count in the benchmarks:
// KVPILOT_BENCH_GGML_THREADS, else GOMAXPROCS (the cpu executor always has
// GOMAXPROCS). ggml's CPU threads wait for each other at every graph node by
// spinning; on a machine whose cores are oversubscribed by other work a
// descheduled thread stalls the other, so there fewer threads can be faster.
func benchGGMLThreads() int {
	if v, err := strconv.Atoi(os.Getenv("KVPILOT_BENCH_GGML_THREADS")); err == nil && v > 0 {
		return v
	}
	return runtime.GOMAXPROCS(0)
}

// BenchmarkExecutors compares the ggml executor (CPU backend) with the cpu
// executor on a random Qwen2-0.5B-shaped model in Q8_0 and F16: single
// stream 512-token prefill and decode, the two executors interleaved round
// by round in one run, then ggml's aggregate decode at 1, 8 and 32
// concurrent streams through the HTTP server. Run it with
// `make bench-executors` (-benchtime=1x: one pass is the measurement).
func BenchmarkExecutors(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("minutes long and a few GiB: run `make bench-executors`")
	}
	dir := testLibDir(b)
	threads, ggmlThreads := runtime.GOMAXPROCS(0), benchGGMLThreads()
	base := model.Random(qwen05Config, 1)
	for _, typ := range []model.DType{model.Q8_0, model.F16} {
		m, err := base.Convert(typ)
		if err != nil {
			b.Fatal(err)
		}
		blocks := 256
		ce, err := cpu.New(m, blocks, benchBlockSize, cpu.Options{Threads: threads})
		if err != nil {
			b.Fatal(err)
		}
		ge, err := New(m, blocks, benchBlockSize, Options{LibDir: dir, Device: testDevice(), Threads: ggmlThreads})
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("%s: %.0fM parameters; cpu executor %d threads, ggml %d threads on %s\n", typ, float64(m.Config.NumParams())/1e6, threads, ggmlThreads, ge.Device())
		// Warm both (page in weights, grow ggml's compute buffer).
		singleStream(b, ce, m.Config.VocabSize)
		singleStream(b, ge, m.Config.VocabSize)
		var cp, cd, gp, gd []float64
		for range benchRounds {
			p, d := singleStream(b, ce, m.Config.VocabSize)
			cp, cd = append(cp, p.wall), append(cd, d.wall)
			p, d = singleStream(b, ge, m.Config.VocabSize)
			gp, gd = append(gp, p.wall), append(gd, d.wall)
		}
		fmt.Printf("%s single stream (best of %d interleaved rounds): cpu prefill %.1f tok/s, decode %.2f tok/s; ggml prefill %.1f tok/s, decode %.2f tok/s\n",
			typ, benchRounds, slices.Max(cp), slices.Max(cd), slices.Max(gp), slices.Max(gd))
		fmt.Printf("%s ggml/cpu prefill: %.2f×, decode: %.2f×\n", typ, slices.Max(gp)/slices.Max(cp), slices.Max(gd)/slices.Max(cd))
		ce.Close()
		agg := map[int]float64{}
		for _, n := range []int{1, 8, 32} {
			agg[n] = aggregateDecode(b, ge, m, n)
		}
		fmt.Printf("%s ggml aggregate decode over HTTP: 1 stream %.2f tok/s, 8 streams %.2f tok/s, 32 streams %.2f tok/s (32/1: %.2f×)\n",
			typ, agg[1], agg[8], agg[32], agg[32]/agg[1])
		ge.Close()
	}
}

// decodeStep is a batch of ns sequences decoding one token each, 16 tokens
// into their context (sequence i in blocks 4i to 4i+3), every one sampled
// (and argmaxOnly: wanting only its argmax), with an output sized for it.
func decodeStep(ns int, argmaxOnly bool) (*batch.Batch, *batch.Output) {
	seqs := make([]batch.Seq, ns)
	for i := range seqs {
		seqs[i] = batch.Seq{SeqID: uint64(i), Tokens: []int32{int32(i)}, Pos: 16, Blocks: contiguous(i*4, 4), Sample: true, ArgmaxOnly: argmaxOnly}
	}
	return &batch.Batch{Seqs: seqs, NumTokens: ns, BlockSize: benchBlockSize},
		&batch.Output{Logits: make([][]float32, ns), Tokens: make([]int32, ns), Sampled: make([]bool, ns)}
}

// BenchmarkStepVsHTTP splits ggml's decode throughput on the Qwen2-0.5B
// shape (Q8_0) into the executor's step alone (Execute of 1 and of 32
// decoding sequences, 16 tokens into their context) and the same through
// the engine and HTTP server (aggregateDecode), to show what the serving
// path adds. Part of `make bench-executors` and `make test-gpu`.
func BenchmarkStepVsHTTP(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("a few GiB: run `make bench-executors`")
	}
	m, err := model.Random(qwen05Config, 1).Convert(model.Q8_0)
	if err != nil {
		b.Fatal(err)
	}
	ge, err := New(m, 256, benchBlockSize, Options{LibDir: testLibDir(b), Device: testDevice(), Threads: benchGGMLThreads()})
	if err != nil {
		b.Fatal(err)
	}
	defer ge.Close()
	steps := 50
	if ge.onCPU() {
		steps = 5
	}
	step := map[int]float64{}
	for _, ns := range []int{1, 32} {
		bt, out := decodeStep(ns, false)
		run := func() {
			clear(out.Logits) // as the engine does
			if err := ge.Execute(context.Background(), bt, out); err != nil {
				b.Fatal(err)
			}
		}
		run() // grow the compute buffer
		start := time.Now()
		for range steps {
			run()
		}
		step[ns] = float64(ns*steps) / time.Since(start).Seconds()
	}
	h1, h32 := aggregateDecode(b, ge, m, 1), aggregateDecode(b, ge, m, 32)
	fmt.Printf("Q8_0 on %s: step alone 1 seq %.1f tok/s, 32 seqs %.1f tok/s; through HTTP 1 stream %.1f tok/s, 32 streams %.1f tok/s (HTTP/step: %.2f×, %.2f×)\n",
		ge.Device(), step[1], step[32], h1, h32, h1/step[1], h32/step[32])
}

// freeExec is an executor that costs nothing: every sampled sequence of a
// batch gets a fixed row of logits of its own (of a 151,936-token
// vocabulary), so that what is timed is the serving path alone: the
// engine, sampling and HTTP.
type freeExec struct {
	rows  [][]float32
	steps int
}

func (f *freeExec) Execute(_ context.Context, b *batch.Batch, out *batch.Output) error {
	f.steps++
	j := 0
	for i := range b.Seqs {
		if b.Seqs[i].Sample {
			out.Logits[i] = f.rows[j] // one per sampled sequence (aggregateDecode runs at most 32)
			j++
		}
	}
	return nil
}

// BenchmarkServingPath runs aggregateDecode's load (1, 8 and 32 streams of
// 16-token prompts and 32-token outputs through the HTTP server) over an
// executor that costs nothing, with Qwen2's vocabulary: how fast the
// serving path alone goes, and how many steps the load takes (its requests
// are short, so its steps hold fewer sequences than it has streams). Part
// of `make bench-executors`.
func BenchmarkServingPath(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("run `make bench-executors`")
	}
	cfg := qwen05Config
	cfg.Layers = 1 // the model only names the vocabulary and the tokenizer here
	m := model.Random(cfg, 1)
	rows := make([][]float32, 32)
	for i := range rows {
		rows[i] = make([]float32, cfg.VocabSize)
		for k := range rows[i] {
			rows[i][k] = float32((k*7919+i*31)%1000) / 1000
		}
		rows[i][(i*977+5)%cfg.VocabSize] = 2 // the greedy token
	}
	for _, n := range []int{1, 8, 32} {
		f := &freeExec{rows: rows}
		start := time.Now()
		tps := aggregateDecode(b, f, m, n)
		el := time.Since(start)
		fmt.Printf("serving path alone, %d streams: %.1f tok/s, %d steps (%.1f output tokens a step, %.3f ms a step)\n",
			n, tps, f.steps, float64(n*32)/float64(f.steps), float64(el.Microseconds())/1000/float64(f.steps))
	}
}

// BenchmarkGraphReuse counts the graphs built and reused while an engine
// decodes 32 sequences whose prompts differ in length by a token each (so
// that some sequence enters a new KV block nearly every step), 256 steps
// on a small model, with flash attention per sequence (the CPU's) and with
// the plain attention (a GPU's), whose gathered blocks are padded to a
// bucket (paddedBlocks). Part of `make bench-executors`.
func BenchmarkGraphReuse(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("run `make bench-executors`")
	}
	cfg := wideHeads()["qwen2"]
	cfg.VocabSize, cfg.ContextLen = 512, 4096
	m, err := model.Random(cfg, 1).Convert(model.F16)
	if err != nil {
		b.Fatal(err)
	}
	for _, plain := range []bool{false, true} {
		e, err := New(m, 1024, benchBlockSize, Options{LibDir: testLibDir(b), Device: DeviceCPU, Threads: 1, PlainAttention: plain})
		if err != nil {
			b.Fatal(err)
		}
		eng, err := engine.New(engine.Config{
			MaxNumSeqs: 32, MaxModelLen: 4096, VocabSize: cfg.VocabSize, MaxNumBatchedTokens: 2048, MaxQueue: 64,
			KV:  kvcache.Config{NumBlocks: 1024, BlockSize: benchBlockSize, EnablePrefixCache: true},
			EOS: m.Config.EOS, Decoder: m.Tokenizer, Logger: slog.New(slog.DiscardHandler),
		}, e)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 32 {
			p := make([]int32, 16+i)
			for j := range p {
				p[j] = int32((i*31 + j*7) % 500)
			}
			if _, err := eng.Submit(context.Background(), &engine.Request{Prompt: p, Params: engine.Params{MaxTokens: 256, IgnoreEOS: true}}); err != nil {
				b.Fatal(err)
			}
		}
		steps := 0
		for r, w := eng.Pending(); r+w > 0; r, w = eng.Pending() {
			eng.Step(context.Background())
			steps++
		}
		name := "flash attention per sequence"
		if plain {
			name = "plain attention, padded span"
		}
		fmt.Printf("graph reuse, %s: %d steps, %d graphs built, %d reused\n", name, steps, e.graphsBuilt, e.graphsReused)
		e.Close()
	}
}

// BenchmarkThreadsUnderLoad measures, on whatever else the machine runs at
// the time, the ggml executor's decode rate with 1 CPU thread, with the
// default (up to one thread per core, each graph on the count measured
// fastest: threadTuner), with 2 threads whose pool sleeps between graphs
// (polling 0, the default here) and with 2 threads polling as ggml does by
// default (50): one sequence's
// decode steps after a 64-token prompt, and steps of 32 decoding sequences.
// The arms alternate, 3 rounds; the min and median tokens per second are
// printed per arm with the 2-thread/1-thread ratios. Part of
// `make bench-executors`.
func BenchmarkThreadsUnderLoad(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("a few GiB: run `make bench-executors`")
	}
	m, err := model.Random(qwen05Config, 1).Convert(model.Q8_0)
	if err != nil {
		b.Fatal(err)
	}
	type arm struct {
		name          string
		threads, poll int
		one, many     []float64
		e             *Executor
	}
	arms := []*arm{{name: "1 thread", threads: 1}, {name: "default (up to 2, measured)", threads: 0},
		{name: "2 threads, polling 0", threads: 2}, {name: "2 threads, polling 50", threads: 2, poll: 50}}
	for _, a := range arms {
		e, err := New(m, 256, benchBlockSize, Options{LibDir: testLibDir(b), Device: DeviceCPU, Threads: a.threads, Poll: a.poll})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		a.e = e
	}
	run := func(e *Executor, seqs []batch.Seq) {
		bt := &batch.Batch{Seqs: seqs, BlockSize: benchBlockSize}
		for _, s := range seqs {
			bt.NumTokens += len(s.Tokens)
		}
		out := &batch.Output{Logits: make([][]float32, len(seqs))}
		if err := e.Execute(context.Background(), bt, out); err != nil {
			b.Fatal(err)
		}
	}
	const steps = 8
	// one decodes a single sequence: a 64-token prompt, then steps decode
	// steps (tokens per second over them).
	one := func(e *Executor) float64 {
		blocks := contiguous(0, 8)
		prompt := make([]int32, 64)
		for i := range prompt {
			prompt[i] = int32(i * 31 % qwen05Config.VocabSize)
		}
		run(e, []batch.Seq{{Tokens: prompt, Blocks: blocks, Sample: true}})
		start := time.Now()
		for i := range steps {
			run(e, []batch.Seq{{Tokens: []int32{int32(i)}, Pos: 64 + i, Blocks: blocks, Sample: true}})
		}
		return steps / time.Since(start).Seconds()
	}
	// many times steps steps of 32 sequences decoding at 16 tokens of context.
	many := func(e *Executor) float64 {
		seqs := make([]batch.Seq, 32)
		for i := range seqs {
			seqs[i] = batch.Seq{SeqID: uint64(i), Tokens: []int32{int32(i)}, Pos: 16, Blocks: contiguous(i*4, 4), Sample: true}
		}
		run(e, seqs)
		start := time.Now()
		for range steps {
			run(e, seqs)
		}
		return 32 * steps / time.Since(start).Seconds()
	}
	for _, a := range arms { // warm
		one(a.e)
		many(a.e)
	}
	for range 3 {
		for _, a := range arms {
			a.one = append(a.one, one(a.e))
			a.many = append(a.many, many(a.e))
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("Q8_0 decode under load (loadavg %s, default: %s):\n", strings.TrimSpace(string(load)), arms[1].e.Device())
	for _, a := range arms {
		fmt.Printf("  %-22s 1 sequence: min %.2f, median %.2f tok/s; 32 sequences: min %.1f, median %.1f tok/s\n",
			a.name, slices.Min(a.one), median(a.one), slices.Min(a.many), median(a.many))
	}
	for _, a := range arms[1:] {
		fmt.Printf("  %s / 1 thread (medians): 1 sequence %.2f×, 32 sequences %.2f×\n", a.name, median(a.one)/median(arms[0].one), median(a.many)/median(arms[0].many))
	}
}

// BenchmarkGraphBuild times building and allocating one decode step's
// graph (no compute) of 32 and 128 sequences on the Qwen2-0.5B shape, with
// flash attention per sequence (the CPU's) and with the plain attention:
// what a step pays when it cannot reuse the last graph. Part of `make
// bench-executors`.
func BenchmarkGraphBuild(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("run `make bench-executors`")
	}
	m, err := model.Random(qwen05Config, 1).Convert(model.Q8_0)
	if err != nil {
		b.Fatal(err)
	}
	for _, plain := range []bool{false, true} {
		ge, err := New(m, 4096, benchBlockSize, Options{LibDir: testLibDir(b), Device: DeviceCPU, Threads: 1, PlainAttention: plain})
		if err != nil {
			b.Fatal(err)
		}
		for _, ns := range []int{32, 128} {
			bt, _ := decodeStep(ns, false)
			span := ge.prepare(bt, ns)
			const reps = 20
			start := time.Now()
			for range reps {
				ge.freeGraph()
				size := ge.graphNodes(ns)
				ctx := ge.a.initCtx(initParams{MemSize: ge.a.tensorOverhead()*uintptr(size) + ge.a.graphOverhead(uintptr(size), false), NoAlloc: true})
				g := ge.a.newGraphCustom(ctx, uintptr(size), false)
				ge.build(ctx, g, ns, span, ns)
				if !ge.a.gallocrAlloc(ge.galloc, g) {
					b.Fatal("gallocr")
				}
				ge.graph = graph{ctx: ctx, g: g}
			}
			attn := "flash attention per sequence"
			if plain {
				attn = "plain attention"
			}
			fmt.Printf("graph build, %s, %d sequences: %.2f ms\n", attn, ns, float64(time.Since(start).Microseconds())/1000/reps)
		}
		ge.Close()
	}
}

// BenchmarkDeviceArgmax times 32-sequence greedy decode steps on the CPU
// backend, Qwen2-0.5B shape, with the engine's own argmax over the copied
// logits and with DeviceArgmax, the two executors alternating for 4 rounds
// of 10 steps. Part of `make bench-executors`.
func BenchmarkDeviceArgmax(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("run `make bench-executors`")
	}
	m, err := model.Random(qwen05Config, 1).Convert(model.Q8_0)
	if err != nil {
		b.Fatal(err)
	}
	arms := []struct {
		name string
		e    *Executor
	}{{"host argmax", nil}, {"device argmax", nil}}
	for i := range arms {
		e, err := New(m, 1024, benchBlockSize, Options{LibDir: testLibDir(b), Device: DeviceCPU, Threads: benchGGMLThreads(), DeviceArgmax: i == 1})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		arms[i].e = e
	}
	const ns = 32
	bt, out := decodeStep(ns, true)
	step := func(e *Executor) {
		clear(out.Logits)
		clear(out.Sampled)
		if err := e.Execute(context.Background(), bt, out); err != nil {
			b.Fatal(err)
		}
		for i := range ns {
			if out.Logits[i] != nil {
				out.Tokens[i] = argmax(out.Logits[i]) // what the engine's greedy draw does
			}
		}
	}
	for _, a := range arms {
		step(a.e)
	}
	for r := range 4 {
		for _, a := range arms {
			start := time.Now()
			for range 10 {
				step(a.e)
			}
			fmt.Printf("round %d, %s: %.2f ms a step\n", r+1, a.name, float64(time.Since(start).Microseconds())/10000)
		}
	}
}

// BenchmarkGatherInCacheType times the decode steps of 32 streams whose
// blocks are spread over the cache (each stream's blocks 32 apart, as an
// engine hands them out to streams that grow together), so that attention
// per sequence gathers every stream's context, in the cache's type as I32
// words (rawGather, retype.go) and widened to F32 and cast back, on the
// same executor, rounds alternating; the qwen3moe bench model (Q8_0, KV
// F16), 1 thread: the median decode time of each and their ratio. It fails
// if the two give other tokens. Part of `make bench-executors`.
func BenchmarkGatherInCacheType(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("run `make bench-executors`")
	}
	cfg := qwen3moeBenchConfig
	m, err := model.Random(cfg, 1).Convert(model.Q8_0)
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(m, 256, benchBlockSize, Options{LibDir: testLibDir(b), Device: DeviceCPU, Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if !e.rawGather {
		b.Fatalf("the %s cache is not gathered in its type", e.KV().DType)
	}
	const ns = streamsN
	decode := func() (time.Duration, []int32) {
		seqs := make([]batch.Seq, ns)
		n := 0
		for s := range seqs {
			p := make([]int32, streamsPrompt)
			for i := range p {
				p[i] = int32((s*1009 + i*31) % cfg.VocabSize)
			}
			seqs[s] = batch.Seq{Tokens: p, Sample: true}
			for k := range (streamsPrompt+streamsGen)/benchBlockSize + 1 {
				seqs[s].Blocks = append(seqs[s].Blocks, kvcache.BlockID(k*ns+s))
			}
			n += len(p)
		}
		var toks []int32
		var took time.Duration
		for step := range streamsGen {
			out := &batch.Output{Logits: make([][]float32, ns)}
			start := time.Now()
			if err := e.Execute(context.Background(), &batch.Batch{Seqs: seqs, NumTokens: n, BlockSize: benchBlockSize}, out); err != nil {
				b.Fatal(err)
			}
			if step > 0 {
				took += time.Since(start)
			}
			for s := range seqs {
				tok := argmax(out.Logits[s])
				toks = append(toks, tok)
				seqs[s].Pos += len(seqs[s].Tokens)
				seqs[s].Tokens = []int32{tok}
			}
			n = ns
		}
		return took, toks
	}
	var raw, cast []float64
	var want []int32
	for round := range 8 {
		e.rawGather = round%2 == 0
		took, toks := decode()
		if want == nil {
			want = toks
		} else if !slices.Equal(toks, want) {
			b.Fatalf("round %d (rawGather %v): other tokens", round, e.rawGather)
		}
		if e.rawGather {
			raw = append(raw, took.Seconds())
		} else {
			cast = append(cast, took.Seconds())
		}
	}
	e.rawGather = true
	fmt.Printf("32 streams over spread blocks, %d decode steps: gathered as I32 words %.3f s, widened and cast back %.3f s (medians of 4); cast/words %.2f×\n",
		streamsGen-1, median(raw), median(cast), median(cast)/median(raw))
}
