package deepseek2

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/archtest"
)

// fileOf is what the GGUF writer stores for c: Metadata and Tensors.
func fileOf(c arch.Config) archtest.File { return archtest.FileOf(DeepSeek2, c) }

// flash is GLM-4.7-Flash's layout scaled down: queries through a low
// rank, a latent of 64 and 32 rotated dimensions, a leading dense layer,
// sigmoid routing with a selection bias, a shared expert, a nextn layer.
func flash() arch.Config {
	return arch.Config{
		Arch: "deepseek2", VocabSize: 300, Dim: 64, Layers: 3, Heads: 4, KVHeads: 1, HeadDim: 96, RopeDims: 32, FFN: 96, ContextLen: 4096,
		RopeTheta: 1e6, NormEps: 1e-5,
		MLA:     arch.MLA{QRank: 48, KVRank: 64, KeyLength: 80, ValueLength: 40},
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 32, SharedExperts: 1, DenseLayers: 1, ExpertSelectionBias: true,
		ExpertGating: arch.GatingSigmoid, ExpertWeightsNorm: true, ExpertWeightsScale: 1.8, NextNLayers: 1,
	}
}

// v3 is DeepSeek-V3's: flash's with grouped expert selection, 4 groups of
// 2 experts of which a token chooses from the best 2.
func v3() arch.Config {
	c := flash()
	c.ExpertGroups, c.ExpertGroupsUsed = 4, 2
	return c
}

// lite is DeepSeek-V2-Lite's: queries projected directly, softmax routing
// without a selection bias, YaRN with its log multiplier, a tied head.
func lite() arch.Config {
	c := flash()
	c.MLA.QRank, c.ExpertSelectionBias, c.ExpertGating, c.ExpertWeightsNorm, c.NextNLayers, c.TiedEmbeddings = 0, false, arch.GatingSoftmax, false, 0, true
	c.RopeScaling = arch.RopeScaling{Type: "yarn", Factor: 40, OrigContext: 4096, YarnLogMul: 0.0707}
	return c
}

