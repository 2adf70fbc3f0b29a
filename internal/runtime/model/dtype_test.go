package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestF16(t *testing.T) {
	for h := range 1 << 16 {
		f := F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("%#04x → %g → %#04x", h, f, back)
		}
	}
	for _, tc := range []struct {
		f    float32
		want uint16
	}{{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {1e6, 0x7c00}, {5.960464477539063e-08, 1}, {1e-9, 0}, {1 + 1.0/2048, 0x3c00}, {1 + 3.0/2048, 0x3c02}} {
		if got := F32ToF16(tc.f); got != tc.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", tc.f, got, tc.want)
		}
	}
	if got := BF16ToF32(F32ToBF16(1.00390625)); got != 1 {
		t.Errorf("bf16 rounds 1.00390625 to %g, want 1 (ties to even)", got)
	}
}

func TestQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	data, err := Encode(Q8_0, x)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	Dequantize(Q8_0, y, data)
	for b := 0; b < len(x); b += Q8Block {
		var amax float64
		for _, v := range x[b : b+Q8Block] {
			amax = max(amax, math.Abs(float64(v)))
		}
		for i := b; i < b+Q8Block; i++ {
			// Half a quantization step, plus the f16 rounding of the scale.
			if d := math.Abs(float64(x[i] - y[i])); d > amax/127*0.5+amax*1e-3 {
				t.Fatalf("element %d: %g dequantized to %g", i, x[i], y[i])
			}
		}
	}
	if _, err := Encode(Q8_0, x[:40]); err == nil {
		t.Error("Q8_0 of 40 elements: no error")
	}
}
