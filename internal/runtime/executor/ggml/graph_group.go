//go:build linux && (amd64 || arm64)

package ggml

import "github.com/kvpilot/kvpilot/internal/runtime/arch"

// Grouped expert selection's operations (arch.GroupOps) over ggml's.

func (o *graphOps) Reshape4D(x arch.Tensor, ne0, ne1, ne2, ne3 int) arch.Tensor {
	return arch.Tensor(o.e.a.reshape4d(o.ctx, cTensor(x), int64(ne0), int64(ne1), int64(ne2), int64(ne3)))
}

func (o *graphOps) Fill(x arch.Tensor, v float32) arch.Tensor {
	return arch.Tensor(o.e.a.fill(o.ctx, cTensor(x), v))
}

func (o *graphOps) SetRows(dst, src, ids arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.setRows(o.ctx, cTensor(dst), cTensor(src), cTensor(ids)))
}
