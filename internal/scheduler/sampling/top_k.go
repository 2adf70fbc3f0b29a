package sampling

import (
	"cmp"
	"slices"
)

// topK returns the k largest logits (0 < k < len(logits)) as candidates,
// largest first; ties go to the lower id, NaN counts as -Inf.
//
// It keeps a min-heap of the best k seen so far: one comparison with the
// heap's root rejects almost every token (in random order only about
// k·ln(V/k) of V tokens enter the heap), so selection costs about
// O(V + k·log(V/k)·log k) and the final sort O(k log k), instead of a full
// sort's O(V log V).
func (s *Sampler) topK(logits []float32, k int) []cand {
	h := slices.Grow(s.cands[:0], k)
	for i, v := range logits {
		if v != v {
			v = negInf
		}
		if len(h) < k {
			h = append(h, cand{id: int32(i), w: v})
			siftUp(h, len(h)-1)
			continue
		}
		// Ids arrive in increasing order, so an equal logit loses to the
		// one already kept.
		if v > h[0].w {
			h[0] = cand{id: int32(i), w: v}
			siftDown(h, 0)
		}
	}
	s.cands = h
	slices.SortFunc(h, byWeightDesc)
	return h
}

// worse orders the heap: the root is the candidate that would be dropped
// first.
func worse(a, b cand) bool {
	return a.w < b.w || (a.w == b.w && a.id > b.id)
}

func siftUp(h []cand, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !worse(h[i], h[parent]) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func siftDown(h []cand, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && worse(h[r], h[l]) {
			m = r
		}
		if !worse(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// byWeightDesc sorts heaviest first, ties by lower id: the order in which
// top-k and top-p take tokens.
func byWeightDesc(a, b cand) int {
	if c := cmp.Compare(b.w, a.w); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// before is byWeightDesc as a strict order.
func before(a, b cand) bool {
	return a.w > b.w || (a.w == b.w && a.id < b.id)
}
