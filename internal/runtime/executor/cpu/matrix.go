package cpu

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// matrix is a weight matrix of rows × cols in the layout its kernel wants:
// f32 (F32, or F16/BF16 widened at load), or q8 (Q8_0 split into per-block
// scales and int8 weights, so the kernel converts no f16 per use).
type matrix struct {
	rows, cols int
	f32        []float32
	q8         []int8
	scales     []float32 // rows × cols/32
}

// f32Size is the bytes of a float32.
const f32Size = int(unsafe.Sizeof(float32(0)))

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func newMatrix(t *model.Tensor) (matrix, error) {
	if len(t.Shape) != 2 {
		return matrix{}, fmt.Errorf("tensor %s: shape %v is not a matrix", t.Name, t.Shape)
	}
	m := matrix{rows: t.Rows(), cols: t.Cols()}
	n := m.rows * m.cols
	switch t.Type {
	case model.F32:
		if littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%4 == 0 {
			// Read the (memory-mapped) weights in place.
			m.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(t.Data))), n)
		} else {
			m.f32 = t.Float32()
		}
	case model.F16, model.BF16:
		m.f32 = t.Float32()
	case model.Q8_0:
		nb := n / model.Q8Block
		m.q8 = make([]int8, n)
		m.scales = make([]float32, nb)
		for b := range nb {
			blk := t.Data[b*model.Q8BlockBytes : (b+1)*model.Q8BlockBytes]
			m.scales[b] = model.F16ToF32(binary.LittleEndian.Uint16(blk))
			for j, q := range blk[2:] {
				m.q8[b*model.Q8Block+j] = int8(q)
			}
		}
	default:
		return matrix{}, fmt.Errorf("tensor %s: unsupported type %s", t.Name, t.Type)
	}
	return m, nil
}

// matmulJob computes out[t][r] = dot(w[r], x[t]) (+ bias[r]) for t < tokens.
type matmulJob struct {
	w      *matrix
	x      []float32 // tokens × w.cols
	out    []float32 // tokens × w.rows
	bias   []float32
	tokens int
}

// tile is the rows each kernel call computes at once.
const tile = 4

func (j *matmulJob) run(_, lo, hi int) {
	if useSIMD {
		j.runSIMD(lo, hi)
	} else {
		j.runGo(lo, hi)
	}
	if j.bias != nil {
		n := j.w.rows
		for t := range j.tokens {
			o := j.out[t*n+lo : t*n+hi]
			for i, b := range j.bias[lo:hi] {
				o[i] += b
			}
		}
	}
}

// runGo is run's pure-Go path (bias aside), for CPUs without the assembly
// kernels (matrix_amd64.s).
func (j *matmulJob) runGo(lo, hi int) {
	w, k, n := j.w, j.w.cols, j.w.rows
	r := lo
	for ; r+tile <= hi; r += tile {
		t := 0
		if w.q8 == nil {
			w0, w1, w2, w3 := w.f32[r*k:(r+1)*k], w.f32[(r+1)*k:(r+2)*k], w.f32[(r+2)*k:(r+3)*k], w.f32[(r+3)*k:(r+4)*k]
			for ; t+2 <= j.tokens; t += 2 {
				a0, a1, a2, a3, b0, b1, b2, b3 := dotF32x4x2(w0, w1, w2, w3, j.x[t*k:(t+1)*k], j.x[(t+1)*k:(t+2)*k])
				o := j.out[t*n+r : t*n+r+4]
				o[0], o[1], o[2], o[3] = a0, a1, a2, a3
				o = j.out[(t+1)*n+r : (t+1)*n+r+4]
				o[0], o[1], o[2], o[3] = b0, b1, b2, b3
			}
		}
		for ; t < j.tokens; t++ {
			x := j.x[t*k : (t+1)*k]
			var s0, s1, s2, s3 float32
			if w.q8 != nil {
				s0, s1, s2, s3 = dotQ8x4(w, r, x)
			} else {
				s0, s1, s2, s3 = dotF32x4(w.f32[r*k:(r+1)*k], w.f32[(r+1)*k:(r+2)*k], w.f32[(r+2)*k:(r+3)*k], w.f32[(r+3)*k:(r+4)*k], x)
			}
			o := j.out[t*n+r : t*n+r+4]
			o[0], o[1], o[2], o[3] = s0, s1, s2, s3
		}
	}
	for ; r < hi; r++ {
		for t := range j.tokens {
			x := j.x[t*k : (t+1)*k]
			if w.q8 != nil {
				j.out[t*n+r] = dotQ8(w, r, x)
			} else {
				j.out[t*n+r] = dotF32(w.f32[r*k:(r+1)*k], x)
			}
		}
	}
}

