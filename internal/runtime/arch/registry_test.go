package arch_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	_ "github.com/kvpilot/kvpilot/internal/runtime/model" // the registry's lines
)

func TestRegistryNamesTheArchitectures(t *testing.T) {
	if diff := cmp.Diff([]string{"deepseek2", "glm4moe", "gpt-oss", "llama", "mistral3", "qwen2", "qwen3", "qwen35", "qwen35moe", "qwen3moe", "qwen3next"}, arch.Names()); diff != "" {
		t.Errorf("registered architectures (-want +got):\n%s", diff)
	}
	for _, name := range arch.Names() {
		a, err := arch.Lookup(name)
		if err != nil || a.Name() != name {
			t.Errorf("Lookup(%q) = %v, %v", name, a, err)
		}
	}
}

// TestRegistryRefusesUnknownArchitecture: the error names the architecture
// asked for and every one this build runs.
func TestRegistryRefusesUnknownArchitecture(t *testing.T) {
	for _, name := range []string{"mamba", "", "LLAMA"} {
		a, err := arch.Lookup(name)
		if err == nil {
			t.Fatalf("Lookup(%q) = %v, want an error", name, a)
		}
		for _, want := range []string{`unsupported architecture "` + name + `"`, "supported: deepseek2, glm4moe, gpt-oss, llama, mistral3, qwen2, qwen3, qwen35, qwen35moe, qwen3moe, qwen3next"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Lookup(%q): %q lacks %q", name, err, want)
			}
		}
		if err := (arch.Config{Arch: name}).Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Config{Arch: %q}.Validate() = %v", name, err)
		}
	}
}

// TestNumParamsCountsTheTensors: a config's parameter count is its
// architecture's tensors', a tied head counted once.
func TestNumParamsCountsTheTensors(t *testing.T) {
	c := arch.Config{Arch: "qwen2", VocabSize: 10, Dim: 4, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 2, FFN: 6, QKVBias: true, TiedEmbeddings: true}
	// embedding 40, output norm 4; per layer: norms 8, q 16, k and v 16, o 16, MLP 72, biases 8.
	if got, want := c.NumParams(), int64(40+4+2*(8+16+16+16+72+8)); got != want {
		t.Errorf("NumParams = %d, want %d", got, want)
	}
}
