package model

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// smallConfig is a geometry small enough for fast tests (multiples of 32
// where Q8_0 needs them).
func smallConfig() Config {
	return Config{Arch: ArchLlama, VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96, ContextLen: 256}
}

func ggufBytes(t testing.TB, m *Model) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteGGUF(&buf, m); err != nil {
		t.Fatalf("WriteGGUF: %v", err)
	}
	return buf.Bytes()
}

// sameModel reports how b, a model written and read back, differs from a:
// config, tensors (names, types, shapes, bytes, in order) and tokens.
func sameModel(t *testing.T, a, b *Model) {
	t.Helper()
	if diff := cmp.Diff(a.Config, b.Config); diff != "" {
		t.Errorf("config (-written +read):\n%s", diff)
	}
	at, bt := a.Weights.Tensors(), b.Weights.Tensors()
	if len(at) != len(bt) {
		t.Fatalf("%d tensors written, %d read", len(at), len(bt))
	}
	for i := range at {
		x, y := at[i], bt[i]
		if x.Name != y.Name || x.Type != y.Type || !cmp.Equal(x.Shape, y.Shape) || !bytes.Equal(x.Data, y.Data) {
			t.Errorf("tensor %s %s %v written, read %s %s %v", x.Name, x.Type, x.Shape, y.Name, y.Type, y.Shape)
		}
	}
	text := "héllo, wörld 123 <s>"
	if diff := cmp.Diff(a.Tokenizer.Encode(text, true), b.Tokenizer.Encode(text, true)); diff != "" {
		t.Errorf("tokens differ:\n%s", diff)
	}
}
