//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"sort"
	"strings"
	"unsafe"
)

// Weight placement, the way llama.cpp chooses it. A device may offer extra
// buffer types for weights besides its default one: ggml's CPU backend
// offers, where the CPU has what they need, an AMX buffer (Sapphire Rapids
// and later: int8 tile multiplies) and a "repack" buffer (CPU_REPACK),
// which reorders Q4_0, Q4_K, Q8_0, IQ4_NL … blocks when the weights are
// set, into the interleaved layout of its AVX2/AVX-512/NEON GEMM kernels.
// Each matrix multiplied by the activations goes to the first extra type
// whose device says it runs that multiply (ggml_backend_dev_supports_op on
// a mul_mat with the matrix in that type, as llama.cpp's
// weight_buft_supported does); everything else stays in the default
// buffer, a GGUF file's mapping used in place on the CPU. A repacked
// matrix is a copy (the file's bytes are not in the kernels' layout), so
// its pages of the mapping are only read once, at start.

// placement is where the executor put its weights, for the start-up log.
type placement struct {
	// bufts are the extra buffer types the device offered, in its order.
	bufts []string
	// tensors and bytes count the weights in each buffer type (the default
	// one named by defaultBuft).
	tensors map[string]int
	bytes   map[string]uint64
}

// String is, per buffer type, the weights it holds: "CPU_REPACK: 169
// tensors (470 MiB), CPU (mapped): 121 tensors (137 MiB)".
func (p placement) String() string {
	names := make([]string, 0, len(p.tensors))
	for n := range p.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: %d tensors (%d MiB)", n, p.tensors[n], p.bytes[n]>>20)
	}
	s := strings.Join(parts, ", ")
	if len(p.bufts) == 0 {
		return s + "; the device offers no extra weight buffer type"
	}
	return s + "; extra weight buffer types offered: " + strings.Join(p.bufts, ", ")
}

func (p *placement) add(buft string, bytes int) {
	if p.tensors == nil {
		p.tensors, p.bytes = map[string]int{}, map[string]uint64{}
	}
	p.tensors[buft]++
	p.bytes[buft] += uint64(bytes)
}

// extraBufts are the device's extra weight buffer types
// (ggml_backend_dev_get_extra_bufts, a registry function of the CPU
// backend; none elsewhere).
func (e *Executor) extraBufts() []cBuft {
	fn := e.a.regProcAddress(e.be.reg, "ggml_backend_dev_get_extra_bufts")
	if fn == 0 {
		return nil
	}
	var get func(cDev) unsafe.Pointer
	registerFunc(&get, fn)
	list := get(e.be.dev)
	var out []cBuft
	for i := 0; list != nil; i++ {
		b := *(*cBuft)(unsafe.Add(list, i*int(unsafe.Sizeof(cBuft(0)))))
		if b == 0 {
			break
		}
		out = append(out, b)
	}
	return out
}

// mulMatBuft returns the first of bufts whose device runs a mul_mat of a
// typ matrix of ne0×ne1 by F32 activations from it, or 0. The question is
// put to ggml with a stand-in matrix of the same type, row length and row
// count modulo 64 (what the kernels' interleaving depends on) but at most
// 127 rows, allocated in the buffer type: the extra types decide from the
// tensor's buffer and shape.
func (e *Executor) mulMatBuft(bufts []cBuft, typ int32, ne0, ne1 int64) cBuft {
	rows := ne1
	if rows >= 128 {
		rows = 64 + ne1%64
	}
	for _, buft := range bufts {
		if e.runsMulMat(buft, typ, ne0, rows) {
			return buft
		}
	}
	return 0
}

func (e *Executor) runsMulMat(buft cBuft, typ int32, ne0, ne1 int64) bool {
	wctx, err := e.newMetaCtx(1)
	if err != nil {
		return false
	}
	defer e.a.freeCtx(wctx)
	w := e.a.newTensor2d(wctx, typ, ne0, ne1)
	buf := e.a.allocCtxFromBuft(wctx, buft)
	if buf == 0 {
		return false
	}
	defer e.a.bufferFree(buf)
	opctx, err := e.newMetaCtx(2)
	if err != nil {
		return false
	}
	defer e.a.freeCtx(opctx)
	x := e.a.newTensor2d(opctx, typeF32, ne0, 32)
	return e.a.devSupportsOp(e.be.dev, e.a.mulMat(opctx, w, x))
}

// mulMatIDBuft is mulMatBuft for a mixture of experts' stacked matrices
// (ne0×ne1 each), which mul_mat_id multiplies: llama.cpp asks the same
// question of them (the repacked CPU buffer runs mul_mat_id too). The
// stand-in has two experts.
func (e *Executor) mulMatIDBuft(bufts []cBuft, typ int32, ne0, ne1 int64) cBuft {
	rows := ne1
	if rows >= 128 {
		rows = 64 + ne1%64
	}
	for _, buft := range bufts {
		if e.runsMulMatID(buft, typ, ne0, rows) {
			return buft
		}
	}
	return 0
}

func (e *Executor) runsMulMatID(buft cBuft, typ int32, ne0, ne1 int64) bool {
	const experts, tokens = 2, 32
	wctx, err := e.newMetaCtx(1)
	if err != nil {
		return false
	}
	defer e.a.freeCtx(wctx)
	w := e.a.newTensor3d(wctx, typ, ne0, ne1, experts)
	buf := e.a.allocCtxFromBuft(wctx, buft)
	if buf == 0 {
		return false
	}
	defer e.a.bufferFree(buf)
	opctx, err := e.newMetaCtx(3)
	if err != nil {
		return false
	}
	defer e.a.freeCtx(opctx)
	x := e.a.newTensor3d(opctx, typeF32, ne0, 1, tokens)
	ids := e.a.newTensor2d(opctx, typeI32, 1, tokens)
	return e.a.devSupportsOp(e.be.dev, e.a.mulMatID(opctx, w, x, ids))
}
