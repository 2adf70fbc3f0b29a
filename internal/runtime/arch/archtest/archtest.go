// Package archtest holds what the architectures' tests share: a GGUF
// file's metadata and tensor shapes as ReadConfig sees them, without a
// file.
package archtest

import (
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// File is an arch.File over maps: KV holds uint32, float32, bool,
// string, []int32 or []bool values as the GGUF writer stores them, Shapes the tensors'.
type File struct {
	KV     map[string]any
	Shapes map[string][]int
}

// FileOf is what the GGUF writer stores for c: a's Metadata and Tensors.
func FileOf(a arch.Architecture, c arch.Config) File {
	f := File{KV: map[string]any{}, Shapes: map[string][]int{}}
	for _, kv := range a.Metadata(c) {
		f.KV[kv.Key] = kv.Value
	}
	for _, s := range a.Tensors(c) {
		f.Shapes[s.Name] = s.Shape
	}
	return f
}

func lookup[T any](f File, key, what string) (T, bool, error) {
	var zero T
	v, ok := f.KV[key]
	if !ok {
		return zero, false, nil
	}
	x, isT := v.(T)
	if !isT {
		return zero, true, fmt.Errorf("metadata %s is not %s", key, what)
	}
	return x, true, nil
}

func (f File) String(key string) (string, bool, error) { return lookup[string](f, key, "a string") }
func (f File) Bool(key string) (bool, bool, error)     { return lookup[bool](f, key, "a bool") }

func (f File) Uint(key string) (uint64, bool, error) {
	u, ok, err := lookup[uint32](f, key, "an integer")
	return uint64(u), ok, err
}

func (f File) Float(key string) (float64, bool, error) {
	x, ok, err := lookup[float32](f, key, "a float")
	return float64(x), ok, err
}

func (f File) Ints(key string) ([]int, bool, error) {
	x, ok, err := lookup[[]int32](f, key, "an array of integers")
	v := make([]int, len(x))
	for i, e := range x {
		v[i] = int(e)
	}
	return v, ok, err
}

func (f File) Bools(key string) ([]bool, bool, error) {
	return lookup[[]bool](f, key, "an array of booleans")
}

// Shape is the named tensor's shape, nil when there is none.
func (f File) Shape(name string) []int { return f.Shapes[name] }
