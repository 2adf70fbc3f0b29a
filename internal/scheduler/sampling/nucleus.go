package sampling

import (
	"math/bits"
	"slices"
)

// nucleus reorders c so that c[:n] holds the smallest set of heaviest
// candidates (in byWeightDesc order) whose weight reaches target, and
// returns n and that weight. If the weights never reach target (rounding),
// all of c is the nucleus. c[:n] is not left sorted: the draw does not
// need it.
//
// It is a quickselect on weight: each partition around a pivot either keeps
// only the heavy side, when that alone reaches target, or takes the heavy
// side and the pivot whole and goes on into the light side. Expected cost
// O(len(c)) rather than a sort's O(len(c) log len(c)); after 2·log2 len(c)
// rounds without converging (an adversarial order) it falls back to
// sorting what is left.
func nucleus(c []cand, target float64) (int, float64) {
	lo, hi := 0, len(c)
	acc := 0.0
	for rounds := 2 * bits.Len(uint(len(c))); hi-lo > 32 && rounds > 0; rounds-- {
		m, heavy := partition(c[lo:hi])
		m += lo
		switch pivot := float64(c[m].w); {
		case acc+heavy >= target:
			hi = m
		case acc+heavy+pivot >= target:
			return m + 1, acc + heavy + pivot
		default:
			acc += heavy + pivot
			lo = m + 1
		}
	}
	slices.SortFunc(c[lo:hi], byWeightDesc)
	for i := lo; i < hi; i++ {
		acc += float64(c[i].w)
		if acc >= target {
			return i + 1, acc
		}
	}
	return hi, acc
}

// partition moves the candidates that come before a pivot (median of the
// first, middle and last) to the front and the pivot right after them, and
// returns the pivot's index and the weight of the candidates before it.
// len(c) >= 3.
func partition(c []cand) (int, float64) {
	last, mid := len(c)-1, len(c)/2
	if before(c[mid], c[0]) {
		c[mid], c[0] = c[0], c[mid]
	}
	if before(c[last], c[0]) {
		c[last], c[0] = c[0], c[last]
	}
	if before(c[mid], c[last]) {
		c[mid], c[last] = c[last], c[mid]
	}
	pivot := c[last]
	store, heavy := 0, 0.0
	for i := range last {
		if before(c[i], pivot) {
			c[i], c[store] = c[store], c[i]
			heavy += float64(c[store].w)
			store++
		}
	}
	c[store], c[last] = c[last], c[store]
	return store, heavy
}
