package sampling

import (
	"math"
	"slices"
)

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// Logprobs returns the log of the softmax normaliser of logits (so a
// token's log-probability is logits[id] minus it) and appends the top most
// likely tokens, most likely first (ties: lower id), with their
// log-probabilities to dst. It reads the logits as the model produced them,
// before any processor or temperature: the model's own distribution, as
// vLLM reports it by default. NaN counts as -Inf; if every logit is -Inf
// the normaliser is -Inf.
func (s *Sampler) Logprobs(logits []float32, top int, dst []TokenLogprob) (float64, []TokenLogprob) {
	_, max := argmax(logits)
	if max == negInf {
		return math.Inf(-1), dst
	}
	if math.IsInf(float64(max), 1) {
		// All the mass is on the +Inf tokens; the rest have -Inf.
		return float64(max), dst
	}
	s.weights = slices.Grow(s.weights[:0], len(logits))[:len(logits)]
	lse := float64(max) + math.Log(expWeights(s.weights, logits, max, 1))
	if top <= 0 {
		return lse, dst
	}
	var c []cand
	if top < len(logits) {
		c = s.topK(logits, top)
	} else {
		c = slices.Grow(s.cands[:0], len(logits))
		for i, v := range logits {
			if v != v {
				v = negInf
			}
			c = append(c, cand{id: int32(i), w: v})
		}
		s.cands = c
		slices.SortFunc(c, byWeightDesc)
	}
	for _, x := range c {
		dst = append(dst, TokenLogprob{ID: x.id, Logprob: float32(float64(x.w) - lse)})
	}
	return lse, dst
}
