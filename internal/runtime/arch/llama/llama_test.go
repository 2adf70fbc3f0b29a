package llama

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

func (f file) String(key string) (string, bool, error) {
	v, ok := f.kv[key]
	if !ok {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", true, fmt.Errorf("metadata %s is not a string", key)
	}
	return s, true, nil
}

func (f file) Uint(key string) (uint64, bool, error) {
	v, ok := f.kv[key]
	if !ok {
		return 0, false, nil
	}
	u, isUint := v.(uint32)
	if !isUint {
		return 0, true, fmt.Errorf("metadata %s is not an integer", key)
	}
	return uint64(u), true, nil
}

func (f file) Float(key string) (float64, bool, error) {
	v, ok := f.kv[key]
	if !ok {
		return 0, false, nil
	}
	x, isFloat := v.(float32)
	if !isFloat {
		return 0, true, fmt.Errorf("metadata %s is not a float", key)
	}
	return float64(x), true, nil
}

func (f file) Shape(name string) []int { return f.shapes[name] }

// fileOf is what the GGUF writer stores for c: Metadata and Tensors.
func fileOf(a arch.Architecture, c arch.Config) file {
	f := file{kv: map[string]any{}, shapes: map[string][]int{}}
	for _, kv := range a.Metadata(c) {
		f.kv[kv.Key] = kv.Value
	}
	for _, s := range a.Tensors(c) {
		f.shapes[s.Name] = s.Shape
	}
	return f
}

// TestReadConfigReadsMetadata: ReadConfig reads back what Metadata and
// Tensors describe, for both variants.
func TestReadConfigReadsMetadata(t *testing.T) {
	for _, want := range []arch.Config{
		{Arch: "llama", VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, ContextLen: 256, RopeTheta: 10000, NormEps: 1e-5},
		{Arch: "qwen2", VocabSize: 300, Dim: 64, Layers: 3, Heads: 4, KVHeads: 1, HeadDim: 32, FFN: 96, ContextLen: 4096, RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true, QKVBias: true},
	} {
		a := map[string]arch.Architecture{"llama": Llama, "qwen2": Qwen2}[want.Arch]
		got := arch.Config{Arch: want.Arch}
		if err := a.ReadConfig(fileOf(a, want), &got); err != nil {
			t.Fatalf("%s: %v", want.Arch, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", want.Arch, diff)
		}
	}
}

// TestReadConfigRefusesWhatItDoesNotRun: a RoPE scaling, partial RoPE or a
// value length of its own would run silently wrong, so they are refused.
func TestReadConfigRefusesWhatItDoesNotRun(t *testing.T) {
	c := arch.Config{Arch: "llama", VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, ContextLen: 256, RopeTheta: 10000, NormEps: 1e-5}
	for _, tc := range []struct {
		key   string
		value any
		want  string
	}{
		{"llama.rope.scaling.type", "yarn", `rope scaling "yarn" is unsupported`},
		{"llama.rope.dimension_count", uint32(8), "partial rotary embeddings (8 of 16 dimensions)"},
		{"llama.attention.value_length", uint32(32), "value length 32 differs from key length 16"},
		{"llama.block_count", "two", "not an integer"},
	} {
		f := fileOf(Llama, c)
		f.kv[tc.key] = tc.value
		got := arch.Config{Arch: "llama"}
		if err := Llama.ReadConfig(f, &got); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s = %v: error %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
}
