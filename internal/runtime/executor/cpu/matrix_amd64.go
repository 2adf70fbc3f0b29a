//go:build amd64 && !purego

package cpu

// The amd64 kernels (matrix_amd64.s) use AVX2 and FMA when the CPU and OS
// support them; elsewhere the pure-Go kernels in matrix.go run.
//
// Every dot product, whichever kernel tile computes it, is summed the same
// way (the "canonical" order): an 8-lane accumulator takes one FMA per
// 8-column step in ascending k, its lanes are then reduced as
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), and the k%8 tail columns are added
// one at a time in Go. Q8_0 weights are first widened to f32 (q·scale, which
// is exact) and then summed the same way. So a token's outputs are
// bit-identical whatever tile (4 rows × 1, 2 or 3 tokens, or 1 × 1) computes
// them, and batching changes nothing.

// useSIMD says whether the AVX2+FMA kernels run; tests turn it off to check
// them against the pure-Go kernels.
var useSIMD = hasAVX2FMA()

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

func hasAVX2FMA() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if ecx1&(fma|osxsave|avx) != fma|osxsave|avx {
		return false
	}
	// The OS must save the XMM and YMM state.
	if xcr0, _ := xgetbv(); xcr0&6 != 6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx2 = 1 << 5
	return ebx7&avx2 != 0
}

// The f32 kernels: rows of w are ldw bytes apart, tokens of x ldx bytes,
// and out's token rows ldo bytes; n is the bytes of each row to sum (a
// multiple of 32). fNxT computes N rows × T tokens, writing N consecutive
// floats per token; the blocked ones (T > 1) also prefetch n bytes from pf
// into L2.

//go:noescape
func f32x4x3(w *float32, ldw int, x *float32, ldx int, n int, out *float32, ldo int, pf *float32)

//go:noescape
func f32x4x2(w *float32, ldw int, x *float32, ldx int, n int, out *float32, ldo int, pf *float32)

//go:noescape
func f32x4x1(w *float32, ldw int, x *float32, n int, out *float32)

//go:noescape
func f32dot(w, x *float32, n int) float32

// The Q8_0 kernels: q rows are ldq bytes apart (their scales lds bytes
// apart), nb is the 32-column blocks to sum.

//go:noescape
func q8x4x2(q *int8, ldq int, sc *float32, lds int, x *float32, ldx int, nb int, out *float32, ldo int)

//go:noescape
func q8x4x1(q *int8, ldq int, sc *float32, lds int, x *float32, nb int, out *float32)

//go:noescape
func q8dot(q *int8, sc *float32, x *float32, nb int) float32

// runSIMD is run's AVX2 path (bias aside).
func (j *matmulJob) runSIMD(lo, hi int) {
	w, k, n := j.w, j.w.cols, j.w.rows
	x, out, tokens := j.x, j.out, j.tokens
	if lo >= hi || tokens == 0 {
		return
	}
	if w.q8 != nil {
		j.runQ8(lo, hi)
		return
	}
	k8 := k &^ 7
	if k8 == 0 {
		for t := range tokens {
			clear(out[t*n+lo : t*n+hi])
		}
	} else {
		ldw, ldx, ldo, nb := k*f32Size, k*f32Size, n*f32Size, k8*f32Size
		r := lo
		for ; r+4 <= hi; r += 4 {
			_ = w.f32[(r+4)*k-1] // the four rows are in bounds
			wp := &w.f32[r*k]
			// The token groups' first four calls each prefetch (into L2)
			// one of the next four rows, so they arrive while these are
			// computed rather than when they are needed; later calls
			// prefetch their own rows, a no-op.
			var pf [4]*float32
			for i := range pf {
				pf[i] = wp
				if r+8 <= hi {
					pf[i] = &w.f32[(r+4+i)*k]
				}
			}
			pf0 := pf[0]
			t := 0
			for g := 1; t+3 <= tokens; t, g = t+3, g+1 {
				_, _ = x[(t+3)*k-1], out[(t+2)*n+r+3]
				f32x4x3(wp, ldw, &x[t*k], ldx, nb, &out[t*n+r], ldo, pf0)
				pf0 = wp
				if g < 4 {
					pf0 = pf[g]
				}
			}
			switch tokens - t {
			case 2:
				_, _ = x[(t+2)*k-1], out[(t+1)*n+r+3]
				f32x4x2(wp, ldw, &x[t*k], ldx, nb, &out[t*n+r], ldo, pf0)
			case 1:
				_, _ = x[(t+1)*k-1], out[t*n+r+3]
				f32x4x1(wp, ldw, &x[t*k], nb, &out[t*n+r])
			}
		}
		for ; r < hi; r++ {
			_ = w.f32[(r+1)*k-1]
			for t := range tokens {
				_ = x[(t+1)*k-1]
				out[t*n+r] = f32dot(&w.f32[r*k], &x[t*k], nb)
			}
		}
	}
	if k8 < k {
		for t := range tokens {
			xt := x[t*k+k8 : (t+1)*k]
			o := out[t*n : (t+1)*n]
			for r := lo; r < hi; r++ {
				s := o[r]
				for i, v := range w.f32[r*k+k8 : (r+1)*k] {
					s += v * xt[i]
				}
				o[r] = s
			}
		}
	}
}

