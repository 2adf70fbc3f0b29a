//go:build linux && (amd64 || arm64)

package ggml

import "github.com/kvpilot/kvpilot/internal/runtime/arch"

// gpt-oss's operations (arch.GptOssOps) over ggml's.

func (o *graphOps) SwiGLUOAI(gate, up arch.Tensor, alpha, limit float32) arch.Tensor {
	return arch.Tensor(o.e.a.swigluOAI(o.ctx, cTensor(gate), cTensor(up), alpha, limit))
}

func (o *graphOps) AddID(x, bias, ids arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.addID(o.ctx, cTensor(x), cTensor(bias), cTensor(ids)))
}

func (o *graphOps) AttentionSinks(layer int, q, k, v, sinks arch.Tensor, scale float32) arch.Tensor {
	return o.attention(layer, q, k, v, sinks, scale)
}
