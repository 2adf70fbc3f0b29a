package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// randMatrix returns a rows × cols matrix, f32 or Q8_0 (cols a multiple of
// 32), whose f32 weights start off one float past an aligned allocation.
func randMatrix(rng *rand.Rand, rows, cols int, q8 bool) *matrix {
	m := &matrix{rows: rows, cols: cols}
	if q8 {
		m.q8 = make([]int8, rows*cols)
		for i := range m.q8 {
			m.q8[i] = int8(rng.IntN(256) - 128)
		}
		m.scales = make([]float32, rows*cols/32)
		for i := range m.scales {
			m.scales[i] = model.F16ToF32(model.F32ToF16(rng.Float32() * 0.01))
		}
		return m
	}
	m.f32 = make([]float32, rows*cols+1)[1:]
	for i := range m.f32 {
		m.f32[i] = rng.Float32()*2 - 1
	}
	return m
}

func (m *matrix) at(r, c int) float64 {
	if m.q8 != nil {
		return float64(m.q8[r*m.cols+c]) * float64(m.scales[(r*m.cols+c)/32])
	}
	return float64(m.f32[r*m.cols+c])
}

// matmulWith runs the job over [0, rows) in pieces split at cuts, with or
// without the SIMD kernels.
func matmulWith(simd bool, w *matrix, x, bias []float32, tokens int, cuts ...int) []float32 {
	defer func(old bool) { setSIMD(old) }(useSIMD)
	setSIMD(simd)
	out := make([]float32, tokens*w.rows+1)[1:]
	j := &matmulJob{w: w, x: x, out: out, bias: bias, tokens: tokens}
	lo := 0
	for _, c := range append(cuts, w.rows) {
		j.run(0, lo, c)
		lo = c
	}
	return out
}

// TestMatmulKernels checks each kernel path against exact float64 dot
// products, within the rounding bound of its summation order, and checks
// the SIMD path's results do not depend on how rows and tokens are tiled.
func TestMatmulKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type shape struct {
		rows, cols, tokens int
		q8                 bool
	}
	var shapes []shape
	for _, rows := range []int{1, 3, 4, 5, 8, 13} {
		for _, cols := range []int{1, 7, 8, 9, 31, 64, 100} {
			for _, tokens := range []int{1, 2, 3, 4, 5, 7} {
				shapes = append(shapes, shape{rows, cols, tokens, false})
			}
		}
		for _, cols := range []int{32, 96} {
			for _, tokens := range []int{1, 2, 3, 5} {
				shapes = append(shapes, shape{rows, cols, tokens, true})
			}
		}
	}
	shapes = append(shapes, shape{36, 768, 11, false}, shape{20, 768, 9, true}, shape{6, 0, 2, false})
	for _, s := range shapes {
		t.Run(fmt.Sprintf("%dx%dx%d/q8=%v", s.rows, s.cols, s.tokens, s.q8), func(t *testing.T) {
			w := randMatrix(rng, s.rows, s.cols, s.q8)
			x := make([]float32, s.tokens*s.cols+1)[1:]
			for i := range x {
				x[i] = rng.Float32()*2 - 1
			}
			bias := make([]float32, s.rows)
			for i := range bias {
				bias[i] = rng.Float32()
			}
			paths := []bool{false}
			if useSIMD {
				paths = append(paths, true)
			}
			for _, simd := range paths {
				got := matmulWith(simd, w, x, bias, s.tokens)
				// A summation of n terms rounds to within n·u·Σ|terms|; the
				// SIMD order has a chain of cols/8 FMAs, three lane adds and
				// the cols%8 tail, then the bias.
				n := s.cols + 1
				if simd {
					n = s.cols/8 + 3 + s.cols%8 + 1
				}
				for tok := range s.tokens {
					for r := range s.rows {
						want, mag := float64(bias[r]), math.Abs(float64(bias[r]))
						for c := range s.cols {
							p := w.at(r, c) * float64(x[tok*s.cols+c])
							want += p
							mag += math.Abs(p)
						}
						g := float64(got[tok*s.rows+r])
						if tol := 1.01 * float64(n) * 0x1p-24 * mag; math.Abs(g-want) > tol {
							t.Fatalf("simd=%v out[%d][%d] = %v, want %v ± %v", simd, tok, r, g, want, tol)
						}
					}
				}
			}
			if !useSIMD {
				return
			}
			// Bit-identical whatever the tiling: each token alone, and rows
			// split at odd places.
			all := matmulWith(true, w, x, bias, s.tokens)
			for tok := range s.tokens {
				alone := matmulWith(true, w, x[tok*s.cols:(tok+1)*s.cols], bias, 1)
				if !slices.Equal(alone, all[tok*s.rows:(tok+1)*s.rows]) {
					t.Fatalf("token %d alone: %v, batched: %v", tok, alone, all[tok*s.rows:(tok+1)*s.rows])
				}
			}
			var cuts []int
			for c := 1 + rng.IntN(3); c < s.rows; c += 1 + rng.IntN(5) {
				cuts = append(cuts, c)
			}
			if split := matmulWith(true, w, x, bias, s.tokens, cuts...); !slices.Equal(split, all) {
				t.Fatalf("rows split at %v: %v, whole: %v", cuts, split, all)
			}
		})
	}
}

// TestAttentionKernels checks the batched score and value kernels give
// exactly what one head at a time gives, for head sizes with and without
// a tail and for shared (GQA) keys.
func TestAttentionKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	randVec := func(n int) []float32 {
		v := make([]float32, n+1)[1:]
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
		return v
	}
	for _, hd := range []int{4, 8, 12, 16, 64, 68} {
		for _, c := range []struct{ heads, group int }{{12, 1}, {8, 4}, {6, 2}, {5, 1}} {
			kv := c.heads / c.group * hd
			k, q := randVec(kv), randVec(c.heads*hd)
			for h0 := range c.heads {
				for h1 := h0 + 1; h1 <= c.heads; h1++ {
					got := make([]float32, h1-h0)
					scoreRow(k, q, h0, h1, c.group, hd, got)
					for h := h0; h < h1; h++ {
						g := h / c.group
						if want := dot(k[g*hd:(g+1)*hd], q[h*hd:(h+1)*hd]); got[h-h0] != want {
							t.Fatalf("hd %d heads %d/%d [%d,%d): head %d score %v, want %v", hd, c.heads, c.group, h0, h1, h, got[h-h0], want)
						}
					}
				}
			}
			if c.group != 1 {
				continue
			}
			o, want := randVec(c.heads*hd), make([]float32, c.heads*hd)
			copy(want, o)
			v, w := randVec(c.heads*hd), randVec(c.heads)
			axpySeg(o, v, w, hd)
			for h := range c.heads {
				axpyFast(want[h*hd:(h+1)*hd], v[h*hd:(h+1)*hd], w[h])
			}
			if !slices.Equal(o, want) {
				t.Fatalf("hd %d: axpySeg %v, want %v", hd, o, want)
			}
		}
	}
}
