//go:build linux && (amd64 || arm64)

package ggml

import "unsafe"

// Gathering a cache's rows in its own type. ggml's get_rows widens every
// type but I32 to F32, so gathering an F16 cache's blocks and casting
// them back reads and writes each element 12 bytes' worth where a copy
// of its bytes moves 4 (and runs one node where the cast adds a second).
// A view of the cache's bytes as I32 gathers them unchanged, and a view
// of the gathered bytes as the cache's type reads them back. ggml has no
// call that changes a view's type, so retype writes the view's type and
// first dimension's fields itself (ggml.h's struct ggml_tensor, whose
// layout the pinned ggml release fixes); retypeWorks checks that ggml
// reads them as meant before the executor relies on it.

// ggml_tensor's field offsets (ggml.h, 64-bit): type, buffer, ne, nb, src.
const (
	offType = 0
	offBuf  = 8
	offNe   = 16
	offNb   = 48
	offSrc  = 152
)

// retype makes view v (a view, which owns no bytes) read its bytes as typ
// with ne0 elements in its first dimension, nb0 bytes apart (ggml's nb[0]:
// the type's size, a block's for a quantized type). The other dimensions
// and strides stay.
func retype(v cTensor, typ int32, ne0 int64, nb0 uintptr) {
	p := cPtr(uintptr(v))
	*(*int32)(unsafe.Add(p, offType)) = typ
	*(*int64)(unsafe.Add(p, offNe)) = ne0
	*(*uintptr)(unsafe.Add(p, offNb)) = nb0
}

// cPtr is the C address p as a pointer (C memory, which Go's collector
// neither moves nor frees).
func cPtr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// retypeWorks reports whether ggml reads a retyped view as retype means
// it: an I32 view of 8 elements seen as 16 F16 ones has ggml's 16
// elements and 32 bytes, and the F16 one seen back as I32 its 8.
func (a *api) retypeWorks() bool {
	ctx := a.initCtx(initParams{MemSize: 4 * a.tensorOverhead(), NoAlloc: true})
	if ctx == 0 {
		return false
	}
	defer a.freeCtx(ctx)
	t := a.newTensor1d(ctx, typeI32, 8)
	v := a.view1d(ctx, t, 8, 0)
	retype(v, typeF16, 16, 2)
	ok := a.nelements(v) == 16 && a.nbytes(v) == 32
	w := a.view1d(ctx, a.newTensor1d(ctx, typeF16, 16), 16, 0)
	retype(w, typeI32, 8, 4)
	return ok && a.nelements(w) == 8 && a.nbytes(w) == 32
}
