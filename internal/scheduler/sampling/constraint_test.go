package sampling

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestApplyMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 63, 64, 65, 200} {
		logits := make([]float32, n)
		mask := make([]uint64, (n+63)/64)
		want := make([]bool, n)
		for i := range n {
			logits[i] = float32(i)
			if rng.IntN(3) == 0 {
				mask[i/64] |= 1 << (i % 64)
				want[i] = true
			}
		}
		if n == 200 {
			mask[1] = ^uint64(0) // a fully open word
			for i := 64; i < 128; i++ {
				want[i] = true
			}
		}
		ApplyMask(logits, mask)
		for i := range n {
			if want[i] != Allowed(mask, int32(i)) {
				t.Fatalf("n=%d: Allowed(%d) disagrees with the mask", n, i)
			}
			if got := !math.IsInf(float64(logits[i]), -1); got != want[i] || (got && logits[i] != float32(i)) {
				t.Errorf("n=%d: logit %d = %v, allowed %v", n, i, logits[i], want[i])
			}
		}
	}
	// A mask shorter than the vocabulary disallows the rest.
	logits := []float32{1, 2, 3}
	ApplyMask(logits[:3], nil)
	for _, l := range logits {
		if !math.IsInf(float64(l), -1) {
			t.Errorf("empty mask left %v", logits)
		}
	}
	if Allowed(nil, 0) || Allowed([]uint64{1}, -1) || Allowed([]uint64{1}, 64) {
		t.Error("Allowed outside the mask")
	}
}
