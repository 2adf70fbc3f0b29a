//go:build linux && (amd64 || arm64)

package ggml

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/gptoss"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// EnvRequire makes a missing library fail the tests instead of skipping
// them; `make test` sets it after installing the libraries.
const envRequire = "KVPILOT_REQUIRE_GGML"

// testLibDir finds the libraries: $KVPILOT_GGML_LIB, else the directory
// hack/setup-ggml.sh installs into by default. Without them the test skips,
// or fails under KVPILOT_REQUIRE_GGML=1.
func testLibDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvLibDir)
	if dir == "" {
		if home, err := os.UserCacheDir(); err == nil {
			if d := filepath.Join(home, "kvpilot", "ggml", "3.22.1", "cpu"); fileExists(filepath.Join(d, "libggml-base.so")) {
				dir = d
			}
		}
	}
	if dir == "" {
		if os.Getenv(envRequire) != "" {
			t.Fatalf("%s is set but the ggml libraries are not: run hack/setup-ggml.sh and set %s to the directory it prints", envRequire, EnvLibDir)
		}
		t.Skipf("ggml libraries not installed: run hack/setup-ggml.sh and set %s (make test does both)", EnvLibDir)
	}
	return dir
}

const testBlockSize = 4

// testDevice is the device the tests run on: cpu, or what
// KVPILOT_GGML_DEVICE says (make test-gpu sets cuda).
func testDevice() string {
	if d := os.Getenv("KVPILOT_GGML_DEVICE"); d != "" {
		return d
	}
	return DeviceCPU
}

// plainAttention makes newTestExec build the attention that non-CPU
// devices use; tests that cover attention run with both.
var plainAttention bool

// deviceArgmax makes newTestExec take greedy rows' argmax on the device.
var deviceArgmax bool

// flashAttention makes newTestExec run flash attention on every batch on
// other devices too (the CPU's default).
var flashAttention bool

// testKV is the KV cache type newTestExec asks for (auto: the model's).
var testKV kvcache.DType

// plainWeights makes newTestExec keep every weight in plain buffers.
var plainWeights bool

// windowChunk turns newTestExec's window cache on, with rings of this
// chunk beside the window (0: off).
var windowChunk int

