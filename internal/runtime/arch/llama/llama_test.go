package llama

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/archtest"
)

// fileOf is what the GGUF writer stores for c: Metadata and Tensors.
func fileOf(a arch.Architecture, c arch.Config) archtest.File { return archtest.FileOf(a, c) }

// TestReadConfigReadsMetadata: ReadConfig reads back what Metadata and
// Tensors describe, for both variants.
func TestReadConfigReadsMetadata(t *testing.T) {
	for _, want := range []arch.Config{
		{Arch: "llama", VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, ContextLen: 256, RopeTheta: 10000, NormEps: 1e-5},
		{Arch: "qwen2", VocabSize: 300, Dim: 64, Layers: 3, Heads: 4, KVHeads: 1, HeadDim: 32, FFN: 96, ContextLen: 4096, RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true, QKVBias: true},
		// qwen3's head dim is its own (Qwen3-0.6B: dim 1024, 16 heads of 128).
		{Arch: "qwen3", VocabSize: 300, Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 96, ContextLen: 40960, RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true},
		{Arch: "qwen3", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 96, ContextLen: 256, RopeTheta: 1e6, NormEps: 1e-6},
		// Qwen3-30B-A3B's routing: softmax, the top-k's weights renormalized.
		{Arch: "qwen3moe", VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96, ContextLen: 256, RopeTheta: 1e6, NormEps: 1e-6,
			Experts: 8, ExpertsUsed: 2, ExpertFFN: 48, ExpertGating: arch.GatingSoftmax, ExpertWeightsNorm: true},
		// RoPE scaling: YaRN (Qwen3's 4× of 32768), linear, a factor
		// without a type (llama.cpp: linear) and a model's own attention
		// factor.
		{Arch: "qwen3", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 96, ContextLen: 131072, RopeTheta: 1e6, NormEps: 1e-6,
			RopeScaling: arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 32768}},
		{Arch: "llama", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 96, ContextLen: 8192, RopeTheta: 1e4, NormEps: 1e-5,
			RopeScaling: arch.RopeScaling{Type: "linear", Factor: 2}},
		{Arch: "qwen2", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 96, ContextLen: 8192, RopeTheta: 1e4, NormEps: 1e-5,
			RopeScaling: arch.RopeScaling{Factor: 2, AttnFactor: 0.5}},
		// mistral3 (Devstral Small 2's scaling) reads YaRN's betas, log
		// multiplier and the attention temperature too.
		{Arch: "mistral3", VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96, ContextLen: 393216, RopeTheta: 1e8, NormEps: 1e-5,
			RopeScaling: arch.RopeScaling{Type: "yarn", Factor: 48, OrigContext: 8192, YarnBetaFast: 32, YarnBetaSlow: 1, YarnLogMul: 1}, AttnTempScale: 0.1},
		{Arch: "mistral3", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 96, ContextLen: 4096, RopeTheta: 1e6, NormEps: 1e-5, TiedEmbeddings: true},
		// Llama 3.1: rope_freqs.weight.
		{Arch: "llama", VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, ContextLen: 131072, RopeTheta: 5e5, NormEps: 1e-5, RopeFreqFactors: true},
	} {
		a := map[string]arch.Architecture{"llama": Llama, "qwen2": Qwen2, "qwen3": Qwen3, "qwen3moe": Qwen3MoE, "mistral3": Mistral3}[want.Arch]
		got := arch.Config{Arch: want.Arch}
		if err := a.ReadConfig(fileOf(a, want), &got); err != nil {
			t.Fatalf("%s: %v", want.Arch, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", want.Arch, diff)
		}
	}
}