func (j *matmulJob) runQ8(lo, hi int) {
	w, k, n := j.w, j.w.cols, j.w.rows
	x, out, tokens := j.x, j.out, j.tokens
	nb := k / 32
	if nb == 0 {
		for t := range tokens {
			clear(out[t*n+lo : t*n+hi])
		}
		return
	}
	ldx, ldo := k*f32Size, n*f32Size
	r := lo
	for ; r+4 <= hi; r += 4 {
		_, _ = w.q8[(r+4)*k-1], w.scales[(r+4)*nb-1]
		qp, sp := &w.q8[r*k], &w.scales[r*nb]
		t := 0
		for ; t+2 <= tokens; t += 2 {
			_, _ = x[(t+2)*k-1], out[(t+1)*n+r+3]
			q8x4x2(qp, k, sp, nb*f32Size, &x[t*k], ldx, nb, &out[t*n+r], ldo)
		}
		if t < tokens {
			_, _ = x[(t+1)*k-1], out[t*n+r+3]
			q8x4x1(qp, k, sp, nb*f32Size, &x[t*k], nb, &out[t*n+r])
		}
	}
	for ; r < hi; r++ {
		_, _ = w.q8[(r+1)*k-1], w.scales[(r+1)*nb-1]
		for t := range tokens {
			_ = x[(t+1)*k-1]
			out[t*n+r] = q8dot(&w.q8[r*k], &w.scales[r*nb], &x[t*k], nb)
		}
	}
}

func setSIMD(on bool) { useSIMD = on && hasAVX2FMA() }

//go:noescape
func axpyF32(dst, x *float32, a float32, n int)

// dot is dotF32, in the SIMD kernels' order where they run.
func dot(w, x []float32) float32 {
	if !useSIMD {
		return dotF32(w, x)
	}
	k := len(x)
	w = w[:k]
	k8 := k &^ 7
	var s float32
	if k8 > 0 {
		s = f32dot(&w[0], &x[0], k8*f32Size)
	}
	for i := k8; i < k; i++ {
		s += w[i] * x[i]
	}
	return s
}

//go:noescape
func f32pairs4(k *float32, ldk int, q *float32, ldq int, n int, out *float32)

//go:noescape
func axpySegF32(dst, x, w *float32, nseg, seg int)

// dotPairs4 sets out[i] = dot(k[i*ldk:i*ldk+n], q[i*ldq:i*ldq+n]) for
// i < 4; only with useSIMD.
func dotPairs4(k []float32, ldk int, q []float32, ldq, n int, out []float32) {
	_, _, _ = k[3*ldk+n-1], q[3*ldq+n-1], out[3]
	n8 := n &^ 7
	if n8 > 0 {
		f32pairs4(&k[0], ldk*f32Size, &q[0], ldq*f32Size, n8*f32Size, &out[0])
	} else {
		clear(out[:4])
	}
	if n8 < n {
		for r := range 4 {
			s := out[r]
			kr, qr := k[r*ldk+n8:r*ldk+n], q[r*ldq+n8:r*ldq+n]
			for i, v := range kr {
				s += v * qr[i]
			}
			out[r] = s
		}
	}
}

// axpyFast is axpy, with FMA where the SIMD kernels run.
func axpyFast(dst, x []float32, a float32) {
	if !useSIMD {
		axpy(dst, x, a)
		return
	}
	x = x[:len(dst)]
	n8 := len(dst) &^ 7
	if n8 > 0 {
		axpyF32(&dst[0], &x[0], a, n8*f32Size)
	}
	for i := n8; i < len(dst); i++ {
		dst[i] += a * x[i]
	}
}