func newTestExec(t testing.TB, m *model.Model, numBlocks int) *Executor {
	t.Helper()
	// One CPU thread: these models are tiny, and ggml's threads spin at
	// barriers, which on a shared machine costs more than it gains.
	opts := Options{LibDir: testLibDir(t), Device: testDevice(), Threads: 1, PlainAttention: plainAttention, PlainWeights: plainWeights, KVCacheDType: testKV, DeviceArgmax: deviceArgmax,
		WindowCache: windowChunk > 0, WindowChunk: windowChunk}
	if flashAttention && testDevice() != DeviceCPU {
		// The flash subtests of bothAttentions run flash attention on
		// every batch there too, where ggml has the kernels.
		opts.FlashMaxSeqs = math.MaxInt
	}
	e, err := New(m, numBlocks, testBlockSize, opts)
	if errors.Is(err, ErrNoFlashAttention) {
		t.Skipf("flash attention on %s: %v", testDevice(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// newFlashTestExec is newTestExec with flash attention on every batch, on
// a GPU too (it skips the test where the backend has no kernel for it).
func newFlashTestExec(t testing.TB, m *model.Model, numBlocks int) *Executor {
	t.Helper()
	flashAttention = true
	defer func() { flashAttention = false }() // also when newTestExec skips
	return newTestExec(t, m, numBlocks)
}

func contiguous(first, n int) []kvcache.BlockID { return exectest.Contiguous(first, n) }

func execute(t testing.TB, e batch.Executor, seqs []batch.Seq) [][]float32 {
	t.Helper()
	return exectest.Execute(t, e, testBlockSize, seqs)
}

func argmax(l []float32) int32 {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	return int32(best)
}

// logitScale is the largest |logit| of l, the scale margins and
// differences are relative to.
func logitScale(l []float32) float64 {
	var scale float64
	for _, v := range l {
		scale = max(scale, math.Abs(float64(v)))
	}
	return scale
}

// top2Margin is the gap between the largest and the second largest logit.
func top2Margin(l []float32) float32 {
	a, b := float32(-1e30), float32(-1e30)
	for _, v := range l {
		if v > a {
			a, b = v, a
		} else if v > b {
			b = v
		}
	}
	return a - b
}

// bothAttentions runs f with flash attention (the CPU's) and with the plain
// chain (other devices').
func bothAttentions(t *testing.T, f func(t *testing.T)) {
	for _, plain := range []bool{false, true} {
		name := "flash"
		if plain {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			plainAttention, flashAttention = plain, !plain
			defer func() { plainAttention, flashAttention = false, false }()
			f(t)
		})
	}
}

// kvTypes are the KV cache types the executor keeps.
var allKVTypes = []kvcache.DType{kvcache.DTypeF32, kvcache.DTypeF16, kvcache.DTypeBF16, kvcache.DTypeQ8_0}

// withKV runs f with newTestExec's KV cache in type d.
func withKV(t *testing.T, d kvcache.DType, f func(t *testing.T)) {
	t.Run("kv="+d.String(), func(t *testing.T) {
		testKV = d
		defer func() { testKV = kvcache.DTypeAuto }()
		f(t)
	})
}

// qwen3Config is a small random qwen3 (which the cpu executor does not run,
// so it is not among wideHeads): heads of 64, twice dim/heads, as Qwen3's
// own (Qwen3-0.6B: dim 1024, 16 heads of 128), and Qwen3's epsilon.
func qwen3Config() model.Config {
	return model.Config{Arch: model.ArchQwen3, VocabSize: 320, Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 192, TiedEmbeddings: true, RopeTheta: 1e6, NormEps: 1e-6}
}

// qwen3moeConfig is qwen3Config with a mixture of experts in every
// layer: 8 experts of 64 (a Q8_0 block's multiple), 2 per token, as
// Qwen3-30B-A3B's 128 of 768, 8 per token, scaled down.
func qwen3moeConfig() model.Config {
	c := qwen3Config()
	c.Arch, c.Experts, c.ExpertsUsed, c.ExpertFFN = model.ArchQwen3MoE, 8, 2, 64
	return c
}

// glm4moeConfig is GLM-4.5's layout scaled down: q/k/v biases, RoPE over
// half of each head (GLM-4.5-Air: 64 of 128), a leading dense layer, then
// layers of 8 sigmoid-routed experts (2 a token, their weights normalized
// and scaled by 2.5, GLM-4.5's factor) and a shared one, an untied head,
// and a multi-token-prediction layer counted in block_count but not
// stored (llama.cpp loads such a file without it).
func glm4moeConfig() model.Config {
	return model.Config{
		Arch: model.ArchGLM4MoE, VocabSize: 320, Dim: 128, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 64, RopeDims: 32, FFN: 192,
		QKVBias: true, RopeTheta: 1e6, NormEps: 1e-5,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, SharedExperts: 1, DenseLayers: 1,
		ExpertGating: arch.GatingSigmoid, ExpertWeightsNorm: true, ExpertWeightsScale: 2.5, NextNLayers: 1,
	}
}

// qwen35Config is Qwen3.5's hybrid layout scaled down: three gated
// DeltaNet layers (4 value heads reading 2 key heads of 32, a
// convolution of 4) and a gated attention layer (heads of 64, M-RoPE over
// a quarter of each, sections 3+3+2 pairs), an untied head.
func qwen35Config() model.Config {
	return model.Config{
		Arch: "qwen35", VocabSize: 320, Dim: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 192,
		RopeDims: 16, RopeSections: [4]int{3, 3, 2, 0}, RopeTheta: 1e7, NormEps: 1e-6,
		LayerKinds: []arch.LayerKind{arch.Recurrent, arch.Recurrent, arch.Recurrent, arch.Full},
		Recurrent:  arch.RecurrentGeometry{ConvKernel: 4, StateSize: 32, KeyHeads: 2, ValueHeads: 4, Inner: 128},
	}
}

// qwen35moeConfig is qwen35Config with Qwen3.5-35B-A3B's kind of MLP
// scaled down: 8 experts of 64, 2 a token, beside a gated shared expert
// of 128.
func qwen35moeConfig() model.Config {
	c := qwen35Config()
	c.Arch, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.FFN = "qwen35moe", 8, 2, 64, 128
	c.ExpertGating, c.ExpertWeightsNorm = arch.GatingSoftmax, true
	return c
}

// deepseek2Config is GLM-4.7-Flash's layout scaled down: queries through
// a low rank (q_lora_rank 64), a latent of 64 and 32 rotated dimensions
// (HeadDim 96, the cache's row), heads of 64 unrotated + 32 rotated key
// dimensions and 64 value dimensions, a leading dense layer, then layers
// of 8 sigmoid-routed experts with a selection bias (2 a token, their
// weights normalized and scaled by 1.8, GLM-4.7-Flash's factor) and a
// shared one, an untied head, and a multi-token-prediction layer counted
// in block_count but not stored.
func deepseek2Config() model.Config {
	return model.Config{
		Arch: model.ArchDeepSeek2, VocabSize: 320, Dim: 128, Layers: 3, Heads: 4, KVHeads: 1, HeadDim: 96, RopeDims: 32, FFN: 192,
		RopeTheta: 1e6, NormEps: 1e-5,
		MLA:     arch.MLA{QRank: 64, KVRank: 64, KeyLength: 96, ValueLength: 64},
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, SharedExperts: 1, DenseLayers: 1, ExpertSelectionBias: true,
		ExpertGating: arch.GatingSigmoid, ExpertWeightsNorm: true, ExpertWeightsScale: 1.8, NextNLayers: 1,
	}
}

// deepseek2LiteConfig is DeepSeek-V2-Lite's layout scaled down: queries
// projected directly (no q_lora_rank), softmax routing without a
// selection bias or normalization, and DeepSeek-V2's YaRN (its
// yarn_log_multiplier 0.0707, mscale_all_dim 0.707 as converted) 4× over
// an original context of 128 tokens, which the long prompt passes.
func deepseek2LiteConfig() model.Config {
	c := deepseek2Config()
	c.MLA.QRank, c.ExpertSelectionBias, c.ExpertGating, c.ExpertWeightsNorm, c.ExpertWeightsScale, c.NextNLayers = 0, false, arch.GatingSoftmax, false, 1, 0
	c.RopeTheta, c.ContextLen = 10000, 512
	c.RopeScaling = arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 128, YarnLogMul: 0.0707}
	return c
}

// deepseek2V3Config is DeepSeek-V3's routing scaled down:
// deepseek2Config's with grouped expert selection, 4 groups of 2 experts
// of which a token chooses from the best 2 (V3: 8 groups of 32, the best
// 4; a group scores by the sum of its two best), weights scaled by 2.5,
// V3's factor. (With the best 1 of 4 the engine's batching test meets a
// near-tie between two groups that the batch's summation order decides.)
func deepseek2V3Config() model.Config {
	c := deepseek2Config()
	c.ExpertGroups, c.ExpertGroupsUsed, c.ExpertWeightsScale = 4, 2, 2.5
	return c
}

// qwen3nextConfig is qwen35moeConfig as Qwen3-Next lays it out: NEOX
// RoPE over a quarter of each head (no M-RoPE sections), beta and alpha
// from one projection, and each key head read by the two value heads
// that follow it (Qwen3-Next-80B-A3B: 32 value heads over 16 key heads).
func qwen3nextConfig() model.Config {
	c := qwen35moeConfig()
	c.Arch, c.RopeSections = "qwen3next", [4]int{}
	return c
}

// qwen3nextFusedConfig is qwen3nextConfig as older conversions store it:
// the DeltaNet's inputs through one ssm_in, key head by key head.
func qwen3nextFusedConfig() model.Config {
	c := qwen3nextConfig()
	c.Recurrent.FusedQKVZ = true
	return c
}

// gptossConfig is gpt-oss-20b's layout scaled down: q/k/v/o biases,
// sinks, three layers of which the first and last attend over a window of
// 32 tokens (shorter than the long parity prompt) and the middle one over
// the whole context, 8 experts (2 a token) with biased router and
// experts, an untied head, and gpt-oss's YaRN (factor 32) over an
// original context of 128 tokens, which the long prompt passes.
func gptossConfig() model.Config {
	return model.Config{
		Arch: model.ArchGptOss, VocabSize: 320, Dim: 128, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 64, ContextLen: 4096,
		QKVBias: true, RopeTheta: 150000, NormEps: 1e-5, SlidingWindow: 32, LayerKinds: gptoss.LayerKinds(3, 2),
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, ExpertGating: arch.GatingSoftmaxWeight,
		RopeScaling: arch.RopeScaling{Type: "yarn", Factor: 32, OrigContext: 128},
	}
}

// wideHeads are small random models whose heads hold 32 elements, a whole
// Q8_0 block, so that every KV cache type applies.
func wideHeads() map[string]model.Config {
	return map[string]model.Config{
		"llama": {Arch: model.ArchLlama, VocabSize: 320, Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, FFN: 192},
		"qwen2": {Arch: model.ArchQwen2, VocabSize: 320, Dim: 128, Layers: 2, Heads: 4, KVHeads: 1, FFN: 160, QKVBias: true, TiedEmbeddings: true, RopeTheta: 1e6},
	}
}
