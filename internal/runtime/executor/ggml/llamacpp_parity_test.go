//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
)

// Shape of the parity runs: greedy steps after each prompt, and the
// prompts' lengths (the long one spans many KV blocks of either side).
const (
	paritySteps       = 64
	parityShortPrompt = 12
	parityLongPrompt  = 300
	parityBlockSize   = 16
	parityMaxModelLen = 512
)

// parityLogitsTol bounds |ggml − llama.cpp| over every logit of every step
// (teacher-forced with llama.cpp's tokens; the logits here reach 2.5–4.5).
// Both run ggml 0.25.1's CPU kernels and mostly agree to the bit; where
// the two graphs order a prompt's sums differently the first step differs
// by up to 2.2e-4 (seen over a dozen seeds), while an F32 KV cache on the
// executor's side against llama.cpp's F16 one differs by 5e-3.
const parityLogitsTol = 1e-3

// TestGreedyParityWithLlamaCpp holds the ggml executor to llama.cpp itself
// (node-llama-cpp 3.22.1, hack/llama-cpp-greedy.mjs), the reference for
// every architecture: for llama, qwen2 (q/k/v biases, tied head), qwen3
// (q/k head norms, a head dim other than dim/heads, tied head), qwen3moe
// (qwen3 with mixture-of-experts MLPs), glm4moe (partial RoPE, a leading
// dense layer, sigmoid routing biased in its choice, shared experts,
// scaled weights, a next-token layer skipped), RoPE scaling (qwen3 with
// YaRN from an original context the long prompt passes, llama linear with
// a model's attention factor), mistral3 (YaRN with its own betas and log
// multiplier, the attention temperature stepping within the long prompt),
// llama with Llama 3.1's rope_freqs.weight and deepseek2 (the latent
// cache, queries through a low rank or not, YaRN with deepseek2's
// pre-scaled kq_scale, grouped expert selection), each
// with F16 and with Q8_0 weights, a random-weight GGUF goes to both; both
// keep an F16 KV cache, run flash attention on one CPU thread, and decode
// greedily paritySteps tokens after a short prompt and after a long one
// (token ids, no BOS). The engine over the executor (greedy sampling,
// prefill in one batch) must generate exactly llama.cpp's tokens, and the
// executor's logits, fed llama.cpp's tokens, must be within
// parityLogitsTol of llama.cpp's at every step.
func TestGreedyParityWithLlamaCpp(t *testing.T) {
	lib, dir := parityReference(t)
	for _, c := range parityModels() {
		for _, typ := range []model.DType{model.F16, model.Q8_0} {
			t.Run(c.name+"/"+typ.String(), func(t *testing.T) {
				m, lc := parityPair(t, dir, c, typ)
				opts := Options{LibDir: lib, Device: DeviceCPU, Threads: 1, KVCacheDType: kvcache.DTypeF16}
				blocks := parityMaxModelLen / parityBlockSize
				eng := parityEngine(t, m, newParityExec(t, m, blocks, opts), blocks)
				teacher := newParityExec(t, m, blocks, opts)
				for _, n := range []int{parityShortPrompt, parityLongPrompt} {
					checkGreedyParity(t, lc, eng, teacher, blocks, parityPrompt(n, m.Config.VocabSize))
				}
			})
		}
	}
}

// parityReference skips a parity test where llama.cpp does not run it
// (-short runs, other devices) and returns the ggml libraries' folder and
// node-llama-cpp's.
func parityReference(t *testing.T) (lib, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs llama.cpp in node: not in -short (race) runs, whose concern it is not")
	}
	lib = testLibDir(t)
	if testDevice() != DeviceCPU {
		t.Skipf("llama.cpp runs on the CPU here; the executor on %s is held to the cpu executor instead", testDevice())
	}
	return lib, llamacpp.Node(t)
}

// parityPair writes c's model in typ to a GGUF and opens it on both sides:
// the model here, llama.cpp's greedy driver (F16 cache) there.
func parityPair(t *testing.T, dir string, c parityCase, typ model.DType) (*model.Model, *llamaCpp) {
	t.Helper()
	path := filepath.Join(t.TempDir(), c.name+"-"+strings.ToLower(typ.String())+".gguf")
	writeGGUF(t, parityModel(c.cfg, c.seed), typ, path)
	return openParity(t, dir, path)
}

