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
	out, err := m.MapTensors(func(t *model.Tensor, _ bool) (*model.Tensor, error) {
		if len(t.Shape) < 2 { // experts' stacks (3-D) are matrices too
			return t, nil
		}
		data, err := l.Quantize(typ, t.Float32(), t.Rows(), t.Cols())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		return &model.Tensor{Name: t.Name, Type: typ, Shape: append([]int(nil), t.Shape...), Data: data}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("quantize model: %w", err)
	}
	return out, nil
}
