package model

import "fmt"

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
	return ts
}

// tensorSpec is one expected tensor: where it goes and its shape.
type tensorSpec struct {
	name     string
	shape    []int
	slot     **Tensor
	optional bool
	// matrix tensors may use any supported type; the others must be F32.
	matrix bool
}

// specs lists the tensors of a model with geometry c, pointing into w.
func (w *Weights) specs(c Config) []tensorSpec {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	w.Layers = make([]Layer, c.Layers)
	s := []tensorSpec{{name: "token_embd.weight", shape: []int{c.Dim, c.VocabSize}, slot: &w.TokenEmbedding, matrix: true}}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		s = append(s,
			tensorSpec{name: p + "attn_norm.weight", shape: []int{c.Dim}, slot: &l.AttnNorm},
			tensorSpec{name: p + "attn_q.weight", shape: []int{c.Dim, q}, slot: &l.Q, matrix: true},
			tensorSpec{name: p + "attn_k.weight", shape: []int{c.Dim, kv}, slot: &l.K, matrix: true},
			tensorSpec{name: p + "attn_v.weight", shape: []int{c.Dim, kv}, slot: &l.V, matrix: true},
			tensorSpec{name: p + "attn_output.weight", shape: []int{q, c.Dim}, slot: &l.O, matrix: true},
			tensorSpec{name: p + "ffn_norm.weight", shape: []int{c.Dim}, slot: &l.FFNNorm},
			tensorSpec{name: p + "ffn_gate.weight", shape: []int{c.Dim, c.FFN}, slot: &l.Gate, matrix: true},
			tensorSpec{name: p + "ffn_up.weight", shape: []int{c.Dim, c.FFN}, slot: &l.Up, matrix: true},
			tensorSpec{name: p + "ffn_down.weight", shape: []int{c.FFN, c.Dim}, slot: &l.Down, matrix: true},
		)
		if c.QKVBias {
			s = append(s,
				tensorSpec{name: p + "attn_q.bias", shape: []int{q}, slot: &l.QBias},
				tensorSpec{name: p + "attn_k.bias", shape: []int{kv}, slot: &l.KBias},
				tensorSpec{name: p + "attn_v.bias", shape: []int{kv}, slot: &l.VBias},
			)
		}
	}
	s = append(s, tensorSpec{name: "output_norm.weight", shape: []int{c.Dim}, slot: &w.OutputNorm})
	if !c.TiedEmbeddings {
		s = append(s, tensorSpec{name: "output.weight", shape: []int{c.Dim, c.VocabSize}, slot: &w.Output, matrix: true})
	}
	return s
}