// openParity opens the GGUF at path here and in llama.cpp's greedy
// driver (F16 cache).
func openParity(t *testing.T, dir, path string) (*model.Model, *llamaCpp) {
	t.Helper()
	m, err := model.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	lc := startLlamaCpp(t, "llama-cpp-greedy.mjs", dir, path, 1, kvcache.DTypeF16)
	t.Cleanup(lc.close)
	return m, lc
}

// parityPrompt is the parity tests' prompt of n random tokens of vocab.
func parityPrompt(n, vocab int) []int32 {
	rng := rand.New(rand.NewPCG(41, uint64(n)))
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(vocab))
	}
	return prompt
}

// parityModels are the architectures served today in wideHeads' geometry
// (Q8_0 blocks fit every matrix row; qwen3 in qwen3Config's, its heads
// twice dim/heads), each with a seed whose greedy decodes keep the top two
// logits at least 3.8e-3 apart at every step (qwen3: 3.2e-3, the widest of
// seeds 1–45, whose logits all equal llama.cpp's to the bit; random models
// have near-ties; the smallest margin is logged), far above the logits'
// differences. qwen3moe is qwen3's geometry with 8 experts, 2 a token
// (seed 2: margins of 2.9e-3 and more, the widest of seeds 1–9), glm4moe
// glm4moeConfig's (seed 7: 5.0e-3, of seeds 1–11); the logits of both
// equal llama.cpp's to the bit, F16 and Q8_0.
func parityModels() []parityCase {
	heads := wideHeads()
	return []parityCase{
		{name: "llama", cfg: heads["llama"], seed: 12},
		{name: "qwen2", cfg: heads["qwen2"], seed: 7},
		{name: "qwen3", cfg: qwen3Config(), seed: 27},
		{name: "qwen3moe", cfg: qwen3moeConfig(), seed: 2},
		{name: "glm4moe", cfg: glm4moeConfig(), seed: 7},
		// RoPE scaling, mistral3 and Llama 3.1's frequency factors (seeds:
		// the widest top-2 margins with F16 weights of 1–30, 1–20, 1–20
		// and 1–20: 8.0e-3, 7.8e-3, 7.9e-3, 2.1e-2).
		{name: "qwen3-yarn", cfg: yarnConfig(), seed: 18},
		{name: "llama-linear", cfg: linearConfig(), seed: 16},
		{name: "mistral3", cfg: mistral3Config(), seed: 14},
		{name: "llama3", cfg: llama3Config(), seed: 10},
		gptossParity(),
		{name: "qwen35", cfg: qwen35Config(), seed: 1},
		{name: "qwen35moe", cfg: qwen35moeConfig(), seed: 1},
		// deepseek2 (multi-head latent attention) in GLM-4.7-Flash's
		// shape, DeepSeek-V2-Lite's and with DeepSeek-V3's grouped expert
		// selection (seeds: the widest margins of 1–8 in F16 and Q8_0,
		// 4.4e-3, 1.8e-3 and 2.0e-3; the logits of all twenty-four equal
		// llama.cpp's to the bit but two, whose long prompt's first step
		// differs in F16: the lite's seed 1 by 2.5e-4, v3's seed 2 by
		// 3.7e-5).
		{name: "deepseek2", cfg: deepseek2Config(), seed: 7},
		{name: "deepseek2-lite", cfg: deepseek2LiteConfig(), seed: 6},
		{name: "deepseek2-v3", cfg: deepseek2V3Config(), seed: 4},
		// qwen3next, seed 1: margins of 2.7e-3 and more, F16 and Q8_0;
		// the logits equal llama.cpp's to the bit.
		{name: "qwen3next", cfg: qwen3nextConfig(), seed: 1},
		{name: "qwen3next-ssm_in", cfg: qwen3nextFusedConfig(), seed: 1},
		// The experts' gate and up in one ffn_gate_up_exps tensor, as
		// newer conversions store them (deepseek2, qwen35moe): the logits
		// equal llama.cpp's to the bit, F16 and Q8_0.
		{name: "deepseek2-gate_up", cfg: fusedExperts(deepseek2Config()), seed: 7},
		{name: "qwen35moe-gate_up", cfg: fusedExperts(qwen35moeConfig()), seed: 1},
	}
}

