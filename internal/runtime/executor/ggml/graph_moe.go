//go:build linux && (amd64 || arm64)

package ggml

import "github.com/kvpilot/kvpilot/internal/runtime/arch"

// The mixture-of-experts operations (arch.MoEOps) over ggml's.

func (o *graphOps) SoftMax(x arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.softMax(o.ctx, cTensor(x)))
}

func (o *graphOps) Sigmoid(x arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.sigmoid(o.ctx, cTensor(x)))
}

// TopK is ggml_argsort_top_k: a descending argsort's first k, which is
// what llama.cpp selects experts with (ggml_top_k leaves them unordered,
// and the order is the order their outputs are added in).
func (o *graphOps) TopK(x arch.Tensor, k int) arch.Tensor {
	return arch.Tensor(o.e.a.argsortTopK(o.ctx, cTensor(x), int32(k)))
}

func (o *graphOps) GetRows(x, ids arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.getRows(o.ctx, cTensor(x), cTensor(ids)))
}

func (o *graphOps) Reshape2D(x arch.Tensor, ne0, ne1 int) arch.Tensor {
	return arch.Tensor(o.e.a.reshape2d(o.ctx, cTensor(x), int64(ne0), int64(ne1)))
}

func (o *graphOps) SumRows(x arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.sumRows(o.ctx, cTensor(x)))
}

func (o *graphOps) Div(x, y arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.div(o.ctx, cTensor(x), cTensor(y)))
}

func (o *graphOps) Clamp(x arch.Tensor, lo, hi float32) arch.Tensor {
	return arch.Tensor(o.e.a.clamp(o.ctx, cTensor(x), lo, hi))
}

func (o *graphOps) Scale(x arch.Tensor, s float32) arch.Tensor {
	return arch.Tensor(o.e.a.scale(o.ctx, cTensor(x), s))
}

func (o *graphOps) MulMatID(w, x, ids arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.mulMatID(o.ctx, cTensor(w), cTensor(x), cTensor(ids)))
}

func (o *graphOps) Slice(x arch.Tensor, ne0, ne1, ne2, i int) arch.Tensor {
	row := uintptr(4 * ne0)
	return arch.Tensor(o.e.a.view2d(o.ctx, cTensor(x), int64(ne0), int64(ne2), row*uintptr(ne1), row*uintptr(i)))
}
