package qwen35

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/archtest"
)

// The registry Config.Validate looks the architectures up in (the model
// package's lines, which this package's tests do not import).
func init() { arch.Register(Qwen35, Qwen35MoE) }

// small is Qwen3.5's layout scaled down: 8 layers, every fourth attending,
// value heads twice the key heads, M-RoPE over a quarter of each head,
// one multi-token-prediction layer.
func small() arch.Config {
	return arch.Config{
		Arch: "qwen35", VocabSize: 300, Dim: 64, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96, ContextLen: 4096,
		RopeDims: 8, RopeSections: [4]int{2, 1, 1, 0}, RopeTheta: 1e7, NormEps: 1e-6, NextNLayers: 1,
		LayerKinds: LayerKinds(8, 4),
		Recurrent:  arch.RecurrentGeometry{ConvKernel: 4, StateSize: 16, KeyHeads: 2, ValueHeads: 4, Inner: 64},
	}
}

func moe() arch.Config {
	c := small()
	c.Arch, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.FFN = "qwen35moe", 8, 2, 32, 48
	c.ExpertGating, c.ExpertWeightsNorm = arch.GatingSoftmax, true
	return c
}

// TestReadConfigReadsMetadata: ReadConfig reads back what Metadata and
// Tensors describe, for both architectures; block_count counts the MTP
// layer, Layers does not.
func TestReadConfigReadsMetadata(t *testing.T) {
	for _, tc := range []struct {
		a    arch.Architecture
		want arch.Config
	}{{Qwen35, small()}, {Qwen35MoE, moe()}} {
		f := archtest.FileOf(tc.a, tc.want)
		got := arch.Config{Arch: tc.a.Name()}
		if err := tc.a.ReadConfig(f, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.a.Name(), diff)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s: %v", tc.a.Name(), err)
		}
		if b := f.KV[tc.a.Name()+".block_count"]; b != uint32(9) {
			t.Errorf("%s: block_count %v, want 9 (8 layers and the MTP one)", tc.a.Name(), b)
		}
	}
}

// TestLayerKinds: llama.cpp's pattern (layer i attends when i+1 is a
// multiple of the interval) and the geometry it implies.
func TestLayerKinds(t *testing.T) {
	c := small()
	var attending []int
	for i, k := range c.LayerKinds {
		if k != arch.Recurrent {
			attending = append(attending, i)
		}
	}
	if diff := cmp.Diff([]int{3, 7}, attending); diff != "" {
		t.Errorf("attending layers (-want +got):\n%s", diff)
	}
	if c.KVLayers() != 2 || c.RecurrentLayers() != 6 {
		t.Errorf("%d KV layers, %d recurrent, want 2 and 6", c.KVLayers(), c.RecurrentLayers())
	}
	// Per recurrent layer: a conv state of 3 × (2·2·16 + 64) and a
	// DeltaNet state of 16² × 4, in F32.
	if got, want := c.StateBytes(), int64(4*6*(3*128+16*16*4)); got != want {
		t.Errorf("state bytes %d, want %d", got, want)
	}
}

// TestExplicitLayerPattern: a pattern no interval describes is written
// and read as attention.recurrent_layers (what converters write from a
// model's layer_types; the MTP layer's entry false), and the file's
// pattern wins over full_attention_interval, as in llama.cpp.
func TestExplicitLayerPattern(t *testing.T) {
	want := small()
	want.LayerKinds = []arch.LayerKind{arch.Recurrent, arch.Full, arch.Recurrent, arch.Recurrent, arch.Full, arch.Recurrent, arch.Recurrent, arch.Full}
	f := archtest.FileOf(Qwen35, want)
	if _, ok := f.KV["qwen35.full_attention_interval"]; ok {
		t.Error("full_attention_interval written for a pattern it does not describe")
	}
	if got := f.KV["qwen35.attention.recurrent_layers"]; !cmp.Equal(got, []bool{true, false, true, true, false, true, true, false, false}) {
		t.Errorf("attention.recurrent_layers %v", got)
	}
	f.KV["qwen35.full_attention_interval"] = uint32(4) // the pattern wins
	got := arch.Config{Arch: "qwen35"}
	if err := Qwen35.ReadConfig(f, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestTensors: an attending layer has a doubled query projection (query
// and gate), head norms and no DeltaNet; a recurrent one the DeltaNet's
// tensors, its kernel F32; the MoE's shared expert has its gate row.
func TestTensors(t *testing.T) {
	specs := map[string]arch.TensorSpec{}
	for _, s := range Qwen35MoE.Tensors(moe()) {
		specs[s.Name] = s
	}
	for name, want := range map[string][]int{
		"blk.3.attn_q.weight":              {64, 2 * 4 * 32},
		"blk.3.attn_q_norm.weight":         {32},
		"blk.0.attn_qkv.weight":            {64, 128},
		"blk.0.ssm_conv1d.weight":          {4, 128},
		"blk.0.ssm_a":                      {4},
		"blk.0.ssm_out.weight":             {64, 64},
		"blk.0.ffn_gate_inp_shexp.weight":  {64},
		"blk.0.ffn_gate_exps.weight":       {64, 32, 8},
		"blk.7.post_attention_norm.weight": {64},
	} {
		if s, ok := specs[name]; !ok || !cmp.Equal(s.Shape, want) {
			t.Errorf("%s: %v (listed %v), want shape %v", name, s.Shape, ok, want)
		}
	}
	for _, absent := range []string{"blk.3.attn_qkv.weight", "blk.0.attn_q.weight", "blk.8.attn_norm.weight", "blk.0.ffn_gate.weight"} {
		if _, ok := specs[absent]; ok {
			t.Errorf("%s listed", absent)
		}
	}
	if specs["blk.0.ssm_conv1d.weight"].Matrix {
		t.Error("ssm_conv1d is listed as a matrix: ggml's ssm_conv takes F32 only")
	}
}

// TestReadConfigRefuses: what the forward pass does not run is refused,
// naming it.
func TestReadConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(f archtest.File)
		want string
	}{
		{"no sections", func(f archtest.File) { delete(f.KV, "qwen35.rope.dimension_sections") }, "rope.dimension_sections is required"},
		{"pattern of integers", func(f archtest.File) { f.KV["qwen35.attention.recurrent_layers"] = []int32{1, 1, 1, 0} }, "attention.recurrent_layers"},
		{"pattern too short", func(f archtest.File) { f.KV["qwen35.attention.recurrent_layers"] = []bool{true, false} }, "2 entries for 8 layers"},
		{"rope scaling", func(f archtest.File) { f.KV["qwen35.rope.scaling.type"] = "yarn" }, `rope scaling "yarn"`},
		{"value heads", func(f archtest.File) { f.KV["qwen35.ssm.time_step_rank"] = uint32(3) }, "value heads"},
		{"no conv kernel", func(f archtest.File) { delete(f.KV, "qwen35.ssm.conv_kernel") }, "ssm.conv_kernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := archtest.FileOf(Qwen35, small())
			tc.edit(f)
			c := arch.Config{Arch: "qwen35"}
			err := Qwen35.ReadConfig(f, &c)
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
