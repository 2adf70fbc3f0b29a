package sampling

import (
	"math"
	"testing"
)

func TestExpNeg(t *testing.T) {
	worst, at := 0.0, 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := expCutoff * float64(i) / 2_000_000
		want := math.Exp(x)
		if rel := math.Abs(expNeg(x)-want) / want; rel > worst {
			worst, at = rel, x
		}
	}
	if worst > 1e-8 {
		t.Errorf("expNeg relative error %.3g at x=%v, want < 1e-8", worst, at)
	}
	for _, x := range []float64{0, -1e-300, -0.5 * math.Ln2, 0.5 * -math.Ln2 * (1 + 1e-15), -87.99999} {
		if rel := math.Abs(expNeg(x)-math.Exp(x)) / math.Exp(x); rel > 1e-8 {
			t.Errorf("expNeg(%v) = %v, want %v", x, expNeg(x), math.Exp(x))
		}
	}
}

func BenchmarkExp(b *testing.B) {
	xs := make([]float64, 4096)
	for i := range xs {
		xs[i] = expCutoff * float64(i) / float64(len(xs))
	}
	var sink float64
	b.Run("math.Exp", func(b *testing.B) {
		for i := range b.N {
			sink += math.Exp(xs[i%len(xs)])
		}
	})
	b.Run("expNeg", func(b *testing.B) {
		for i := range b.N {
			sink += expNeg(xs[i%len(xs)])
		}
	})
	_ = sink
}
