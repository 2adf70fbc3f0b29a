//go:build !amd64 || purego

package cpu

// useSIMD is false where there are no assembly kernels.
const useSIMD = false

func (j *matmulJob) runSIMD(lo, hi int) { panic("cpu: no SIMD kernels") }

func setSIMD(bool) {}

func dot(w, x []float32) float32 { return dotF32(w, x) }

func dotPairs4(k []float32, ldk int, q []float32, ldq, n int, out []float32) {
	panic("cpu: no SIMD kernels")
}

func axpySegF32(dst, x, w *float32, nseg, seg int) { panic("cpu: no SIMD kernels") }

func axpyFast(dst, x []float32, a float32) { axpy(dst, x, a) }