// TestReadConfigReadsMetadata: ReadConfig reads back what Metadata and
// Tensors describe; block_count counts the nextn layer, Layers does not;
// attention.key_length and value_length are the latent's.
func TestReadConfigReadsMetadata(t *testing.T) {
	for _, want := range []arch.Config{flash(), lite(), v3()} {
		f := fileOf(want)
		got := arch.Config{Arch: "deepseek2"}
		if err := DeepSeek2.ReadConfig(f, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
	f := fileOf(flash())
	for key, want := range map[string]any{
		"deepseek2.block_count": uint32(4), "deepseek2.attention.key_length": uint32(96), "deepseek2.attention.value_length": uint32(64),
		"deepseek2.attention.head_count_kv": uint32(1), "deepseek2.attention.key_length_mla": uint32(80),
	} {
		if got := f.KV[key]; got != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	// Without expert_gating_func: llama.cpp's softmax, but sigmoid in
	// GLM-4.7-Flash's shape (47 layers, a vocabulary of 154,880).
	for _, tc := range []struct {
		layers, vocab int
		want          arch.Gating
	}{{3, 300, arch.GatingSoftmax}, {47, 154880, arch.GatingSigmoid}} {
		c := flash()
		c.Layers, c.VocabSize = tc.layers, tc.vocab
		f := fileOf(c)
		delete(f.KV, "deepseek2.expert_gating_func")
		got := arch.Config{Arch: "deepseek2"}
		if err := DeepSeek2.ReadConfig(f, &got); err != nil || got.ExpertGating != tc.want {
			t.Errorf("%d layers, vocab %d: gating %v (%v), want %v", tc.layers, tc.vocab, got.ExpertGating, err, tc.want)
		}
	}
}

// TestTensors: llama.cpp's load_arch_tensors for an MLA file: the
// queries' low rank (or attn_q), the latent's projection and norm, the
// per-head attn_k_b [nope, rank, heads] and attn_v_b [rank, value,
// heads], the output from heads·value; the dense layer's MLP, the others'
// router, selection bias, experts and shared expert; no nextn layer.
func TestTensors(t *testing.T) {
	shapes := func(c arch.Config) map[string][]int {
		m := map[string][]int{}
		for _, s := range DeepSeek2.Tensors(c) {
			m[s.Name] = s.Shape
			if s.Matrix != (len(s.Shape) > 1) {
				t.Errorf("%s %v: matrix %t", s.Name, s.Shape, s.Matrix)
			}
		}
		return m
	}
	for _, tc := range []struct {
		c    arch.Config
		want map[string][]int
	}{
		{flash(), map[string][]int{
			"blk.0.attn_q_a.weight":       {64, 48},
			"blk.0.attn_q_a_norm.weight":  {48},
			"blk.0.attn_q_b.weight":       {48, 4 * 80},
			"blk.0.attn_q.weight":         nil,
			"blk.0.attn_kv_a_mqa.weight":  {64, 64 + 32},
			"blk.0.attn_kv_a_norm.weight": {64},
			"blk.0.attn_k_b.weight":       {48, 64, 4},
			"blk.0.attn_v_b.weight":       {64, 40, 4},
			"blk.0.attn_kv_b.weight":      nil,
			"blk.0.attn_output.weight":    {4 * 40, 64},
			"blk.0.ffn_norm.weight":       {64},
			"blk.0.ffn_gate.weight":       {64, 96},
			"blk.0.ffn_gate_inp.weight":   nil,
			"blk.1.ffn_gate_inp.weight":   {64, 8},
			"blk.1.exp_probs_b.bias":      {8},
			"blk.2.ffn_up_exps.weight":    {64, 32, 8},
			"blk.2.ffn_down_exps.weight":  {32, 64, 8},
			"blk.2.ffn_down_shexp.weight": {32, 64},
			"blk.3.attn_norm.weight":      nil,
			"output.weight":               {64, 300},
		}},
		{lite(), map[string][]int{
			"blk.0.attn_q.weight":    {64, 4 * 80},
			"blk.0.attn_q_a.weight":  nil,
			"blk.1.exp_probs_b.bias": nil,
			"output.weight":          nil,
		}},
	} {
		got := shapes(tc.c)
		for name, want := range tc.want {
			if diff := cmp.Diff(want, got[name]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		}
	}
}

// TestReadConfigRefusesWhatItDoesNotRun: what llama.cpp's deepseek2 graph
// does otherwise (the older files without the MLA keys, grouped expert
// selection, the attention temperature), or what does not fit the latent
// cache, is refused by name.
func TestReadConfigRefusesWhatItDoesNotRun(t *testing.T) {
	archtest.CheckRefused(t, DeepSeek2, v3(), []archtest.KeyEdit{
		{"deepseek2.attention.kv_lora_rank", nil, "metadata deepseek2.attention.kv_lora_rank is missing"},
		{"deepseek2.attention.key_length_mla", nil, "without attention.key_length_mla"},
		{"deepseek2.attention.value_length_mla", nil, "without attention.key_length_mla"},
		{"deepseek2.attention.head_count_kv", uint32(4), "head_count_kv 4"},
		{"deepseek2.attention.head_count_kv", nil, "head_count_kv 4"},
		{"deepseek2.attention.key_length", uint32(128), "attention.key_length 128"},
		{"deepseek2.attention.value_length", uint32(96), "attention.value_length 96"},
		{"deepseek2.attention.q_lora_rank", uint32(0), "q_lora_rank 0 but the file has attn_q_a"},
		{"deepseek2.expert_shared_count", nil, "metadata deepseek2.expert_shared_count is missing"},
		{"deepseek2.expert_gating_func", uint32(3), "expert_gating_func = 3 is unsupported"},
		{"deepseek2.expert_group_count", uint32(8), "grouped expert selection: 8 groups, 2 used, of 8 experts"},
		{"deepseek2.expert_group_used_count", uint32(4), "grouped expert selection: 4 groups, 4 used"},
		{"deepseek2.attention.temperature_scale", float32(0.1), "attention.temperature_scale"},
		{"deepseek2.rope.dimension_sections", "x", "multimodal RoPE"},
		{"deepseek2.rope.scaling.type", "longrope", `rope scaling "longrope" is unsupported`},
		{"deepseek2.nextn_predict_layers", uint32(4), "4 next-token prediction layers of 4 blocks"},
	})
	archtest.CheckInvalid(t, DeepSeek2, flash(), []archtest.ConfigEdit{
		{func(c *arch.Config) { c.Experts, c.ExpertsUsed = 0, 0 }, "deepseek2 needs experts"},
		{func(c *arch.Config) { c.SharedExperts = 0 }, "deepseek2 needs shared experts"},
		{func(c *arch.Config) { c.MLA.KVRank = 0 }, "kv_lora_rank 0"},
		{func(c *arch.Config) { c.MLA.KeyLength = 32 }, "key length 32"},
		{func(c *arch.Config) { c.HeadDim = 64 }, "head dim 64"},
		{func(c *arch.Config) { c.KVHeads = 4 }, "kv heads 4"},
		{func(c *arch.Config) { c.ExpertGroups, c.ExpertGroupsUsed = 3, 1 }, "grouped expert selection: 3 groups"},
	})
}

// TestAttentionScale: without YaRN, kq_scale is 1/√key_length_mla and the
// rotation unscaled; with DeepSeek-V2's YaRN (factor 40, a file's log
// multiplier 0.0707, mscale_all_dim 0.707), the rotation's magnitude is
// ggml's own cancelled and kq_scale carries (1+0.1·0.707·ln 40)² instead,
// as llama.cpp's deepseek2 graph pre-scales it.
func TestAttentionScale(t *testing.T) {
	p, kq := attention(flash())
	if p.AttnFactor != 1 || p.ExtFactor != 0 || p.Mode != arch.RopeNormal || p.Dims != 32 {
		t.Errorf("rope %+v, want unscaled NORM over 32 dims", p)
	}
	if want := 1 / math.Sqrt(80); math.Abs(float64(kq)-want) > 1e-7 {
		t.Errorf("kq_scale %g, want %g", kq, want)
	}
	p, kq = attention(lite())
	ln := math.Log(40)
	if want := 1 / (1 + 0.1*ln); p.ExtFactor != 1 || math.Abs(float64(p.AttnFactor)-want) > 1e-6 {
		t.Errorf("rope %+v, want YaRN with attention factor %g", p, want)
	}
	m := 1 + 0.1*0.707*ln
	if want := m * m / math.Sqrt(80); math.Abs(float64(kq)-want) > 1e-6 {
		t.Errorf("kq_scale %g, want %g", kq, want)
	}
}
