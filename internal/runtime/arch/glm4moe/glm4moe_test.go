package glm4moe

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/archtest"
)

// fileOf is what the GGUF writer stores for c: Metadata and Tensors.
func fileOf(c arch.Config) archtest.File { return archtest.FileOf(GLM4MoE, c) }

// air is GLM-4.5-Air's layout scaled down: a leading dense layer, q/k/v
// biases, RoPE over half of each head, one shared expert, a nextn layer.
func air() arch.Config {
	return arch.Config{
		Arch: "glm4moe", VocabSize: 300, Dim: 64, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, RopeDims: 16, FFN: 96, ContextLen: 4096,
		RopeTheta: 1e6, NormEps: 1e-5, QKVBias: true,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 32, SharedExperts: 1, DenseLayers: 1,
		ExpertGating: arch.GatingSigmoid, ExpertWeightsNorm: true, ExpertWeightsScale: 1, NextNLayers: 1,
	}
}

// TestReadConfigReadsMetadata: ReadConfig reads back what Metadata and
// Tensors describe; block_count counts the nextn layer, Layers does not.
func TestReadConfigReadsMetadata(t *testing.T) {
	qkNorm := air()
	qkNorm.QKNorm, qkNorm.QKVBias, qkNorm.RopeDims, qkNorm.NextNLayers, qkNorm.TiedEmbeddings = true, false, 0, 0, true
	for _, want := range []arch.Config{air(), qkNorm} {
		f := fileOf(want)
		got := arch.Config{Arch: "glm4moe"}
		if err := GLM4MoE.ReadConfig(f, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
	if got := fileOf(air()).KV["glm4moe.block_count"]; got != uint32(4) {
		t.Errorf("block_count %v, want 4 (3 layers and the nextn one)", got)
	}
	// Without expert_gating_func: sigmoid, llama.cpp's default.
	f := fileOf(air())
	delete(f.KV, "glm4moe.expert_gating_func")
	got := arch.Config{Arch: "glm4moe"}
	if err := GLM4MoE.ReadConfig(f, &got); err != nil || got.ExpertGating != arch.GatingSigmoid {
		t.Errorf("gating %v (%v), want sigmoid", got.ExpertGating, err)
	}
}

// TestTensors: the dense layer has ffn_{gate,up,down}, the others the
// router, its selection bias, the stacked experts and the shared expert;
// every layer a post-attention norm instead of ffn_norm; the nextn layer
// none.
func TestTensors(t *testing.T) {
	c := air()
	shapes := map[string][]int{}
	for _, s := range GLM4MoE.Tensors(c) {
		shapes[s.Name] = s.Shape
		if strings.HasSuffix(s.Name, ".bias") && s.Matrix {
			t.Errorf("%s is a matrix; biases are F32", s.Name)
		}
	}
	for name, want := range map[string][]int{
		"blk.0.ffn_gate.weight":            {64, 96},
		"blk.0.ffn_gate_inp.weight":        nil,
		"blk.1.ffn_gate.weight":            nil,
		"blk.1.ffn_gate_inp.weight":        {64, 8},
		"blk.1.exp_probs_b.bias":           {8},
		"blk.2.ffn_up_exps.weight":         {64, 32, 8},
		"blk.2.ffn_down_exps.weight":       {32, 64, 8},
		"blk.2.ffn_down_shexp.weight":      {32, 64},
		"blk.2.post_attention_norm.weight": {64},
		"blk.2.ffn_norm.weight":            nil,
		"blk.1.attn_q.bias":                {128},
		"blk.1.attn_q_norm.weight":         nil,
		"blk.3.attn_norm.weight":           nil,
		"output.weight":                    {64, 300},
	} {
		if diff := cmp.Diff(want, shapes[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestReadConfigRefusesWhatItDoesNotRun: what llama.cpp's glm4moe graph
// does otherwise, or this one does not implement, is refused by name.
func TestReadConfigRefusesWhatItDoesNotRun(t *testing.T) {
	archtest.CheckRefused(t, GLM4MoE, air(), []archtest.KeyEdit{
		{"glm4moe.expert_shared_count", nil, "metadata glm4moe.expert_shared_count is missing"},
		{"glm4moe.expert_feed_forward_length", nil, "metadata glm4moe.expert_feed_forward_length is missing"},
		{"glm4moe.attention.layer_norm_rms_epsilon", nil, "metadata glm4moe.attention.layer_norm_rms_epsilon is missing"},
		{"glm4moe.expert_gating_func", uint32(3), "expert_gating_func = 3 is unsupported"},
		{"glm4moe.expert_group_count", uint32(4), "grouped expert selection is unsupported"},
		{"glm4moe.rope.dimension_sections", []int32{8, 12, 12, 0}, "multimodal RoPE"},
		{"glm4moe.rope.dimension_count", uint32(15), "rope dimension count 15"},
		{"glm4moe.rope.scaling.type", "yarn", `rope scaling "yarn" is unsupported`},
		{"glm4moe.attention.value_length", uint32(64), "value length 64 differs"},
		{"glm4moe.nextn_predict_layers", uint32(4), "4 next-token prediction layers of 4 blocks"},
	})
	archtest.CheckInvalid(t, GLM4MoE, air(), []archtest.ConfigEdit{
		{func(c *arch.Config) { c.Experts, c.ExpertsUsed = 0, 0 }, "glm4moe needs experts"},
		{func(c *arch.Config) { c.SharedExperts = 0 }, "glm4moe needs shared experts"},
		{func(c *arch.Config) { c.RopeDims = 33 }, "rope dims 33"},
	})
}