// fusedExperts is c with its experts' gate and up projections in one
// tensor (arch.Config.FusedGateUpExperts).
func fusedExperts(c model.Config) model.Config {
	c.FusedGateUpExperts = true
	return c
}

// llama3Config is wideHeads' llama with Llama 3.1's RoPE: a
// rope_freqs.weight of divisors between 1 and 8 (model.Random's).
func llama3Config() model.Config {
	c := wideHeads()["llama"]
	c.RopeTheta, c.RopeFreqFactors = 5e5, true
	return c
}

// mistral3Config is wideHeads' llama as mistral3, with Devstral's kind of
// YaRN (a log multiplier of 1, here betas of its own) over an original
// context of 128 tokens and the attention temperature on, which steps
// every 128 positions: the long prompt's tokens see three temperatures.
func mistral3Config() model.Config {
	c := wideHeads()["llama"]
	c.Arch, c.RopeTheta, c.ContextLen = "mistral3", 1e6, 1024
	c.RopeScaling = arch.RopeScaling{Type: "yarn", Factor: 8, OrigContext: 128, YarnBetaFast: 24, YarnBetaSlow: 2, YarnLogMul: 1}
	c.AttnTempScale = 0.1
	return c
}

// yarnConfig is qwen3Config with YaRN scaling 4× over an original context
// of 128 tokens, which the long prompt passes (YaRN's ramp and magnitude
// scaling apply at every position; the trained context decides which
// dimensions interpolate).
func yarnConfig() model.Config {
	c := qwen3Config()
	c.ContextLen = 512
	c.RopeScaling = arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 128}
	return c
}

// linearConfig is wideHeads' llama with linear RoPE scaling 2× and a
// rope.scaling.attn_factor of its own.
func linearConfig() model.Config {
	c := wideHeads()["llama"]
	c.RopeScaling = arch.RopeScaling{Type: "linear", Factor: 2, AttnFactor: 0.8}
	return c
}

// gptossParity is gpt-oss's parity case (TestMXFP4ExpertsParityWithLlamaCpp
// runs it with MXFP4 experts too). Seed 3: margins of 2.5e-3 and more in
// F16, Q8_0 and MXFP4 (the widest of seeds 1–8; the logits equal
// llama.cpp's to the bit).
func gptossParity() parityCase {
	return parityCase{name: "gpt-oss", cfg: gptossConfig(), seed: 3}
}

type parityCase struct {
	name string
	cfg  model.Config
	seed int64
}

// parityModel is model.Random's model with, when the head is tied, the
// token embedding scaled by 0.1: otherwise each token's own embedding
// dominates the residual stream, the tied head scores the input token
// highest and greedy decoding repeats the prompt's last token, which would
// leave the token comparison little to check.
func parityModel(cfg model.Config, seed int64) *model.Model {
	m := model.Random(cfg, seed)
	if !cfg.TiedEmbeddings {
		return m
	}
	v := m.Weights.TokenEmbedding.Float32()
	for i := range v {
		v[i] *= 0.1
	}
	data, err := model.Encode(model.F32, v)
	if err != nil {
		panic(err)
	}
	m.Weights.TokenEmbedding.Data = data
	return m
}

func newParityExec(t *testing.T, m *model.Model, blocks int, opts Options) *Executor {
	t.Helper()
	e := newExecIn(t, m, blocks, parityBlockSize, opts)
	if e.KV().DType != kvcache.DTypeF16 {
		t.Fatalf("KV cache %s, want F16", e.KV().DType)
	}
	return e
}

