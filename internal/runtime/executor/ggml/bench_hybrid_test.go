//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// qwen35SmallConfig is Qwen3.5-0.8B's geometry (hidden 1024, 24 layers of
// which every fourth attends, 8 heads of 256 over 2 KV heads, M-RoPE over
// 64 dimensions, 16 key and 16 value heads of 128 in the DeltaNet, FFN
// 3584) with a 32,768-token vocabulary instead of its 248k, random
// weights and the byte tokenizer.
var qwen35SmallConfig = model.Config{
	Arch: "qwen35", VocabSize: 32768, Dim: 1024, Layers: 24, Heads: 8, KVHeads: 2, HeadDim: 256, FFN: 3584,
	ContextLen: 4096, RopeDims: 64, RopeSections: [4]int{11, 11, 10, 0}, RopeTheta: 1e7, NormEps: 1e-6,
	Recurrent: arch.RecurrentGeometry{ConvKernel: 4, StateSize: 128, KeyHeads: 16, ValueHeads: 16, Inner: 2048},
}

// qwen35moeSmallConfig is qwen35SmallConfig with 16 layers and a
// mixture of 32 experts of 256, 4 a token, beside a gated shared expert
// of 512 (Qwen3.5-35B-A3B's kind of MLP, scaled down).
var qwen35moeSmallConfig = func() model.Config {
	c := qwen35SmallConfig
	c.Arch, c.Layers, c.FFN, c.Experts, c.ExpertsUsed, c.ExpertFFN = "qwen35moe", 16, 512, 32, 4, 256
	c.ExpertGating, c.ExpertWeightsNorm = arch.GatingSoftmax, true
	return c
}()

func withKinds(c model.Config) model.Config {
	c.LayerKinds = make([]arch.LayerKind, c.Layers)
	for i := range c.LayerKinds {
		if (i+1)%4 != 0 {
			c.LayerKinds[i] = arch.Recurrent
		}
	}
	return c
}

// BenchmarkHybridVsLlamaCpp is BenchmarkVsLlamaCpp for the hybrid
// architectures, Q8_0: `ggml/llama.cpp qwen35` and `qwen35moe` lines.
func BenchmarkHybridVsLlamaCpp(b *testing.B) {
	for _, cfg := range []model.Config{withKinds(qwen35SmallConfig), withKinds(qwen35moeSmallConfig)} {
		runVsLlamaCpp(b, vsModel{label: cfg.Arch, file: cfg.Arch, cfg: cfg, typ: model.Q8_0, streams: true})
	}
}

// BenchmarkHybridSecondTurn times an agent program's second turn on a
// hybrid model (qwen35SmallConfig, Q8_0) through the engine: turn 1 is a
// 1,024-token prompt and 128 greedy tokens (a tool call's worth), turn 2
// extends them by 64 tokens (the tool's result). It prints the second turn's time to first token with each
// --state-checkpoints mode: programs (resumes within a block of turn 1's
// end), prompts (resumes at turn 1's prompt and recomputes its output, as
// block-aligned prompt caching does) and none (recomputes everything), and
// the ratios, measured side by side, best of the rounds.
func BenchmarkHybridSecondTurn(b *testing.B) {
	if os.Getenv("KVPILOT_BENCH_EXECUTORS") == "" {
		b.Skip("minutes long: run `make bench-executors`")
	}
	lib := testLibDir(b)
	cfg := withKinds(qwen35SmallConfig)
	gguf := filepath.Join(b.TempDir(), "qwen35-q8_0.gguf")
	writeGGUF(b, model.Random(cfg, 1), model.Q8_0, gguf)
	m, err := model.Open(gguf, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const blocks = 512
	x, err := New(m, blocks, benchBlockSize, Options{LibDir: lib, Device: testDevice(), Threads: benchGGMLThreads()})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	turn1 := make([]int32, 1024)
	for i := range turn1 {
		turn1[i] = int32((i*7919 + 13) % cfg.VocabSize)
	}
	modes := []engine.CheckpointMode{engine.CheckpointPrograms, engine.CheckpointPrompts, engine.CheckpointNone}
	ttft := make([][]time.Duration, len(modes))
	cached := make([]int, len(modes))
	for round := range 3 {
		for i, mode := range modes {
			eng, err := engine.New(engine.Config{
				MaxNumSeqs: 4, MaxNumBatchedTokens: 2048, MaxModelLen: cfg.ContextLen, VocabSize: cfg.VocabSize,
				KV:  kvcache.Config{NumBlocks: blocks, BlockSize: benchBlockSize, EnablePrefixCache: true},
				EOS: m.Config.EOS, Decoder: m.Tokenizer, Logger: slog.New(slog.DiscardHandler), StateCheckpoints: mode,
			}, x)
			if err != nil {
				b.Fatal(err)
			}
			out1, _, _ := timedTurn(b, eng, turn1, 128)
			turn2 := append(append(slices.Clone(turn1), out1...), turn1[:64]...)
			_, first, u := timedTurn(b, eng, turn2, 1)
			ttft[i] = append(ttft[i], first)
			cached[i] = u.CachedTokens
			fmt.Printf("round %d, --state-checkpoints %s: second turn (%d tokens, %d cached) first token after %v\n",
				round+1, mode, len(turn2), u.CachedTokens, first.Round(time.Millisecond))
		}
	}
	best := func(i int) time.Duration { return slices.Min(ttft[i]) }
	var parts []string
	for i, mode := range modes {
		parts = append(parts, fmt.Sprintf("%s %v (%d cached)", mode, best(i).Round(time.Millisecond), cached[i]))
	}
	fmt.Printf("qwen35 second turn TTFT (best of 3): %s; none/programs %.1f×, prompts/programs %.1f×\n",
		strings.Join(parts, ", "), best(2).Seconds()/best(0).Seconds(), best(1).Seconds()/best(0).Seconds())
}

// timedTurn runs one greedy request of gen tokens after p through e by
// hand and returns its tokens, the time it took (with gen 1, its time to
// first token) and its usage.
func timedTurn(b *testing.B, e *engine.Engine, p []int32, gen int) ([]int32, time.Duration, engine.Usage) {
	start := time.Now()
	s, err := e.Submit(context.Background(), &engine.Request{ID: "turn", Prompt: p, Params: engine.Params{MaxTokens: gen, IgnoreEOS: true}})
	if err != nil {
		b.Fatal(err)
	}
	for {
		if run, wait := e.Pending(); run == 0 && wait == 0 {
			break
		}
		e.Step(context.Background())
	}
	took := time.Since(start)
	toks, _, c, err := s.Wait(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return toks, took, c.Usage
}
