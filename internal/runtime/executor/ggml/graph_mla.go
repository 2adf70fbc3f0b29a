//go:build linux && (amd64 || arm64)

package ggml

import "github.com/kvpilot/kvpilot/internal/runtime/arch"

// Multi-head latent attention's operations (arch.MLAOps) over ggml's.
//
// The cache of an MLA model (deepseek2) holds, per token and layer, one
// latent row of Config.HeadDim (the compressed KV of KVRank, then the
// rotated key part of RopeDims) in the key cache, as llama.cpp's does;
// the values are the first KVRank elements of the same rows, read through
// a view of it, so such a model has no value cache (kvcache.Geometry's
// KeysOnly: KVGeometry).

func (o *graphOps) View3D(x arch.Tensor, ne0, ne1, ne2, s1, s2, off int) arch.Tensor {
	return arch.Tensor(o.e.a.view3d(o.ctx, cTensor(x), int64(ne0), int64(ne1), int64(ne2), uintptr(4*s1), uintptr(4*s2), uintptr(4*off)))
}

func (o *graphOps) Permute(x arch.Tensor, ax0, ax1, ax2, ax3 int) arch.Tensor {
	return arch.Tensor(o.e.a.permute(o.ctx, cTensor(x), int32(ax0), int32(ax1), int32(ax2), int32(ax3)))
}

func (o *graphOps) Concat(x, y arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.concat(o.ctx, cTensor(x), cTensor(y), 0))
}

// AttentionMLA writes the latents into the key cache and attends over
// them as llama.cpp's build_attn does with its v_mla: per sequence with
// flash attention, or over the gathered slots; the values a view of the
// keys' first KVRank elements, then each head's output times its matrix
// of vb.
func (o *graphOps) AttentionMLA(layer int, q, kv, vb arch.Tensor, scale float32) arch.Tensor {
	e, a, ctx, c := o.e, o.e.a, o.ctx, o.e.cfg
	hd, rank, heads, vDim := int64(c.HeadDim), int64(c.MLA.KVRank), int64(c.Heads), int64(c.MLA.ValueLength)
	kw := a.setRows(ctx, e.kc[layer], a.reshape2d(ctx, cTensor(kv), int64(e.kvDim), o.nt), o.in.kIdx)
	if e.s.flash {
		return arch.Tensor(e.seqAttentionMLA(ctx, o.in, o.layerMask(layer), cTensor(q), kw, cTensor(vb), scale))
	}
	lat := o.gather(kw) // [hd, 1, span] F32
	qp := a.permute(ctx, cTensor(q), 0, 2, 1, 3)
	kq := a.mulMat(ctx, a.permute(ctx, lat, 0, 2, 1, 3), qp) // [span, n, heads]
	kq = a.softMaxExt(ctx, kq, o.layerMask(layer), scale, 0)
	row := uintptr(4 * hd)
	vals := a.cont(ctx, a.permute(ctx, a.view3d(ctx, lat, rank, 1, o.sp, row, row, 0), 1, 2, 0, 3)) // [span, rank, 1]
	kqv := a.mulMat(ctx, cTensor(vb), a.mulMat(ctx, vals, kq))                                      // [vDim, n, heads]
	return arch.Tensor(a.cont2d(ctx, a.permute(ctx, kqv, 0, 2, 1, 3), vDim*heads, o.nt))
}

// seqAttentionMLA is seqAttention for AttentionMLA: each sequence's
// queries attend over its latents (in place or gathered, in the cache's
// type), the values a view of their first KVRank elements; each head's
// output is then multiplied by its matrix of vb (llama.cpp's order:
// flash attention, permute, mul_mat, permute back).
func (e *Executor) seqAttentionMLA(ctx cCtx, in inputs, mask, q, kw, vb cTensor, scale float32) cTensor {
	a, c := e.a, e.cfg
	hd, rank, heads, vDim, bs := int64(c.HeadDim), int64(c.MLA.KVRank), int64(c.Heads), int64(c.MLA.ValueLength), e.blockSize
	qDim, row := hd*heads, a.rowSize(e.kvType, hd)
	out := a.newTensor2d(ctx, typeF32, vDim*heads, int64(len(e.s.rowIdx)))
	for i := range e.s.seqs {
		sa := &e.s.seqs[i]
		n, span := int64(sa.n), int64(sa.span)
		src, off := kw, uintptr(sa.first)*row
		if !sa.inPlace {
			src, off = e.gatherBlocks(ctx, kw, a.view1d(ctx, in.blocks, int64(sa.span/bs), uintptr(4*sa.gather))), 0
		}
		keys := a.permute(ctx, a.view3d(ctx, src, hd, 1, span, row, row, off), 0, 2, 1, 3)   // [hd, span, 1]
		vals := a.permute(ctx, a.view3d(ctx, src, rank, 1, span, row, row, off), 0, 2, 1, 3) // [rank, span, 1]
		qs := a.permute(ctx, a.view3d(ctx, q, hd, heads, n, uintptr(4*hd), uintptr(4*qDim), uintptr(4*qDim)*uintptr(sa.t0)), 0, 2, 1, 3)
		m := a.view2d(ctx, mask, span, n, uintptr(2*sa.span), uintptr(2*sa.mask))
		fa := a.flashAttnExt(ctx, qs, keys, vals, m, scale, 0, 0) // [rank, heads, n]
		o := a.mulMat(ctx, vb, a.permute(ctx, fa, 0, 2, 1, 3))    // [vDim, n, heads]
		o = a.reshape2d(ctx, a.cont(ctx, a.permute(ctx, o, 0, 2, 1, 3)), vDim*heads, n)
		out = a.setRows(ctx, out, o, a.view1d(ctx, in.rowIdx, n, uintptr(8*sa.t0)))
	}
	return out
}
