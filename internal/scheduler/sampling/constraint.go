package sampling

import mathbits "math/bits"

// Constraint restricts one request's output to a language: a JSON schema,
// a regular expression, a list of choices, a tool-call format. The engine
// asks it, before every sampled token, which tokens may come next, masks
// the others out of the logits (after any logit processors, before
// temperature, top-k and top-p), samples, and tells it the token.
//
// Contract:
//   - The engine calls a request's Constraint from its iteration loop only,
//     never concurrently, and in the order Mask, Advance for each token.
//   - Mask returns a bitset over the vocabulary: token id is allowed when bit
//     id%64 of word id/64 is set. It is valid until the next call. remaining
//     is how many tokens the request may still generate, this one included:
//     a constraint keeps the output completable within that budget, so
//     max_tokens never truncates it into something invalid when the budget
//     allows a valid output at all. End-of-sequence and stop token ids are
//     allowed exactly when the output so far is complete.
//   - Advance consumes the sampled token. It returns false when the token
//     was not allowed (an executor that samples by itself may produce one);
//     the constraint is then unchanged.
//   - Done reports that the output is complete and nothing may follow (the
//     engine then finishes the request with reason stop).
//   - A Constraint holds per-request state; it is not reused.
type Constraint interface {
	Mask(remaining int) []uint64
	Advance(token int32) bool
	Done() bool
}

// ApplyMask sets the logits of tokens not in mask to -Inf. Words that
// allow all 64 of their tokens are skipped, so a mostly-open mask costs one
// pass over the bitset.
func ApplyMask(logits []float32, mask []uint64) {
	n := len(logits)
	for w, bits := range mask {
		if bits == ^uint64(0) {
			continue
		}
		base := w * 64
		if base >= n {
			return
		}
		if bits == 0 {
			fill(logits[base:min(base+64, n)])
			continue
		}
		// Only the disallowed tokens are visited.
		for off := ^bits; off != 0; off &= off - 1 {
			if i := base + mathbits.TrailingZeros64(off); i < n {
				logits[i] = negInf
			}
		}
	}
	if tail := len(mask) * 64; tail < n {
		fill(logits[tail:])
	}
}

func fill(s []float32) {
	for i := range s {
		s[i] = negInf
	}
}

// Allowed reports whether mask allows token id.
func Allowed(mask []uint64, id int32) bool {
	w := int(id) >> 6
	return id >= 0 && w < len(mask) && mask[w]&(1<<(uint(id)&63)) != 0
}
