package cpu

import (
	"strings"
	"sync"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/llama"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// otherArch is an architecture the registry knows and this executor does
// not run: qwen2's tensors under another name.
type otherArch struct{ arch.Architecture }

func (otherArch) Name() string { return "cpu-test-arch" }

var registerOther sync.Once

// TestRefusesOtherArchitectures: the pure-Go executor runs llama and qwen2
// only; another registered architecture is refused with an error naming it
// and the executor that runs it.
func TestRefusesOtherArchitectures(t *testing.T) {
	registerOther.Do(func() { arch.Register(otherArch{llama.Qwen2}) })
	m := model.Random(model.Config{Arch: "cpu-test-arch", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, FFN: 64}, 1)
	e, err := New(m, 8, testBlockSize, Options{Threads: 1})
	if err == nil {
		e.Close()
		t.Fatal("New ran another architecture")
	}
	for _, want := range []string{`architecture "cpu-test-arch"`, "--executor ggml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	for _, name := range []string{model.ArchLlama, model.ArchQwen2} {
		if !Runs(name) {
			t.Errorf("Runs(%q) = false", name)
		}
	}
	// qwen3 (a variant of the llama package: head norms), qwen3moe (qwen3
	// with experts), glm4moe, gpt-oss and deepseek2 are ggml's alone.
	for _, c := range []model.Config{
		{Arch: model.ArchQwen3, VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64},
		{Arch: model.ArchQwen3MoE, VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64, Experts: 4, ExpertsUsed: 2, ExpertFFN: 32},
		{Arch: model.ArchGLM4MoE, VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64, Experts: 4, ExpertsUsed: 2, ExpertFFN: 32, SharedExperts: 1, DenseLayers: 1},
		{Arch: model.ArchGptOss, VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 32, QKVBias: true, Experts: 4, ExpertsUsed: 2, ExpertFFN: 32,
			SlidingWindow: 16, LayerKinds: []arch.LayerKind{arch.SlidingWindow, arch.Full}},
		{Arch: model.ArchDeepSeek2, VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 1, HeadDim: 48, RopeDims: 16, FFN: 64, Experts: 4, ExpertsUsed: 2, ExpertFFN: 32, SharedExperts: 1, DenseLayers: 1,
			MLA: arch.MLA{KVRank: 32, KeyLength: 48, ValueLength: 32}},
	} {
		m := model.Random(c, 1)
		if e, err := New(m, 8, testBlockSize, Options{Threads: 1}); err == nil {
			e.Close()
			t.Errorf("New ran %s", c.Arch)
		} else if !strings.Contains(err.Error(), `architecture "`+c.Arch+`"`) || !strings.Contains(err.Error(), "--executor ggml") {
			t.Errorf("%s: error %q lacks the architecture or --executor ggml", c.Arch, err)
		}
	}
}

// TestRefusesRopeItDoesNotRun: the kernels rotate whole heads by unscaled
// angles; a llama model with linear or YaRN scaling, a model's own
// attention factor or an attention temperature, and mistral3, are refused with an error naming the scaling and the
// executor that runs it (partial RoPE is refused by the llama family's
// ReadConfig before an executor sees it, and here too).
func TestRefusesRopeItDoesNotRun(t *testing.T) {
	base := model.Config{Arch: model.ArchLlama, VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, FFN: 64}
	for _, tc := range []struct {
		edit func(*model.Config)
		want string
	}{
		{func(c *model.Config) { c.RopeScaling = arch.RopeScaling{Type: "linear", Factor: 2} }, `rope scaling "linear" (factor 2`},
		{func(c *model.Config) { c.RopeScaling = arch.RopeScaling{Factor: 2} }, `rope scaling "linear" (factor 2`},
		{func(c *model.Config) { c.RopeScaling = arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 64} }, `rope scaling "yarn" (factor 4`},
		{func(c *model.Config) { c.RopeScaling = arch.RopeScaling{AttnFactor: 0.5} }, "attention factor 0.5"},
		{func(c *model.Config) { c.RopeDims = 8 }, "partial rotary embeddings (8 of 16 dimensions)"},
		{func(c *model.Config) { c.AttnTempScale = 0.1 }, "attention temperature scale 0.1"},
		{func(c *model.Config) { c.Arch = "mistral3" }, `architecture "mistral3"`},
	} {
		c := base
		tc.edit(&c)
		e, err := New(model.Random(c, 1), 8, testBlockSize, Options{Threads: 1})
		if err == nil {
			e.Close()
			t.Errorf("%+v: New ran it", c.RopeScaling)
			continue
		}
		for _, want := range []string{tc.want, "--executor ggml"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	}
	// "none" with a factor scales nothing (llama.cpp ignores the factor).
	c := base
	c.RopeScaling = arch.RopeScaling{Type: "none", Factor: 2}
	e, err := New(model.Random(c, 1), 8, testBlockSize, Options{Threads: 1})
	if err != nil {
		t.Fatalf("rope scaling none: %v", err)
	}
	e.Close()
}