// newExecIn is an executor of m with blocks of blockSize, closed after
// the test.
func newExecIn(t *testing.T, m *model.Model, blocks, blockSize int, opts Options) *Executor {
	t.Helper()
	e, err := New(m, blocks, blockSize, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// parityEngine is an engine over x that prefills a prompt in one batch.
func parityEngine(t *testing.T, m *model.Model, x batch.Executor, blocks int) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{
		MaxNumSeqs: 1, MaxNumBatchedTokens: parityMaxModelLen, MaxModelLen: parityMaxModelLen,
		VocabSize: m.Config.VocabSize, EOS: m.Config.EOS, Decoder: m.Tokenizer, Logger: slog.New(slog.DiscardHandler),
		KV: kvcache.Config{NumBlocks: blocks, BlockSize: parityBlockSize},
	}, x)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// checkGreedyParity decodes after prompt in llama.cpp and through the
// engine, compares the tokens, then runs the teacher executor on
// llama.cpp's tokens and compares every step's logits.
func checkGreedyParity(t *testing.T, lc *llamaCpp, eng *engine.Engine, teacher *Executor, blocks int, prompt []int32) {
	t.Helper()
	if d := checkGreedyParityWithin(t, lc, eng, teacher, blocks, prompt); d > parityLogitsTol {
		t.Errorf("prompt %d tokens: logits differ from llama.cpp's by up to %.3g, more than %g", len(prompt), d, parityLogitsTol)
	}
}

// checkGreedyParityWithin is checkGreedyParity's comparison: it fails on
// the first token that differs and returns the logits' largest
// difference over every step.
func checkGreedyParityWithin(t *testing.T, lc *llamaCpp, eng *engine.Engine, teacher *Executor, blocks int, prompt []int32) float64 {
	t.Helper()
	var want struct {
		Tokens []int32
		Logits [][]float32
	}
	lc.ask(t, map[string]any{"op": "greedy", "prompt": prompt, "steps": paritySteps}, &want)
	if len(want.Tokens) != paritySteps || len(want.Logits) != paritySteps {
		t.Fatalf("llama.cpp answered %d tokens and %d logit rows, want %d", len(want.Tokens), len(want.Logits), paritySteps)
	}

	s, err := eng.Submit(context.Background(), &engine.Request{
		ID: fmt.Sprintf("prompt-%d", len(prompt)), Prompt: prompt,
		Params: engine.Params{MaxTokens: paritySteps, IgnoreEOS: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 * paritySteps {
		if run, wait := eng.Pending(); run == 0 && wait == 0 {
			break
		}
		eng.Step(context.Background())
	}
	got := wait(t, s)

	// Teacher forcing: the executor's logits before each of llama.cpp's
	// tokens, on one sequence over contiguous blocks (the prompt in chunks
	// of the teacher's MaxSeqTokens, when it bounds them).
	chunk := teacher.MaxSeqTokens()
	if chunk == 0 {
		chunk = len(prompt)
	}
	for pos := 0; pos+chunk < len(prompt); pos += chunk {
		exectest.Execute(t, teacher, parityBlockSize, []batch.Seq{{Tokens: prompt[pos : pos+chunk], Pos: pos, Blocks: contiguous(0, blocks)}})
	}
	pos := (len(prompt) - 1) / chunk * chunk
	in := prompt[pos:]
	var logits [][]float32
	for i := range paritySteps {
		l := exectest.Execute(t, teacher, parityBlockSize, []batch.Seq{{Tokens: in, Pos: pos, Blocks: contiguous(0, blocks), Sample: true}})
		logits = append(logits, l[0])
		pos += len(in)
		in = []int32{want.Tokens[i]}
	}

	minMargin, firstDiff, allDiff := float32(math.Inf(1)), 0.0, 0.0
	for i := range paritySteps {
		if len(want.Logits[i]) != len(logits[i]) {
			t.Fatalf("step %d: llama.cpp has %d logits, the executor %d", i, len(want.Logits[i]), len(logits[i]))
		}
		minMargin = min(minMargin, top2Margin(want.Logits[i]))
		for j := range logits[i] {
			d := math.Abs(float64(logits[i][j] - want.Logits[i][j]))
			allDiff = max(allDiff, d)
			if i == 0 {
				firstDiff = max(firstDiff, d)
			}
		}
	}
	t.Logf("prompt %d tokens: %d steps, first-step logits max |diff| %.3g, all steps %.3g, smallest llama.cpp top-2 margin %.3g",
		len(prompt), paritySteps, firstDiff, allDiff, minMargin)
	for i := range paritySteps {
		if i >= len(got) || got[i] != want.Tokens[i] {
			t.Fatalf("prompt %d tokens: step %d: the engine generated %v, llama.cpp %d (top-2 margin llama.cpp %.3g, executor %.3g)\nengine    %v\nllama.cpp %v",
				len(prompt), i, gotAt(got, i), want.Tokens[i], top2Margin(want.Logits[i]), top2Margin(logits[i]), got, want.Tokens)
		}
	}
	return allDiff
}

func gotAt(toks []int32, i int) any {
	if i < len(toks) {
		return toks[i]
	}
	return "nothing"
}
