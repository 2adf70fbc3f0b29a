package model

import "fmt"

// Architectures the cpu executor runs. GGUF names them in general.architecture.
const (
	ArchLlama = "llama"
	ArchQwen2 = "qwen2"
)

// Config is a model's geometry and hyperparameters.
type Config struct {
	// Arch is the GGUF architecture name: "llama" or "qwen2".
	Arch string
	// VocabSize is the number of rows of the embedding and output matrices.
	VocabSize int
	// Dim is the residual stream width.
	Dim int
	// Layers is the number of transformer blocks.
	Layers int
	// Heads is the number of query heads; KVHeads the number of key/value heads
	// (grouped-query attention when KVHeads < Heads).
	Heads, KVHeads int
	// HeadDim is the width of one head (usually Dim/Heads).
	HeadDim int
	// FFN is the hidden width of the SwiGLU MLP.
	FFN int
	// ContextLen is the longest sequence the model was trained for.
	ContextLen int
	// RopeTheta is the rotary embedding base; NormEps the RMSNorm epsilon.
	RopeTheta, NormEps float32
	// TiedEmbeddings: the output head reuses the token embedding matrix.
	TiedEmbeddings bool
	// QKVBias: the q, k and v projections have biases (Qwen2).
	QKVBias bool
	// BOS is the beginning-of-sequence token, or -1 when the model has none.
	BOS int32
	// EOS are the tokens that end generation (end of text, end of turn).
	EOS []int32
}

// RopeNeox reports whether RoPE rotates the pairs (i, i+HeadDim/2) (GGUF's
// NEOX mode, used by qwen2) rather than the adjacent pairs (2i, 2i+1) that
// GGUF llama models use (their q/k weights are permuted for it at conversion).
func (c Config) RopeNeox() bool { return c.Arch == ArchQwen2 }

// Validate reports the first inconsistency in the geometry.
func (c Config) Validate() error {
	switch {
	case c.Arch != ArchLlama && c.Arch != ArchQwen2:
		return fmt.Errorf("unsupported architecture %q (supported: %s, %s)", c.Arch, ArchLlama, ArchQwen2)
	case c.VocabSize <= 0 || c.Dim <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.FFN <= 0:
		return fmt.Errorf("vocab %d, dim %d, layers %d, heads %d, kv heads %d, head dim %d, ffn %d: all must be positive",
			c.VocabSize, c.Dim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.FFN)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("heads %d is not a multiple of kv heads %d", c.Heads, c.KVHeads)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("head dim %d is odd; rotary embeddings rotate pairs", c.HeadDim)
	case c.ContextLen <= 0:
		return fmt.Errorf("context length %d must be positive", c.ContextLen)
	case !(c.RopeTheta > 0) || !(c.NormEps > 0):
		return fmt.Errorf("rope theta %g and norm eps %g must be positive", c.RopeTheta, c.NormEps)
	case c.BOS < -1 || int(c.BOS) >= c.VocabSize:
		return fmt.Errorf("bos token %d outside the vocabulary of %d", c.BOS, c.VocabSize)
	}
	for _, id := range c.EOS {
		if id < 0 || int(id) >= c.VocabSize {
			return fmt.Errorf("eos token %d outside the vocabulary of %d", id, c.VocabSize)
		}
	}
	return nil
}

// NumParams is the number of weights, counting a tied head once.
func (c Config) NumParams() int64 {
	d, q, kv, f := int64(c.Dim), int64(c.Heads*c.HeadDim), int64(c.KVHeads*c.HeadDim), int64(c.FFN)
	perLayer := 2*d + d*q + 2*d*kv + q*d + 3*d*f
	if c.QKVBias {
		perLayer += q + 2*kv
	}
	n := int64(c.VocabSize)*d + d + int64(c.Layers)*perLayer
	if !c.TiedEmbeddings {
		n += int64(c.VocabSize) * d
	}
	return n
}
