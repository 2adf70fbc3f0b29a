package engine

import (
	"slices"
	"testing"
)

// TestStateSlotsLowestFirst: take gives the lowest free running slot,
// whatever order the slots came back in, so that sequences admitted
// together run in consecutive ascending slots (which the ggml executor
// reads in place).
func TestStateSlotsLowestFirst(t *testing.T) {
	p, running := newStateSlots(8, 0, 8, false, CheckpointNone)
	if running != 8 {
		t.Fatalf("%d running slots, want 8", running)
	}
	seqs := make([]*sequence, 8)
	var got []int
	for i := range seqs {
		seqs[i] = &sequence{}
		p.take(seqs[i])
		got = append(got, seqs[i].slot)
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Fatalf("slots %v, want %v", got, want)
	}
	for _, i := range []int{5, 1, 6, 2} { // finish out of order
		p.give(seqs[i])
	}
	got = got[:0]
	for range 4 {
		s := &sequence{}
		p.take(s)
		got = append(got, s.slot)
	}
	if want := []int{1, 2, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("slots %v after giving back 5, 1, 6, 2; want %v", got, want)
	}
}