// Every f32 dot product below is one running sum in ascending k, whichever
// kernel computes it, so results do not depend on the batch's shape (the
// assembly kernels keep an order of their own just as fixed). The
// main kernel takes four rows and two tokens: each weight load serves two
// tokens and each activation load four rows.

func dotF32(w, x []float32) float32 {
	w = w[:len(x)]
	var a float32
	for k, v := range x {
		a += w[k] * v
	}
	return a
}

func dotF32x4(w0, w1, w2, w3, x []float32) (float32, float32, float32, float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	var a0, a1, a2, a3 float32
	for k, v := range x {
		a0 += w0[k] * v
		a1 += w1[k] * v
		a2 += w2[k] * v
		a3 += w3[k] * v
	}
	return a0, a1, a2, a3
}

// dotF32x4x2 is dotF32x4 for two tokens x and y.
func dotF32x4x2(w0, w1, w2, w3, x, y []float32) (a0, a1, a2, a3, b0, b1, b2, b3 float32) {
	n := len(x)
	w0, w1, w2, w3, y = w0[:n], w1[:n], w2[:n], w3[:n], y[:n]
	for k, v := range x {
		u := y[k]
		r0, r1, r2, r3 := w0[k], w1[k], w2[k], w3[k]
		a0 += r0 * v
		b0 += r0 * u
		a1 += r1 * v
		b1 += r1 * u
		a2 += r2 * v
		b2 += r2 * u
		a3 += r3 * v
		b3 += r3 * u
	}
	return
}

// dotQ8 is row r of a Q8_0 matrix times x: per 32-block, the int8·f32 sum
// scaled by the block's scale.
func dotQ8(w *matrix, r int, x []float32) float32 {
	k := w.cols
	q := w.q8[r*k : (r+1)*k]
	sc := w.scales[r*k/32 : (r+1)*k/32]
	var acc float32
	for b, d := range sc {
		qb := q[b*32 : b*32+32]
		xb := x[b*32 : b*32+32]
		var a, c float32
		for j := 0; j < 32; j += 2 {
			a += float32(qb[j]) * xb[j]
			c += float32(qb[j+1]) * xb[j+1]
		}
		acc += d * (a + c)
	}
	return acc
}

func dotQ8x4(w *matrix, r int, x []float32) (float32, float32, float32, float32) {
	k := w.cols
	nb := k / 32
	q0, q1, q2, q3 := w.q8[r*k:(r+1)*k], w.q8[(r+1)*k:(r+2)*k], w.q8[(r+2)*k:(r+3)*k], w.q8[(r+3)*k:(r+4)*k]
	s0, s1, s2, s3 := w.scales[r*nb:(r+1)*nb], w.scales[(r+1)*nb:(r+2)*nb], w.scales[(r+2)*nb:(r+3)*nb], w.scales[(r+3)*nb:(r+4)*nb]
	var acc0, acc1, acc2, acc3 float32
	for b := range nb {
		xb := x[b*32 : b*32+32]
		b0, b1, b2, b3 := q0[b*32:b*32+32], q1[b*32:b*32+32], q2[b*32:b*32+32], q3[b*32:b*32+32]
		var a0, c0, a1, c1, a2, c2, a3, c3 float32
		for j := 0; j < 32; j += 2 {
			x0, x1 := xb[j], xb[j+1]
			a0 += float32(b0[j]) * x0
			c0 += float32(b0[j+1]) * x1
			a1 += float32(b1[j]) * x0
			c1 += float32(b1[j+1]) * x1
			a2 += float32(b2[j]) * x0
			c2 += float32(b2[j+1]) * x1
			a3 += float32(b3[j]) * x0
			c3 += float32(b3[j+1]) * x1
		}
		acc0 += s0[b] * (a0 + c0)
		acc1 += s1[b] * (a1 + c1)
		acc2 += s2[b] * (a2 + c2)
		acc3 += s3[b] * (a3 + c3)
	}
	return acc0, acc1, acc2, acc3
}
