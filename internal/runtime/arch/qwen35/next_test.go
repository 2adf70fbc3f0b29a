package qwen35

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/archtest"
)

// coderNext is Qwen3-Coder-Next's layout scaled down: three DeltaNet
// layers of four, 4 value heads over 2 key heads, NEOX RoPE over a
// quarter of each head, 8 experts (2 a token) beside a shared expert, a
// multi-token-prediction layer the file carries.
func coderNext() arch.Config {
	return arch.Config{
		Arch: "qwen3next", VocabSize: 300, Dim: 64, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, RopeDims: 8, FFN: 96, ContextLen: 4096,
		RopeTheta: 1e7, NormEps: 1e-6, NextNLayers: 1,
		LayerKinds: []arch.LayerKind{arch.Recurrent, arch.Recurrent, arch.Recurrent, arch.Full},
		Recurrent:  arch.RecurrentGeometry{ConvKernel: 4, StateSize: 16, KeyHeads: 2, ValueHeads: 4, Inner: 64},
		Experts:    8, ExpertsUsed: 2, ExpertFFN: 32, ExpertGating: arch.GatingSoftmax, ExpertWeightsNorm: true,
	}
}

func validateNext(c arch.Config) error {
	return Qwen3Next.(interface{ Validate(arch.Config) error }).Validate(c)
}

// TestQwen3NextReadsItsMetadata: ReadConfig reads back what Metadata and
// Tensors describe, without M-RoPE sections or an expert weights scale,
// a fused ssm_in where the tensors have it; block_count counts the nextn
// layer, Layers does not.
func TestQwen3NextReadsItsMetadata(t *testing.T) {
	fused := coderNext()
	fused.Recurrent.FusedQKVZ = true
	for _, want := range []arch.Config{coderNext(), fused} {
		if err := validateNext(want); err != nil {
			t.Fatal(err)
		}
		got := arch.Config{Arch: "qwen3next"}
		if err := Qwen3Next.ReadConfig(archtest.FileOf(Qwen3Next, want), &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
	f := archtest.FileOf(Qwen3Next, coderNext())
	for _, key := range []string{"qwen3next.rope.dimension_sections", "qwen3next.expert_weights_scale"} {
		if v, ok := f.KV[key]; ok {
			t.Errorf("Metadata writes %s = %v; llama.cpp's qwen3next reads none", key, v)
		}
	}
	if got := f.KV["qwen3next.block_count"]; got != uint32(5) {
		t.Errorf("block_count %v, want 5 (4 layers and the nextn one)", got)
	}
}

// TestQwen3NextTensors: a recurrent layer projects beta and alpha in one
// ssm_ba of two per value head, and its inputs through attn_qkv and
// attn_gate or, fused, one ssm_in; the attending layer has no DeltaNet's,
// every layer the experts and the shared expert.
func TestQwen3NextTensors(t *testing.T) {
	shapes := map[string][]int{}
	for _, s := range Qwen3Next.Tensors(coderNext()) {
		shapes[s.Name] = s.Shape
	}
	fused := coderNext()
	fused.Recurrent.FusedQKVZ = true
	for _, s := range Qwen3Next.Tensors(fused) {
		shapes["fused "+s.Name] = s.Shape
	}
	for name, want := range map[string][]int{
		"blk.0.ssm_ba.weight":              {64, 8},
		"blk.0.ssm_beta.weight":            nil,
		"blk.0.ssm_alpha.weight":           nil,
		"blk.0.attn_qkv.weight":            {64, 128},
		"blk.0.attn_gate.weight":           {64, 64},
		"blk.0.ssm_conv1d.weight":          {4, 128},
		"blk.2.ssm_out.weight":             {64, 64},
		"blk.3.ssm_ba.weight":              nil,
		"blk.3.attn_q.weight":              {64, 256},
		"blk.3.ffn_gate_inp_shexp.weight":  {64},
		"blk.3.ffn_up_exps.weight":         {64, 32, 8},
		"blk.4.attn_norm.weight":           nil,
		"blk.1.post_attention_norm.weight": {64},
		"blk.0.ssm_in.weight":              nil,
		"fused blk.0.ssm_in.weight":        {64, 192},
		"fused blk.0.attn_qkv.weight":      nil,
		"fused blk.0.attn_gate.weight":     nil,
		"fused blk.2.ssm_ba.weight":        {64, 8},
		"fused blk.3.ssm_in.weight":        nil,
	} {
		if diff := cmp.Diff(want, shapes[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestQwen3NextRefusesWhatItDoesNotRun: files and geometries the graph
// would not run as llama.cpp does are refused by name.
func TestQwen3NextRefusesWhatItDoesNotRun(t *testing.T) {
	for _, tc := range []struct {
		edit func(f archtest.File)
		want string
	}{
		{func(f archtest.File) { f.KV["qwen3next.expert_gating_func"] = uint32(2) }, "expert_gating_func = 2 is unsupported"},
		{func(f archtest.File) { delete(f.KV, "qwen3next.expert_count") }, "qwen3next.expert_count"},
		{func(f archtest.File) { delete(f.KV, "qwen3next.ssm.group_count") }, "qwen3next.ssm.group_count"},
		{func(f archtest.File) { f.KV["qwen3next.rope.scaling.type"] = "yarn" }, `rope scaling "yarn" is unsupported`},
		{func(f archtest.File) { f.KV["qwen3next.attention.recurrent_layers"] = true }, "attention.recurrent_layers"},
	} {
		f := archtest.FileOf(Qwen3Next, coderNext())
		tc.edit(f)
		if err := Qwen3Next.ReadConfig(f, &arch.Config{Arch: "qwen3next"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	for _, tc := range []struct {
		edit func(*arch.Config)
		want string
	}{
		{func(c *arch.Config) { c.RopeSections = [4]int{4} }, "NEOX RoPE: M-RoPE sections"},
		{func(c *arch.Config) { c.ExpertWeightsScale = 2.5 }, "scales no expert weights"},
		{func(c *arch.Config) { c.Experts, c.ExpertsUsed = 0, 0 }, "qwen3next needs experts"},
		{func(c *arch.Config) { c.LayerKinds[3] = arch.SlidingWindow }, "qwen3next needs its layer kinds"},
	} {
		c := coderNext()
		tc.edit(&c)
		if err := validateNext(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	// A fused ssm_in is qwen3next's alone.
	c := coderNext()
	c.Arch, c.Experts, c.ExpertsUsed, c.RopeSections, c.Recurrent.FusedQKVZ = "qwen35", 0, 0, [4]int{4}, true
	if err := Qwen35.(interface{ Validate(arch.Config) error }).Validate(c); err == nil || !strings.Contains(err.Error(), "no fused ssm_in") {
		t.Errorf("qwen35 with a fused ssm_in: error %v", err)
	}
}
