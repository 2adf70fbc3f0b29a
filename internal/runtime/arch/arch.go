package arch

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Architecture is one model architecture, named as GGUF's
// general.architecture names it. Implementations are stateless values,
// safe for concurrent use.
type Architecture interface {
	// Name is the general.architecture value ("llama").
	Name() string
	// ReadConfig fills c from the file's metadata and tensor shapes.
	// c.Arch is set to Name() on entry; BOS and EOS are the loader's (they
	// come from the tokenizer's metadata). It refuses what the
	// architecture's forward pass does not implement (a RoPE scaling, a
	// partial RoPE …) with an error naming it.
	ReadConfig(f File, c *Config) error
	// Metadata is c's hyperparameters as the GGUF metadata ReadConfig
	// reads back (general.* and tokenizer.* are the writer's), in the
	// order a file stores them.
	Metadata(c Config) []KV
	// Tensors lists the tensors of a model of geometry c, in the order
	// GGUF files store them. The loader checks a file against it, random
	// weights and GGUF writing follow it.
	Tensors(c Config) []TensorSpec
	// Bind resolves the forward pass's weights once, when an executor
	// starts: weight returns the executor's handle of a tensor Tensors
	// listed (for output.weight of a tied model, the head the executor
	// chose). The Forward it returns is then built into every graph.
	Bind(c Config, weight func(name string) Tensor) (Forward, error)
}

// File is what ReadConfig reads from a GGUF file: typed metadata lookups
// (ok false when the key is absent; an error when its type differs) and
// tensor shapes.
type File interface {
	String(key string) (v string, ok bool, err error)
	Uint(key string) (v uint64, ok bool, err error)
	Float(key string) (v float64, ok bool, err error)
	Bool(key string) (v, ok bool, err error)
	// Ints is an array of integers (rope.dimension_sections), Bools an
	// array of booleans (attention.recurrent_layers).
	Ints(key string) (v []int, ok bool, err error)
	Bools(key string) (v []bool, ok bool, err error)
	// Shape is the named tensor's shape (GGUF order), or nil when the file
	// has no such tensor.
	Shape(name string) []int
}

// KV is one GGUF metadata entry; Value is a uint32, int32, float32, bool,
// string, []int32 or []bool.
type KV struct {
	Key   string
	Value any
}

// TensorSpec is one tensor an architecture needs.
type TensorSpec struct {
	// Name is the GGUF tensor name ("blk.3.attn_q.weight").
	Name string
	// Shape is in GGUF order: Shape[0] is the row length.
	Shape []int
	// Matrix: any supported type (a projection, an embedding); the other
	// tensors (norms, biases) must be F32.
	Matrix bool
}

// Params counts the weights of specs.
func Params(specs []TensorSpec) int64 {
	var n int64
	for _, s := range specs {
		p := int64(1)
		for _, d := range s.Shape {
			p *= int64(d)
		}
		n += p
	}
	return n
}

var (
	mu       sync.RWMutex
	registry = map[string]Architecture{}
)

// Register adds architectures to the registry, keyed by Name. It panics on
// a duplicate name: the registry is written once, at package
// initialization (see the model package's architectures.go).
func Register(as ...Architecture) {
	mu.Lock()
	defer mu.Unlock()
	for _, a := range as {
		if _, dup := registry[a.Name()]; dup {
			panic(fmt.Sprintf("arch: architecture %q registered twice", a.Name()))
		}
		registry[a.Name()] = a
	}
}

// Lookup returns the architecture named name, or an error naming it and
// the architectures this build runs.
func Lookup(name string) (Architecture, error) {
	mu.RLock()
	a, ok := registry[name]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unsupported architecture %q (supported: %s)", name, strings.Join(Names(), ", "))
	}
	return a, nil
}

// Names lists the registered architectures, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return slices.Clip(names)
}
