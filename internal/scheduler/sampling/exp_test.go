package sampling

import (
	"math"
	"testing"
)

func TestExpWeights(t *testing.T) {
	// A dense grid over the whole range of exponents, in float64 relative
	// error before the rounding to float32.
	const n = 1 << 20
	logits := make([]float32, n+1)
	for i := range logits {
		logits[i] = float32(expCutoff * float64(i) / n)
	}
	w := make([]float32, len(logits))
	sum := expWeights(w, logits, 0, 1)
	wantSum := 0.0
	for i, v := range logits {
		want := 0.0
		if float64(v) > expCutoff {
			want = math.Exp(float64(v))
		}
		wantSum += float64(float32(want))
		// float32 rounding contributes up to 2^-24 ≈ 6e-8, or one
		// subnormal step (1.4e-45) below 2^-126.
		if d := math.Abs(float64(w[i]) - want); d > max(7e-8*want, 1.5e-45) || (want == 0) != (w[i] == 0) {
			t.Fatalf("weight of %v = %v, want %v (relative error %.2g)", v, w[i], want, d/want)
		}
	}
	if math.Abs(sum-wantSum) > 1e-7*wantSum {
		t.Errorf("sum = %v, want %v", sum, wantSum)
	}

	// Temperature, the cutoff, non-finite logits, and w aliasing logits.
	special := []float32{3, 2.5, -1, -50, float32(math.Inf(-1)), float32(math.NaN()), -200, 3}
	const invT = 1 / 0.7
	want := make([]float32, len(special))
	for i, v := range special {
		if x := (float64(v) - 3) * invT; x > expCutoff {
			want[i] = float32(math.Exp(x))
		}
	}
	expWeights(special, special, 3, invT)
	for i := range special {
		if math.Abs(float64(special[i]-want[i])) > 1e-7*float64(want[i]) {
			t.Errorf("weight %d = %v, want %v", i, special[i], want[i])
		}
	}
}

func BenchmarkExpWeights(b *testing.B) {
	logits := flat(32000, 3)
	w := make([]float32, len(logits))
	b.Run("math.Exp", func(b *testing.B) {
		for range b.N {
			for i, v := range logits {
				w[i] = float32(math.Exp(float64(v) - 5))
			}
		}
	})
	b.Run("expWeights", func(b *testing.B) {
		for range b.N {
			expWeights(w, logits, 5, 1)
		}
	})
}
