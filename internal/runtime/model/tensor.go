package model

import (
	"strconv"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// Tensor is one weight tensor. Data is the encoded bytes (memory-mapped from
// the GGUF file when loaded, so read-only).
type Tensor struct {
	Name string
	Type DType
	// Shape is in GGUF order: Shape[0] is the contiguous dimension (the
	// length of a row; the input width of a projection), Shape[1] counts rows.
	Shape []int
	Data  []byte
}

// Cols is the length of a row.
func (t *Tensor) Cols() int { return t.Shape[0] }

// Rows is the number of rows (the product of the outer dimensions).
func (t *Tensor) Rows() int {
	n := 1
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n
}

// Row decodes row r into dst[:Cols()].
func (t *Tensor) Row(r int, dst []float32) {
	rb, _ := t.Type.RowBytes(t.Cols())
	Dequantize(t.Type, dst[:t.Cols()], t.Data[r*rb:(r+1)*rb])
}

// Float32 decodes the whole tensor into a new slice.
func (t *Tensor) Float32() []float32 {
	out := make([]float32, t.Rows()*t.Cols())
	Dequantize(t.Type, out, t.Data)
	return out
}

// Weights are a model's tensors, named as in GGUF.
type Weights struct {
	// TokenEmbedding is token_embd.weight: VocabSize rows of Dim.
	TokenEmbedding *Tensor
	// OutputNorm is output_norm.weight (F32, Dim).
	OutputNorm *Tensor
	// Output is output.weight (VocabSize rows of Dim); nil when tied.
	Output *Tensor
	Layers []Layer
	// Extra are the tensors of an architecture outside the llama family's
	// layout above, in its Tensors order (none for llama and qwen2).
	Extra []*Tensor
}

// Layer is one transformer block (blk.N.*).
type Layer struct {
	AttnNorm            *Tensor // attn_norm.weight (F32, Dim)
	Q, K, V, O          *Tensor // attn_q/k/v/output.weight
	QBias, KBias, VBias *Tensor // attn_q/k/v.bias (F32); nil without QKVBias
	FFNNorm             *Tensor // ffn_norm.weight (F32, Dim)
	Gate, Up, Down      *Tensor // ffn_gate/up/down.weight
}

// Tensors lists the weights in GGUF order, skipping absent ones.
func (w *Weights) Tensors() []*Tensor {
	var ts []*Tensor
	add := func(t ...*Tensor) {
		for _, x := range t {
			if x != nil {
				ts = append(ts, x)
			}
		}
	}
	add(w.TokenEmbedding)
	for i := range w.Layers {
		l := &w.Layers[i]
		add(l.AttnNorm, l.Q, l.QBias, l.K, l.KBias, l.V, l.VBias, l.O, l.FFNNorm, l.Gate, l.Up, l.Down)
	}
	add(w.OutputNorm, w.Output)
	add(w.Extra...)
	return ts
}

// tensorSpec is one tensor of the model's architecture and where it goes.
type tensorSpec struct {
	name  string
	shape []int
	slot  **Tensor
	// matrix tensors may use any supported type; the others must be F32.
	matrix bool
}

// specs lists the tensors of a model with geometry c (its architecture's
// Tensors), pointing into w; nil when c.Arch is not registered.
func (w *Weights) specs(c Config) []tensorSpec {
	a, err := arch.Lookup(c.Arch)
	if err != nil {
		return nil
	}
	as := a.Tensors(c)
	w.Layers = make([]Layer, c.Layers)
	extra := 0
	for _, s := range as {
		if w.slot(s.Name) == nil {
			extra++
		}
	}
	w.Extra = nil
	if extra > 0 {
		w.Extra = make([]*Tensor, extra)
	}
	extra = 0
	specs := make([]tensorSpec, len(as))
	for i, s := range as {
		slot := w.slot(s.Name)
		if slot == nil {
			slot = &w.Extra[extra]
			extra++
		}
		specs[i] = tensorSpec{name: s.Name, shape: s.Shape, slot: slot, matrix: s.Matrix}
	}
	return specs
}

// slot is the field of w that holds the tensor named name in the llama
// family's layout, or nil for another name (an Extra tensor).
func (w *Weights) slot(name string) **Tensor {
	switch name {
	case "token_embd.weight":
		return &w.TokenEmbedding
	case "output_norm.weight":
		return &w.OutputNorm
	case "output.weight":
		return &w.Output
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return nil
	}
	num, field, ok := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	if !ok || err != nil || i < 0 || i >= len(w.Layers) {
		return nil
	}
	l := &w.Layers[i]
	switch field {
	case "attn_norm.weight":
		return &l.AttnNorm
	case "attn_q.weight":
		return &l.Q
	case "attn_k.weight":
		return &l.K
	case "attn_v.weight":
		return &l.V
	case "attn_output.weight":
		return &l.O
	case "attn_q.bias":
		return &l.QBias
	case "attn_k.bias":
		return &l.KBias
	case "attn_v.bias":
		return &l.VBias
	case "ffn_norm.weight":
		return &l.FFNNorm
	case "ffn_gate.weight":
		return &l.Gate
	case "ffn_up.weight":
		return &l.Up
	case "ffn_down.weight":
		return &l.Down
	}
	return nil
}
