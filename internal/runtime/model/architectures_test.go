package model

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// TestLoadRefusesUnknownArchitecture: a file of an architecture the
// registry lacks fails to load with an error naming it, the ones this
// build runs and the path. (The file is a llama one with "llama" renamed
// to "gemma" throughout: its architecture and its metadata keys.)
func TestLoadRefusesUnknownArchitecture(t *testing.T) {
	good := ggufBytes(t, Random(smallConfig(), 1))
	p := writeFile(t, bytes.ReplaceAll(good, []byte("llama"), []byte("gemma")))
	_, err := Load(p, nil)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{`unsupported architecture "gemma" (supported: deepseek2, glm4moe, gpt-oss, llama, mistral3, qwen2, qwen3, qwen35, qwen35moe, qwen3moe, qwen3next)`, p} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestSpecsFollowTheArchitecture: every tensor the architecture lists has
// its slot in Weights, llama's and qwen2's all in the named fields, qwen3's
// head norms in Extra.
func TestSpecsFollowTheArchitecture(t *testing.T) {
	for _, c := range []Config{smallConfig(), func() Config {
		c := smallConfig()
		c.Arch, c.QKVBias, c.TiedEmbeddings = ArchQwen2, true, true
		return c
	}(), func() Config {
		c := smallConfig()
		c.Arch, c.HeadDim = ArchQwen3, 2*c.Dim/c.Heads
		return c
	}()} {
		c = c.WithDefaults()
		m := Random(c, 1)
		wantExtra := 0
		if c.Arch == ArchQwen3 {
			wantExtra = 2 * c.Layers // attn_q_norm, attn_k_norm
		}
		if len(m.Weights.Extra) != wantExtra {
			t.Errorf("%s: %d tensors outside the llama layout, want %d", c.Arch, len(m.Weights.Extra), wantExtra)
		}
		var w Weights
		if got, want := len(m.Weights.Tensors()), len(w.specs(c)); got != want {
			t.Errorf("%s: %d tensors, the architecture lists %d", c.Arch, got, want)
		}
	}
}

// TestLoadSkipsNextNLayers: a glm4moe file carries its multi-token
// prediction layer after the decoding ones (block_count counts it,
// nextn_predict_layers says how many); it loads, its tensors unread, as
// llama.cpp loads it when it does not predict ahead.
func TestLoadSkipsNextNLayers(t *testing.T) {
	c := Config{
		Arch: ArchGLM4MoE, VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, RopeDims: 16, FFN: 96, ContextLen: 256,
		RopeTheta: 1e6, NormEps: 1e-5, QKVBias: true, Experts: 4, ExpertsUsed: 2, ExpertFFN: 32, SharedExperts: 1, DenseLayers: 1,
		ExpertGating: arch.GatingSigmoid, ExpertWeightsNorm: true, ExpertWeightsScale: 1, NextNLayers: 1,
	}
	m := Random(c, 1)
	want := len(m.Weights.Tensors())
	for _, s := range []struct {
		name  string
		shape []int
	}{
		{"blk.2.attn_norm.weight", []int{64}},
		{"blk.2.ffn_gate_exps.weight", []int{64, 32, 4}},
		{"blk.2.nextn.eh_proj.weight", []int{128, 64}},
		{"blk.2.nextn.enorm.weight", []int{64}},
	} {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		m.Weights.Extra = append(m.Weights.Extra, f32Tensor(s.name, s.shape, make([]float32, n)))
	}
	out, err := Load(writeFile(t, ggufBytes(t, m)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if out.Config.Layers != 2 || out.Config.NextNLayers != 1 {
		t.Errorf("%d layers, %d nextn layers; want 2 and 1", out.Config.Layers, out.Config.NextNLayers)
	}
	if got := len(out.Weights.Tensors()); got != want {
		t.Errorf("%d tensors loaded, want the %d decoding ones", got, want)
	}
}

// TestHybridPatternRoundTrips: a hybrid model whose layers follow no
// full_attention_interval is written with attention.recurrent_layers, a
// GGUF array of booleans, and loads back with the same layer kinds.
func TestHybridPatternRoundTrips(t *testing.T) {
	c := Config{
		Arch: "qwen35", VocabSize: 300, Dim: 64, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96,
		RopeDims: 8, RopeSections: [4]int{4}, RopeTheta: 1e7, NormEps: 1e-6,
		LayerKinds: []arch.LayerKind{arch.Recurrent, arch.Full, arch.Recurrent, arch.Full},
		Recurrent:  arch.RecurrentGeometry{ConvKernel: 4, StateSize: 16, KeyHeads: 2, ValueHeads: 4, Inner: 64},
	}
	p := writeFile(t, ggufBytes(t, Random(c, 1)))
	m, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Config.LayerKinds; len(got) != 4 || got[0] != arch.Recurrent || got[1] != arch.Full || got[2] != arch.Recurrent || got[3] != arch.Full {
		t.Errorf("layer kinds %v, want recurrent, full, recurrent, full", got)
	}
}
