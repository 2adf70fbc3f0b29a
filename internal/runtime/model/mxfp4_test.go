package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMXFP4RoundTrip: values on the grid of a block's scale come back
// exactly; others to their nearest code (within half the widest step, 4·d)
// or clipped to the largest; the scale byte is floor(log2(max |x|)) - 2 +
// 127.
func TestMXFP4RoundTrip(t *testing.T) {
	// Max |x| 6 = 1.5·2^2: scale byte 127, d 0.5, codes' values 0…6.
	src := make([]float32, 32)
	grid := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	for i := range src {
		src[i] = grid[i%8]
		if i%3 == 0 {
			src[i] = -src[i]
		}
	}
	b, err := EncodeMXFP4(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != MXFP4BlockBytes || b[0] != 127 {
		t.Fatalf("%d bytes, scale byte %d; want 17 and 127", len(b), b[0])
	}
	got, _ := DecodeMXFP4(b)
	for i := range src {
		if got[i] != src[i] {
			t.Errorf("weight %d: %g, want %g", i, got[i], src[i])
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	src = make([]float32, 256)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	b, _ = EncodeMXFP4(src)
	got, _ = DecodeMXFP4(b)
	for blk := range 8 {
		d := e8m0Half(b[blk*MXFP4BlockBytes])
		for i := blk * 32; i < (blk+1)*32; i++ {
			// The largest code is 12·d = 1.5·2^floor(log2 max): larger
			// weights (up to 2^floor(log2 max+1)) clip to it.
			if top := 12 * d; math.Abs(float64(src[i])) > float64(top) {
				if got[i] != float32(math.Copysign(float64(top), float64(src[i]))) {
					t.Errorf("weight %d: %g decodes to %g, want ±%g", i, src[i], got[i], top)
				}
			} else if diff := math.Abs(float64(got[i] - src[i])); diff > float64(2*d) {
				t.Errorf("weight %d: %g decodes to %g, more than half a step %g away", i, src[i], got[i], 2*d)
			}
		}
	}
	if _, err := EncodeMXFP4(make([]float32, 31)); err == nil {
		t.Error("encoded 31 weights")
	}
}
