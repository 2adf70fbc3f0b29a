package gptoss

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// file is a GGUF file's metadata and tensor shapes as ReadConfig sees them.
type file struct {
	kv     map[string]any
	shapes map[string][]int
}

func lookup[T any](f file, key, what string) (T, bool, error) {
	var zero T
	v, ok := f.kv[key]
	if !ok {
		return zero, false, nil
	}
	x, isT := v.(T)
	if !isT {
		return zero, true, fmt.Errorf("metadata %s is not %s", key, what)
	}
	return x, true, nil
}

func (f file) String(key string) (string, bool, error) { return lookup[string](f, key, "a string") }
func (f file) Bool(key string) (bool, bool, error)     { return lookup[bool](f, key, "a bool") }

func (f file) Uint(key string) (uint64, bool, error) {
	u, ok, err := lookup[uint32](f, key, "an integer")
	return uint64(u), ok, err
}

func (f file) Float(key string) (float64, bool, error) {
	x, ok, err := lookup[float32](f, key, "a float")
	return float64(x), ok, err
}

func (f file) Shape(name string) []int { return f.shapes[name] }

func fileOf(c arch.Config) file {
	f := file{kv: map[string]any{}, shapes: map[string][]int{}}
	for _, kv := range GptOss.Metadata(c) {
		f.kv[kv.Key] = kv.Value
	}
	for _, s := range GptOss.Tensors(c) {
		f.shapes[s.Name] = s.Shape
	}
	return f
}

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
	if _, ok := fileOf(small()).kv["gpt-oss.attention.sliding_window_pattern"]; ok {
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
		edit func(f file)
		want string
	}{
		{func(f file) { f.kv["gpt-oss.rope.scaling.type"] = "longrope" }, `rope scaling "longrope" is unsupported`},
		{func(f file) { delete(f.kv, "gpt-oss.attention.sliding_window") }, "gpt-oss.attention.sliding_window is missing"},
		{func(f file) { f.kv["gpt-oss.rope.dimension_count"] = uint32(16) }, "gpt-oss.rope.dimension_count = 16"},
		{func(f file) { f.kv["gpt-oss.rope.freq_base_swa"] = float32(10000) }, "gpt-oss.rope.freq_base_swa"},
		{func(f file) { delete(f.kv, "gpt-oss.expert_count") }, "gpt-oss.expert_count is missing"},
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
