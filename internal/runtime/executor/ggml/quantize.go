//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// Quantize encodes rows×cols float32 weights (row-major, a row being one
// GGUF row of cols elements) as typ with ggml's own reference quantizers
// (ggml_quantize_chunk), for the types the model package reads but cannot
// encode (Q4_0, Q4_K, Q5_K, Q6_K).
func (l *Library) Quantize(typ model.DType, src []float32, rows, cols int) ([]byte, error) {
	if len(src) != rows*cols || rows <= 0 {
		return nil, fmt.Errorf("quantize %s: %d values for %d×%d", typ, len(src), rows, cols)
	}
	rb, err := typ.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("quantize: %w", err)
	}
	if l.api.quantizeReqImat(int32(typ)) {
		return nil, fmt.Errorf("quantize %s: the type needs an importance matrix", typ)
	}
	dst := make([]byte, rb*rows)
	n := l.api.quantizeChunk(int32(typ), unsafe.Pointer(&src[0]), unsafe.Pointer(&dst[0]), 0, int64(rows), int64(cols), nil)
	if int(n) != len(dst) {
		return nil, fmt.Errorf("quantize %s: ggml wrote %d bytes, want %d", typ, n, len(dst))
	}
	return dst, nil
}

// QuantizeModel returns a copy of m whose matrices are encoded as typ by
// Quantize; norms and biases stay F32, as in GGUF files.
func (l *Library) QuantizeModel(m *model.Model, typ model.DType) (*model.Model, error) {
	out := &model.Model{Config: m.Config, Tokenizer: m.Tokenizer, ChatTemplate: m.ChatTemplate}
	conv := func(t *model.Tensor) (*model.Tensor, error) {
		if t == nil {
			return nil, nil
		}
		if len(t.Shape) != 2 {
			return t, nil
		}
		data, err := l.Quantize(typ, t.Float32(), t.Rows(), t.Cols())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		return &model.Tensor{Name: t.Name, Type: typ, Shape: append([]int(nil), t.Shape...), Data: data}, nil
	}
	type slot struct {
		dst **model.Tensor
		src *model.Tensor
	}
	w, o := &m.Weights, &out.Weights
	slots := []slot{{&o.TokenEmbedding, w.TokenEmbedding}, {&o.OutputNorm, w.OutputNorm}, {&o.Output, w.Output}}
	o.Layers = make([]model.Layer, len(w.Layers))
	for i := range w.Layers {
		s, d := &w.Layers[i], &o.Layers[i]
		slots = append(slots,
			slot{&d.AttnNorm, s.AttnNorm}, slot{&d.FFNNorm, s.FFNNorm},
			slot{&d.Q, s.Q}, slot{&d.K, s.K}, slot{&d.V, s.V}, slot{&d.O, s.O},
			slot{&d.QBias, s.QBias}, slot{&d.KBias, s.KBias}, slot{&d.VBias, s.VBias},
			slot{&d.Gate, s.Gate}, slot{&d.Up, s.Up}, slot{&d.Down, s.Down})
	}
	for _, sl := range slots {
		t, err := conv(sl.src)
		if err != nil {
			return nil, fmt.Errorf("quantize model: %w", err)
		}
		*sl.dst = t
	}
	return out, nil
}
