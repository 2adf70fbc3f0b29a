package arch

import "fmt"

// Key is one metadata entry an architecture's ReadConfig reads into a
// Config field: Uint or OptUint for integers, Float or OptFloat for
// floats. A required key that is absent is an error naming it; an
// optional one leaves its field as it was (its default).
type Key struct {
	name     string
	uint     *int
	float    *float32
	optional bool
}

// Uint is a required integer key (at most 2^31).
func Uint(name string, dst *int) Key { return Key{name: name, uint: dst} }

// OptUint is an optional integer key.
func OptUint(name string, dst *int) Key { return Key{name: name, uint: dst, optional: true} }

// Float is a required float key.
func Float(name string, dst *float32) Key { return Key{name: name, float: dst} }

// OptFloat is an optional float key.
func OptFloat(name string, dst *float32) Key { return Key{name: name, float: dst, optional: true} }

// Read reads keys from f in order, stopping at the first error: a key of
// another type, a required key that is absent, an integer out of range.
func Read(f File, keys ...Key) error {
	for _, k := range keys {
		if k.uint != nil {
			v, ok, err := f.Uint(k.name)
			if err != nil {
				return err
			}
			if !ok {
				if k.optional {
					continue
				}
				return fmt.Errorf("metadata %s is missing", k.name)
			}
			if v > 1<<31 {
				return fmt.Errorf("metadata %s = %d is out of range", k.name, v)
			}
			*k.uint = int(v)
			continue
		}
		v, ok, err := f.Float(k.name)
		if err != nil {
			return err
		}
		if !ok {
			if k.optional {
				continue
			}
			return fmt.Errorf("metadata %s is missing", k.name)
		}
		*k.float = float32(v)
	}
	return nil
}

// RMSNormed is x's rows RMS-normalized with eps, then scaled by w.
func RMSNormed(o Ops, x, w Tensor, eps float32) Tensor { return o.Mul(o.RMSNorm(x, eps), w) }

// SampledForLastMLP is what a forward pass runs its last layer's MLP on:
// the rows of x ([w, n]) the batch samples, their count and true, or x, n
// and false when it samples none. Every row's MLP (and experts) is its
// own, so the sampled rows come out as they would with every row, and a
// prefill does not run the last MLP (a mixture of experts' the most) for
// every prompt token. llama.cpp's llama-family graphs keep their output
// rows there too; its v0.5.0 gpt-oss and Qwen3.5 graphs only when asked
// for masked next-token embeddings.
func SampledForLastMLP(o Ops, x Tensor, n int) (Tensor, int, bool) {
	if rows, ok := o.Sampled(x); ok {
		return rows, o.SampledRows(), true
	}
	return x, n, false
}

// Linear is w·x, plus bias when it is not 0.
func Linear(o Ops, w, x, bias Tensor) Tensor {
	y := o.MulMat(w, x)
	if bias != 0 {
		y = o.Add(y, bias)
	}
	return y
}

// HeadDefaults completes what an attention's metadata may leave out, as
// llama.cpp does: KV heads default to the query heads (no grouping), the
// head dim to Dim/Heads. It then refuses a value length (p +
// "attention.value_length") other than the key length: the paged cache
// keeps keys and values of one width.
func HeadDefaults(f File, p string, c *Config) error {
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Dim / c.Heads
	}
	if v, ok, err := f.Uint(p + "attention.value_length"); err != nil {
		return err
	} else if ok && int(v) != c.HeadDim {
		return fmt.Errorf("value length %d differs from key length %d (unsupported)", v, c.HeadDim)
	}
	return nil
}

// BaseMetadata is the geometry every transformer architecture stores
// under prefix p, first, in this order: vocabulary, context, width,
// blocks, MLP width, heads, KV heads, key and value lengths.
func BaseMetadata(p string, c Config) []KV {
	return []KV{
		{Key: p + "vocab_size", Value: uint32(c.VocabSize)},
		{Key: p + "context_length", Value: uint32(c.ContextLen)},
		{Key: p + "embedding_length", Value: uint32(c.Dim)},
		{Key: p + "block_count", Value: uint32(c.Layers)},
		{Key: p + "feed_forward_length", Value: uint32(c.FFN)},
		{Key: p + "attention.head_count", Value: uint32(c.Heads)},
		{Key: p + "attention.head_count_kv", Value: uint32(c.KVHeads)},
		{Key: p + "attention.key_length", Value: uint32(c.HeadDim)},
		{Key: p + "attention.value_length", Value: uint32(c.HeadDim)},
	}
}
