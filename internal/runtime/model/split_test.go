package model

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// splitParts writes m in parts of at most maxTensors tensors under a fresh
// directory and returns their paths.
func splitParts(t *testing.T, m *Model, maxTensors int) []string {
	t.Helper()
	paths, err := WriteSplitGGUF(filepath.Join(t.TempDir(), "m"), m, maxTensors)
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestSplitGGUFLoadsAsOne: a model written in parts (gguf-split's layout)
// loads from its first part, its last or a symlink to the first as the
// model written whole, each part mapped; parts of one tensor each and a
// single part too.
func TestSplitGGUFLoadsAsOne(t *testing.T) {
	in, err := Random(smallConfig(), 7).Convert(Q8_0)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Load(writeFile(t, ggufBytes(t, in)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	n := len(in.Weights.Tensors())
	for _, max := range []int{5, 1, n} {
		paths := splitParts(t, in, max)
		if want := (n + max - 1) / max; len(paths) != want || !strings.HasSuffix(paths[0], SplitPath("m", 0, want)) {
			t.Fatalf("%d tensors in parts of %d: %v, want %d parts", n, max, paths, want)
		}
		// A fetched model's model.gguf links to its first part's name
		// (internal/runtime/fetch).
		link := filepath.Join(filepath.Dir(paths[0]), "model.gguf")
		if err := os.Symlink(filepath.Base(paths[0]), link); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{paths[0], paths[len(paths)-1], link} {
			var done, total int64
			m, err := Load(p, func(d, tot int64) { done, total = d, tot })
			if err != nil {
				t.Fatal(err)
			}
			sameModel(t, whole, m)
			if done != total || total == 0 || !m.Mapped() {
				t.Errorf("%s: progress %d of %d, mapped %v", p, done, total, m.Mapped())
			}
			if err := m.Close(); err != nil {
				t.Errorf("%s: close: %v", p, err)
			}
		}
		tok, err := LoadTokenizer(paths[len(paths)-1])
		if err != nil || tok.VocabSize() != in.Config.VocabSize {
			t.Errorf("tokenizer from the last part: %v", err)
		}
	}
}

// TestSplitGGUFErrors: a part missing, renamed, swapped with another or
// of another split stops the load with an error naming it.
func TestSplitGGUFErrors(t *testing.T) {
	in := Random(smallConfig(), 3)
	n := len(in.Weights.Tensors())
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, paths []string) string // the path to load
		want   func(paths []string) string
	}{
		{"missing part", func(t *testing.T, p []string) string {
			rm(t, p[2])
			return p[0]
		}, func(p []string) string { return "part 3 of 4, " + p[2] + ", is missing" }},
		{"missing first part, loaded from the last", func(t *testing.T, p []string) string {
			rm(t, p[0])
			return p[3]
		}, func(p []string) string { return "part 1 of 4, " + p[0] + ", is missing" }},
		{"renamed", func(t *testing.T, p []string) string {
			renamed := filepath.Join(filepath.Dir(p[1]), "other.gguf")
			if err := os.Rename(p[1], renamed); err != nil {
				t.Fatal(err)
			}
			return renamed
		}, func([]string) string { return "not named as a part (…-00002-of-00004.gguf)" }},
		{"swapped", func(t *testing.T, p []string) string {
			cp(t, p[3], p[1])
			return p[0]
		}, func([]string) string { return "says it is part 4 of 4, want 2 of 4" }},
		{"another split's part", func(t *testing.T, p []string) string {
			other := splitParts(t, in, (n+2)/3)
			cp(t, other[1], p[1])
			return p[0]
		}, func([]string) string { return "says it is part 2 of 3, want 2 of 4" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := splitParts(t, in, (n+3)/4)
			if len(paths) != 4 {
				t.Fatalf("%d tensors in parts of %d: %d parts, want 4", n, (n+3)/4, len(paths))
			}
			_, err := Load(tc.change(t, paths), nil)
			if want := tc.want(paths); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v, want one saying %q", err, want)
			}
		})
	}
	if _, err := WriteSplitGGUF(filepath.Join(t.TempDir(), "m"), in, 0); err == nil {
		t.Error("parts of 0 tensors written")
	}
	// Two parts whose tensors miss one of split.tensors.count, or hold
	// one twice.
	kvs, err := ggufMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	ts := in.Weights.Tensors()
	for _, tc := range []struct {
		name   string
		second []*Tensor
		want   string
	}{
		{"a tensor missing", ts[5 : n-1], fmt.Sprintf("the parts hold %d tensors, split.tensors.count says %d", n-1, n)},
		{"a tensor twice", ts[4:], fmt.Sprintf("tensor %q is in part 1 and in part 2", ts[4].Name)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := filepath.Join(t.TempDir(), "m")
			for i, part := range [][]*Tensor{ts[:5], tc.second} {
				kv := []ggufKV{{keySplitNo, uint16(i)}, {keySplitCount, uint16(2)}, {keySplitTensors, int32(n)}}
				if i == 0 {
					kv = append(slices.Clone(kvs), kv...)
				}
				var buf bytes.Buffer
				if err := writeGGUF(&buf, kv, part); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(SplitPath(prefix, i, 2), buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Load(SplitPath(prefix, 0, 2), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func cp(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