// TestReadConfigRefusesWhatItDoesNotRun: a RoPE scaling, partial RoPE or a
// value length of its own would run silently wrong, so they are refused.
func TestReadConfigRefusesWhatItDoesNotRun(t *testing.T) {
	c := arch.Config{Arch: "llama", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, ContextLen: 256, RopeTheta: 10000, NormEps: 1e-5}
	for _, tc := range []struct {
		key   string
		value any
		want  string
	}{
		{"llama.rope.scaling.type", "longrope", `rope scaling "longrope" is unsupported`},
		{"llama.rope.scaling.type", "ntk", `rope scaling "ntk" is unsupported`},
		{"llama.rope.scaling.factor", float32(-2), "rope.scaling.factor = -2 must be positive"},
		{"llama.rope.dimension_count", uint32(8), "partial rotary embeddings (8 of 16 dimensions)"},
		{"llama.attention.value_length", uint32(32), "value length 32 differs from key length 16"},
		{"llama.block_count", "two", "not an integer"},
	} {
		f := fileOf(Llama, c)
		f.KV[tc.key] = tc.value
		got := arch.Config{Arch: "llama"}
		if err := Llama.ReadConfig(f, &got); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s = %v: error %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
	// A rope_freqs.weight not of half the head dim.
	f := fileOf(Llama, c)
	f.Shapes["rope_freqs.weight"] = []int{16}
	if err := Llama.ReadConfig(f, &arch.Config{Arch: "llama"}); err == nil || !strings.Contains(err.Error(), "rope_freqs.weight has shape [16], want [8]") {
		t.Errorf("rope_freqs.weight [16]: error %v", err)
	}
	// qwen2 and qwen3 take no frequency factors (llama.cpp loads none).
	q2 := c
	q2.Arch = "qwen2"
	f = fileOf(Qwen2, q2)
	f.Shapes["rope_freqs.weight"] = []int{8}
	if err := Qwen2.ReadConfig(f, &arch.Config{Arch: "qwen2"}); err == nil || !strings.Contains(err.Error(), "tensor rope_freqs.weight is unsupported (qwen2") {
		t.Errorf("qwen2 with rope_freqs.weight: error %v", err)
	}
	// Tensors llama.cpp's llama graph takes and this one does not run.
	for _, name := range []string{"blk.0.attn_output.bias", "blk.0.ffn_down.bias", "blk.0.ffn_gate_inp.weight"} {
		f := fileOf(Llama, c)
		f.Shapes[name] = []int{64}
		if err := Llama.ReadConfig(f, &arch.Config{Arch: "llama"}); err == nil || !strings.Contains(err.Error(), "tensor "+name+" is unsupported") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// TestOnlyMistral3ReadsItsKeys: llama.cpp reads the YaRN betas, log
// multiplier and attention temperature for mistral3, not for the rest of
// the family, whose files keep its defaults whatever they say.
func TestOnlyMistral3ReadsItsKeys(t *testing.T) {
	c := arch.Config{Arch: "mistral3", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 96, ContextLen: 4096, RopeTheta: 1e6, NormEps: 1e-5,
		RopeScaling: arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 1024, YarnBetaFast: 16, YarnBetaSlow: 2, YarnLogMul: 1}, AttnTempScale: 0.1}
	f := fileOf(Mistral3, c)
	for k, v := range f.KV {
		f.KV["llama"+strings.TrimPrefix(k, "mistral3")] = v
	}
	got := arch.Config{Arch: "llama"}
	if err := Llama.ReadConfig(f, &got); err != nil {
		t.Fatal(err)
	}
	want := c
	want.Arch, want.AttnTempScale = "llama", 0
	want.RopeScaling.YarnBetaFast, want.RopeScaling.YarnBetaSlow, want.RopeScaling.YarnLogMul = 0, 0, 0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("llama (-want +got):\n%s", diff)
	}
}

// TestQwen3Tensors: qwen3 is llama's tensors (no biases) plus, per layer,
// the query and key head norms of HeadDim, F32.
func TestQwen3Tensors(t *testing.T) {
	c := arch.Config{Arch: "qwen3", VocabSize: 300, Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 96}
	llama, qwen3 := Llama.Tensors(c), Qwen3.Tensors(c)
	if got, want := len(qwen3), len(llama)+2*c.Layers; got != want {
		t.Fatalf("%d qwen3 tensors, want %d", got, want)
	}
	shapes := map[string][]int{}
	for _, s := range qwen3 {
		shapes[s.Name] = s.Shape
		if strings.HasSuffix(s.Name, "_norm.weight") && s.Matrix {
			t.Errorf("%s is a matrix; norms are F32", s.Name)
		}
	}
	for _, s := range llama {
		if diff := cmp.Diff(s.Shape, shapes[s.Name]); diff != "" {
			t.Errorf("%s (-llama +qwen3):\n%s", s.Name, diff)
		}
	}
	for i := range c.Layers {
		for _, n := range []string{"attn_q_norm", "attn_k_norm"} {
			name := fmt.Sprintf("blk.%d.%s.weight", i, n)
			if diff := cmp.Diff([]int{64}, shapes[name]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		}
	}
	// attn_q is [Dim, Heads·HeadDim] = [128, 256], not square.
	if diff := cmp.Diff([]int{128, 256}, shapes["blk.1.attn_q.weight"]); diff != "" {
		t.Errorf("attn_q (-want +got):\n%s", diff)
	}
}

// TestQwen3RefusesMissingHeadNorms: a qwen3 file without a layer's q or k
// norm (or with one not of the head dim) is refused, naming the tensor.
func TestQwen3RefusesMissingHeadNorms(t *testing.T) {
	c := arch.Config{Arch: "qwen3", VocabSize: 300, Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 96, ContextLen: 256, RopeTheta: 1e6, NormEps: 1e-6}
	for _, tc := range []struct {
		name  string
		shape []int
		want  string
	}{
		{"blk.0.attn_q_norm.weight", nil, "missing tensor blk.0.attn_q_norm.weight"},
		{"blk.1.attn_k_norm.weight", nil, "missing tensor blk.1.attn_k_norm.weight"},
		{"blk.1.attn_q_norm.weight", []int{32}, "tensor blk.1.attn_q_norm.weight has shape [32], want [64]"},
	} {
		f := fileOf(Qwen3, c)
		if tc.shape == nil {
			delete(f.Shapes, tc.name)
		} else {
			f.Shapes[tc.name] = tc.shape
		}
		got := arch.Config{Arch: "qwen3"}
		if err := Qwen3.ReadConfig(f, &got); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: error %v, want %q", tc.name, tc.shape, err, tc.want)
		}
	}
	// A qwen2 file has no head norms: under qwen3's name it is refused.
	q2 := c
	q2.Arch = "qwen2"
	f := fileOf(Qwen2, q2)
	for _, kv := range Qwen3.Metadata(c) {
		f.KV[kv.Key] = kv.Value
	}
	if err := Qwen3.ReadConfig(f, &arch.Config{Arch: "qwen3"}); err == nil || !strings.Contains(err.Error(), "attn_q_norm") {
		t.Errorf("qwen2 tensors read as qwen3: error %v", err)
	}
}

// TestQwen3MoE: the experts' tensors replace the dense MLP's, stacked in
// 3-D as llama.cpp loads them, and what qwen3moe's graph does not run (no
// expert counts, unnormalized weights, another gating, shared experts) is
// refused with the key's name.
func TestQwen3MoE(t *testing.T) {
	c := arch.Config{Arch: "qwen3moe", VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96, ContextLen: 256, RopeTheta: 1e6, NormEps: 1e-6,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 48}
	shapes := map[string][]int{}
	for _, s := range Qwen3MoE.Tensors(c) {
		shapes[s.Name] = s.Shape
	}
	for name, want := range map[string][]int{
		"blk.1.ffn_gate_inp.weight":  {64, 8},
		"blk.1.ffn_gate_exps.weight": {64, 48, 8},
		"blk.1.ffn_up_exps.weight":   {64, 48, 8},
		"blk.1.ffn_down_exps.weight": {48, 64, 8},
		"blk.1.attn_q_norm.weight":   {32},
		"blk.1.ffn_gate.weight":      nil,
	} {
		if diff := cmp.Diff(want, shapes[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	archtest.CheckRefused(t, Qwen3MoE, c, []archtest.KeyEdit{
		{"qwen3moe.expert_count", nil, "metadata qwen3moe.expert_count is missing"},
		{"qwen3moe.expert_used_count", uint32(9), "8 experts with 9 used"},
		{"qwen3moe.expert_weights_norm", false, "expert_weights_norm = false is unsupported"},
		{"qwen3moe.expert_gating_func", uint32(2), "expert_gating_func = 2 is unsupported"},
		{"qwen3moe.expert_shared_count", uint32(1), "expert_shared_count = 1 is unsupported"},
	})
	// Without expert_feed_forward_length, llama.cpp's default: FFN/used.
	f := fileOf(Qwen3MoE, c)
	delete(f.KV, "qwen3moe.expert_feed_forward_length")
	got := arch.Config{Arch: "qwen3moe"}
	if err := Qwen3MoE.ReadConfig(f, &got); err != nil || got.ExpertFFN != 48 {
		t.Errorf("expert ffn %d (%v), want 96/2", got.ExpertFFN, err)
	}
}
