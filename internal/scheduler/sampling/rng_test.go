package sampling

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRNGReferenceOutputs(t *testing.T) {
	// The reference xoshiro256** outputs from the state {1, 2, 3, 4}, as in
	// the authors' C code (and the rand_xoshiro crate's tests).
	r := RNG{s: [4]uint64{1, 2, 3, 4}}
	var got []uint64
	for range 10 {
		got = append(got, r.Uint64())
	}
	want := []uint64{
		11520, 0, 1509978240, 1215971899390074240, 1216172134540287360,
		607988272756665600, 16172922978634559625, 8476171486693032832,
		10595114339597558777, 2904607092377533576,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("xoshiro256** outputs (-want +got):\n%s", diff)
	}

	// splitmix64 from 0 starts with 0xe220a8397b1dcdaf.
	if s := NewRNG(0).s[0]; s != 0xe220a8397b1dcdaf {
		t.Errorf("NewRNG(0) first state word = %#x, want 0xe220a8397b1dcdaf", s)
	}
}

func TestRNGSeedsAndCopies(t *testing.T) {
	a, b, c := NewRNG(42), NewRNG(42), NewRNG(43)
	for range 100 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("equal seeds gave different streams")
		}
	}
	if a.Uint64() == c.Uint64() && a.Uint64() == c.Uint64() {
		t.Error("seeds 42 and 43 gave the same stream")
	}

	fork := a // a value copy continues the same stream independently
	if x, y := a.Uint64(), fork.Uint64(); x != y {
		t.Errorf("copy of an RNG diverged: %d != %d", x, y)
	}

	var zero RNG
	ref := NewRNG(0)
	if zero.Uint64() != ref.Uint64() {
		t.Error("zero RNG does not behave as NewRNG(0)")
	}
}

func TestRNGFloat64(t *testing.T) {
	r := NewRNG(7)
	sum := 0.0
	const n = 100000
	for range n {
		f := r.Float64()
		if f < 0 || f >= 1 {
			t.Fatalf("Float64() = %v, outside [0, 1)", f)
		}
		sum += f
	}
	if mean := sum / n; mean < 0.495 || mean > 0.505 {
		t.Errorf("mean of %d Float64() = %v, want about 0.5", n, mean)
	}
}
