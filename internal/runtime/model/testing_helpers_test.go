package model

import (
	"bytes"
	"testing"
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
