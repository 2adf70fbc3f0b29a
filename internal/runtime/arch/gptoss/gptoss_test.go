package gptoss

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/archtest"
)

// fileOf is what the GGUF writer stores for c: Metadata and Tensors.
func fileOf(c arch.Config) archtest.File { return archtest.FileOf(GptOss, c) }

// small is gpt-oss-20b's layout scaled down.
func small() arch.Config {
	return arch.Config{
		Arch: "gpt-oss", VocabSize: 300, Dim: 64, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 32, ContextLen: 4096,
		RopeTheta: 150000, NormEps: 1e-5, QKVBias: true, SlidingWindow: 16,
		RopeScaling: arch.RopeScaling{Type: "yarn", Factor: 32, OrigContext: 128},
		LayerKinds:  []arch.LayerKind{arch.SlidingWindow, arch.Full, arch.SlidingWindow},
		Experts:     8, ExpertsUsed: 2, ExpertFFN: 32, ExpertGating: arch.GatingSoftmaxWeight,
	}
}

// TestReadConfigReadsMetadata: ReadConfig reads back what Metadata and
// Tensors describe, the default pattern (even layers slide) unwritten,
// another pattern written and read.
func TestReadConfigReadsMetadata(t *testing.T) {
	allSlide := small()
	allSlide.LayerKinds, allSlide.RopeScaling = LayerKinds(3, 0), arch.RopeScaling{}
	for _, want := range []arch.Config{small(), allSlide} {
		f := fileOf(want)
		got := arch.Config{Arch: "gpt-oss"}
		if err := GptOss.ReadConfig(f, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := GptOss.(arch.Validator).Validate(got); err != nil {
			t.Errorf("Validate: %v", err)
		}
	}
	if _, ok := fileOf(small()).KV["gpt-oss.attention.sliding_window_pattern"]; ok {
		t.Error("the default pattern is written")
	}
}

// TestLayerKinds: llama.cpp's set_swa_pattern(n, dense_first false).
func TestLayerKinds(t *testing.T) {
	S, F := arch.SlidingWindow, arch.Full
	for _, c := range []struct {
		layers, pattern int
		want            []arch.LayerKind
	}{
		{4, 2, []arch.LayerKind{S, F, S, F}},
		{5, 3, []arch.LayerKind{S, S, F, S, S}},
		{2, 0, []arch.LayerKind{S, S}},
		{2, 1, []arch.LayerKind{F, F}},
	} {
		if diff := cmp.Diff(c.want, LayerKinds(c.layers, c.pattern)); diff != "" {
			t.Errorf("%d layers, pattern %d: (-want +got):\n%s", c.layers, c.pattern, diff)
		}
	}
}

// TestReadConfigRefuses: what the forward pass does not implement, or a
// file lacking what it needs, fails naming the key.
func TestReadConfigRefuses(t *testing.T) {
	for _, c := range []struct {
		edit func(f archtest.File)
		want string
	}{
		{func(f archtest.File) { f.KV["gpt-oss.rope.scaling.type"] = "longrope" }, `rope scaling "longrope" is unsupported`},
		{func(f archtest.File) { delete(f.KV, "gpt-oss.attention.sliding_window") }, "gpt-oss.attention.sliding_window is missing"},
		{func(f archtest.File) { f.KV["gpt-oss.rope.dimension_count"] = uint32(16) }, "gpt-oss.rope.dimension_count = 16"},
		{func(f archtest.File) { f.KV["gpt-oss.rope.freq_base_swa"] = float32(10000) }, "gpt-oss.rope.freq_base_swa"},
		{func(f archtest.File) { delete(f.KV, "gpt-oss.expert_count") }, "gpt-oss.expert_count is missing"},
	} {
		f := fileOf(small())
		c.edit(f)
		got := arch.Config{Arch: "gpt-oss"}
		err := GptOss.ReadConfig(f, &got)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one naming %q", err, c.want)
		}
	}
	c := small()
	c.LayerKinds = nil
	if err := GptOss.(arch.Validator).Validate(c); err == nil || !strings.Contains(err.Error(), "LayerKinds") {
		t.Errorf("Validate without layer kinds: %v", err)
	}
}

// TestTensors: biases of every projection and expert, sinks per head, an
// untied head.
func TestTensors(t *testing.T) {
	shapes := map[string][]int{}
	for _, s := range GptOss.Tensors(small()) {
		shapes[s.Name] = s.Shape
		if (strings.HasSuffix(s.Name, ".bias") || strings.Contains(s.Name, "sinks")) && s.Matrix {
			t.Errorf("%s is a matrix; biases and sinks are F32", s.Name)
		}
	}
	for name, want := range map[string][]int{
		"blk.0.attn_sinks.weight":    {4},
		"blk.1.attn_output.bias":     {64},
		"blk.2.ffn_gate_inp.bias":    {8},
		"blk.2.ffn_up_exps.bias":     {32, 8},
		"blk.2.ffn_down_exps.bias":   {64, 8},
		"blk.2.ffn_down_exps.weight": {32, 64, 8},
		"output.weight":              {64, 300},
	} {
		if diff := cmp.Diff(want, shapes[name]); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", name, diff)
		}
	}
}
