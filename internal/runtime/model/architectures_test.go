package model

import (
	"bytes"
	"strings"
	"testing"
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
	for _, want := range []string{`unsupported architecture "gemma" (supported: llama, mistral3, qwen2, qwen3)`, p} {
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
