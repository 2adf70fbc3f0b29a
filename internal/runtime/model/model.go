package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Model is a loaded or built model. Models loaded from files hold a read-only
// memory mapping until Close.
type Model struct {
	Config    Config
	Tokenizer Tokenizer
	// ChatTemplate is the GGUF's own template (a *JinjaTemplate), or the
	// built-in ChatTemplateFor picks when the GGUF carries none.
	ChatTemplate ChatTemplate
	Weights      Weights
	// PreTokenizerFallback, when not empty, says that the file's
	// tokenizer.ggml.pre is unknown and text is split as
	// LoadOptions.PreTokenizerFallback names instead: prompts then
	// tokenize unlike the model's training, which its server must say
	// loudly.
	PreTokenizerFallback string

	unmap func() error
}

// Mapped reports whether the tensors' data lives in a read-only file mapping
// (it does until Close) rather than in Go memory.
func (m *Model) Mapped() bool { return m != nil && m.unmap != nil }

// Close releases the file mapping of a loaded model; its tensors must not be
// used afterwards. It is a no-op for models built in memory.
func (m *Model) Close() error {
	if m == nil || m.unmap == nil {
		return nil
	}
	err := m.unmap()
	m.unmap = nil
	return err
}

// BuiltinPrefix marks built-in model names in Open's spec.
const BuiltinPrefix = "builtin:"

// Open opens "builtin:<name>" or a GGUF file path.
func Open(spec string, progress func(done, total int64)) (*Model, error) {
	return OpenWith(spec, progress, LoadOptions{})
}

// OpenWith is Open with options for a GGUF file.
func OpenWith(spec string, progress func(done, total int64), opts LoadOptions) (*Model, error) {
	if name, ok := strings.CutPrefix(spec, BuiltinPrefix); ok {
		return Builtin(name)
	}
	return LoadWith(spec, progress, opts)
}

// TinyConfig is the geometry of the "tiny" built-in model.
func TinyConfig() Config {
	return Config{
		Arch: ArchLlama, VocabSize: ByteVocabSize, Dim: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32,
		FFN: 384, ContextLen: 4096, RopeTheta: 10000, NormEps: 1e-5,
	}
}

// tinySeed fixes the built-in model's weights across processes and versions.
const tinySeed = 0x6b767069

// Builtin returns a built-in model. "tiny" is a small llama with random
// weights from a fixed seed and the byte vocabulary: it exercises every code
// path of the runtime, and its text is noise.
func Builtin(name string) (*Model, error) {
	switch name {
	case "tiny":
		return Random(TinyConfig(), tinySeed), nil
	}
	return nil, fmt.Errorf("unknown built-in model %q (available: tiny)", name)
}

// Random builds an F32 model of geometry cfg (unset fields as in
// WithDefaults) with deterministic random weights from seed and the byte
// vocabulary, whose BOS and EOS replace cfg's. It panics when the geometry is
// invalid or VocabSize is below ByteVocabSize: it serves tests, benchmarks and
// demos, whose callers validate first.
func Random(cfg Config, seed int64) *Model {
	cfg = cfg.WithDefaults()
	tok := NewByteTokenizer(cfg.VocabSize)
	cfg.BOS, cfg.EOS = ByteBOS, []int32{ByteEOS}
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("model.Random: %v", err))
	}
	if cfg.VocabSize < ByteVocabSize {
		panic(fmt.Sprintf("model.Random: vocab %d is smaller than the byte vocabulary (%d)", cfg.VocabSize, ByteVocabSize))
	}
	m := &Model{Config: cfg, Tokenizer: tok, ChatTemplate: ChatML{}}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6b7670696c6f74))
	uniform := func(n int, center, scale float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = center + scale*(2*rng.Float32()-1)
		}
		return v
	}
	for _, s := range m.Weights.specs(cfg) {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		var v []float32
		switch {
		case strings.HasSuffix(s.name, "norm.weight"):
			v = uniform(n, 1, 0.1)
		case strings.HasSuffix(s.name, ".bias"):
			v = uniform(n, 0, 0.1)
		case s.name == "token_embd.weight":
			v = uniform(n, 0, 1)
		case strings.HasSuffix(s.name, ".ssm_a"):
			// A hybrid model's DeltaNet decay rates, −exp(A_log): negative,
			// so that its state decays.
			v = uniform(n, -1, 0.5)
		case s.name == "rope_freqs.weight":
			// Llama 3.1's divisors run from 1 (high frequencies) to 8.
			v = uniform(n, 4.5, 3.5)
		default:
			// Unit-variance outputs for unit-variance inputs.
			v = uniform(n, 0, float32(math.Sqrt(3/float64(s.shape[0]))))
		}
		*s.slot = f32Tensor(s.name, s.shape, v)
	}
	return m
}

func f32Tensor(name string, shape []int, v []float32) *Tensor {
	data, _ := Encode(F32, v)
	return &Tensor{Name: name, Type: F32, Shape: shape, Data: data}
}

// Convert returns a copy of m whose matrices (embedding, projections, output
// head) are encoded as t; norms and biases stay F32, as in GGUF files. The
// copy shares nothing mutable with m and holds no file mapping.
func (m *Model) Convert(t DType) (*Model, error) {
	return m.MapTensors(func(in *Tensor, matrix bool) (*Tensor, error) {
		typ := F32
		if matrix {
			typ = t
		}
		if _, err := typ.RowBytes(in.Cols()); err != nil {
			return nil, fmt.Errorf("convert %s to %s: %w", in.Name, typ, err)
		}
		data, err := Encode(typ, in.Float32())
		if err != nil {
			return nil, fmt.Errorf("convert %s to %s: %w", in.Name, typ, err)
		}
		return &Tensor{Name: in.Name, Type: typ, Shape: append([]int(nil), in.Shape...), Data: data}, nil
	})
}

// MapTensors returns a model of m's configuration, tokenizer and chat
// template whose tensors are f of m's, in the order of m's architecture's
// Tensors; matrix says whether the architecture lets a tensor take any
// type (the others are F32). An error of f, or a tensor m lacks, is
// returned as it is.
func (m *Model) MapTensors(f func(t *Tensor, matrix bool) (*Tensor, error)) (*Model, error) {
	out := &Model{Config: m.Config, Tokenizer: m.Tokenizer, ChatTemplate: m.ChatTemplate}
	src := m.Weights.byName()
	specs := out.Weights.specs(m.Config)
	if specs == nil {
		return nil, m.Config.Validate()
	}
	for _, s := range specs {
		in := src[s.name]
		if in == nil {
			return nil, fmt.Errorf("convert: missing tensor %s", s.name)
		}
		t, err := f(in, s.matrix)
		if err != nil {
			return nil, err
		}
		*s.slot = t
	}
	return out, nil
}

func (w *Weights) byName() map[string]*Tensor {
	m := map[string]*Tensor{}
	for _, t := range w.Tensors() {
		m[t.Name] = t
	}
	return m
}
