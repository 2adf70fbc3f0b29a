package sampling

import (
	"math"
	"slices"
)

// expCutoff is where weights stop being computed: a token whose scaled logit
// is more than 88 below the top token's has less than 1e-38 of its
// probability, below float32's normal range, and counts as 0.
const expCutoff = -88

var negInf = float32(math.Inf(-1))

// cand is a candidate token: its id and, by stage, its logit or its
// unnormalised probability (weight).
type cand struct {
	id int32
	w  float32
}

// savedLogit is a banned token's logit, put back after the draw.
type savedLogit struct {
	id int32
	v  float32
}

// Sampler holds the scratch space of sampling. The engine keeps one; its
// buffers grow to the vocabulary size once and are then reused, so Sample
// does not allocate. Not safe for concurrent use.
type Sampler struct {
	saved    []savedLogit
	weights  []float32
	cands    []cand
	boundary []cand
	// counts is zero between calls (see penalize).
	counts []int32
	// hist is the weight per bucket (see nucleusOf); weights are at most
	// 1, whose bucket is 1016.
	hist [1024]float64
}

// Sample returns the next token id for logits (one per vocabulary id, not
// empty): Process with p's processors and the banned ids, Draw, Restore.
//
// Banned ids are never returned. Temperature 0 or TopK 1 picks the largest
// logit (ties: the lowest id). Otherwise logits are divided by the
// temperature, top-k keeps the k largest, a numerically stable softmax
// turns them into probabilities, min-p drops those below MinP times the
// largest, top-p keeps the smallest set of most likely tokens whose
// probability reaches p (ties: lower ids first), and one number from rng
// picks a token from what is left in proportion to its probability. A draw
// consumes exactly one value of rng and greedy decoding none, so a seeded
// request is reproducible.
//
// NaN logits are treated as -Inf; if any logit is +Inf the first such token
// is picked. If no token is left (all banned or -Inf), the lowest id that
// no processor set to -Inf is returned, or 0.
//
// Sample changes the logits while it runs and restores them before it
// returns.
func (s *Sampler) Sample(logits []float32, p *Params, rng *RNG, banned []int32) int32 {
	h := History{Banned: banned}
	return s.SampleHistory(logits, p, rng, &h)
}

// SampleHistory is Sample with the sequence's history, which the penalties
// and bad words read.
func (s *Sampler) SampleHistory(logits []float32, p *Params, rng *RNG, h *History) int32 {
	s.Process(logits, p, h)
	id := s.Draw(logits, p, rng)
	id = s.Fallback(id, logits)
	s.Restore(logits)
	return id
}

// Draw picks a token from the (processed) logits: greedily, or by a draw
// after temperature, top-k, min-p and top-p. It returns -1 when no token has
// a logit above -Inf; Fallback turns that into a token.
func (s *Sampler) Draw(logits []float32, p *Params, rng *RNG) int32 {
	if len(logits) == 0 {
		panic("sampling: Draw called with no logits")
	}
	switch {
	case p.greedy():
		id, _ := argmax(logits)
		return id
	case p.TopK > 0 && p.TopK < len(logits):
		return s.sampleTopK(logits, p, rng)
	default:
		return s.sampleAll(logits, p, rng)
	}
}

// Fallback returns id, or when Draw found nothing (id < 0) the lowest id
// that no change since Process set to -Inf, or 0. Call it before Restore.
func (s *Sampler) Fallback(id int32, logits []float32) int32 {
	if id >= 0 {
		return id
	}
	for i := range int32(len(logits)) {
		if !s.forced(i, logits) {
			return i
		}
	}
	return 0
}

// forced reports whether a change since Process set id to -Inf.
func (s *Sampler) forced(id int32, logits []float32) bool {
	if logits[id] != negInf {
		return false
	}
	for _, x := range s.saved {
		if x.id == id {
			return true
		}
	}
	return false
}

// sampleAll draws from the whole vocabulary (no top-k). It returns -1 if no
// token has a finite logit.
func (s *Sampler) sampleAll(logits []float32, p *Params, rng *RNG) int32 {
	best, top := argmax(logits)
	if best < 0 || math.IsInf(float64(top), 1) {
		return best
	}
	invT := 1 / float64(p.Temperature)
	s.weights = slices.Grow(s.weights[:0], len(logits))[:len(logits)]
	w := s.weights
	sum := expWeights(w, logits, top, invT)
	if p.minP() {
		sum = dropBelow(w, p.MinP)
	}
	if !p.topP() {
		target := rng.Float64() * sum
		acc := 0.0
		last := best
		for i, e := range w {
			if e == 0 {
				continue
			}
			// The same additions in the same order as sum, so acc ends at
			// sum and passes any target below it.
			acc += float64(e)
			last = int32(i)
			if acc > target {
				return int32(i)
			}
		}
		return last
	}

	c, mass := s.nucleusOf(w, float64(p.TopP)*sum)
	return draw(c, mass, rng)
}

// nucleusOf returns the smallest set of heaviest tokens (ties: lower ids)
// whose weights w (one per id, each at most 1) reach target, unordered, and
// its weight. The slice is scratch space of s.
//
// Rather than sort the vocabulary, it buckets the weights by magnitude:
// a float32's exponent and top three mantissa bits, so bucket order is
// weight order and a bucket spans a ratio of 2^(1/8). Summing each bucket's
// weight finds the bucket where the nucleus ends: every token in a heavier
// bucket is in it, every token in a lighter one is not, and only the tokens
// of that one bucket need ordering, by a quickselect. All passes are linear.
func (s *Sampler) nucleusOf(w []float32, target float64) ([]cand, float64) {
	hist := &s.hist
	clear(hist[:])
	for _, e := range w {
		hist[bucket(e)] += float64(e)
	}
	edge, above := 0, 0.0
	for b := len(hist) - 1; b >= 0; b-- {
		if above+hist[b] >= target {
			edge = b
			break
		}
		above += hist[b]
	}

	in, boundary := s.cands[:0], s.boundary[:0]
	inMass := 0.0
	for i, e := range w {
		switch b := bucket(e); {
		case b > edge:
			in = append(in, cand{id: int32(i), w: e})
			inMass += float64(e)
		case b == edge && e > 0:
			boundary = append(boundary, cand{id: int32(i), w: e})
		}
	}
	n := len(in)
	c := append(in, boundary...)
	s.cands, s.boundary = c, boundary
	k, mass := nucleus(c[n:], target-inMass)
	return c[:n+k], inMass + mass
}

// bucket orders weights in [0, 1] by magnitude, 8 buckets per power of two
// (the bits of a non-negative float32 order as the numbers do).
func bucket(e float32) int {
	return int(math.Float32bits(e) >> 20)
}

// sampleTopK draws from the p.TopK most likely tokens (0 < TopK < vocab).
// It returns -1 if no token has a finite logit.
func (s *Sampler) sampleTopK(logits []float32, p *Params, rng *RNG) int32 {
	c := s.topK(logits, p.TopK)
	top := c[0].w
	if top == negInf {
		return -1
	}
	if math.IsInf(float64(top), 1) {
		return c[0].id
	}
	lw := slices.Grow(s.weights[:0], len(c))[:len(c)]
	for i := range c {
		lw[i] = c[i].w
	}
	s.weights = lw
	sum := expWeights(lw, lw, top, 1/float64(p.Temperature))
	for i := range c {
		c[i].w = lw[i]
	}
	n, mass := len(c), sum
	if p.minP() {
		// c is sorted: the tokens min-p keeps are a prefix.
		mass = 0
		for n = 0; n < len(c) && c[n].w >= p.MinP; n++ {
			mass += float64(c[n].w)
		}
	}
	if p.topP() {
		// c is sorted, most likely first: the nucleus is a prefix.
		target := float64(p.TopP) * mass
		acc := 0.0
		for i := range c[:n] {
			acc += float64(c[i].w)
			if acc >= target {
				n, mass = i+1, acc
				break
			}
		}
	}
	return draw(c[:n], mass, rng)
}

// draw picks a candidate with probability weight/mass using one number from
// rng; mass is the candidates' total weight (> 0).
func draw(c []cand, mass float64, rng *RNG) int32 {
	target := rng.Float64() * mass
	acc := 0.0
	for _, x := range c {
		acc += float64(x.w)
		if acc > target && x.w > 0 {
			return x.id
		}
	}
	// Rounding left target at or past the sum: take the last candidate
	// that can be drawn at all.
	for i := len(c) - 1; i > 0; i-- {
		if c[i].w > 0 {
			return c[i].id
		}
	}
	return c[0].id
}

// argmax returns the id of the largest logit (ties: the lowest id) and that
// logit, or -1 if none is above -Inf (NaN never is).
func argmax(logits []float32) (int32, float32) {
	// Two passes: the largest value, kept as eight independent running
	// maxima (comparison chains the CPU overlaps), then its first index,
	// while the row is still in cache: 1.9× the single pass over a
	// 151,936-token row (BenchmarkArgmax; docs/benchmarks.md).
	t0, t1, t2, t3 := negInf, negInf, negInf, negInf
	t4, t5, t6, t7 := negInf, negInf, negInf, negInf
	i := 0
	for ; i+8 <= len(logits); i += 8 {
		c := logits[i : i+8 : i+8]
		if c[0] > t0 {
			t0 = c[0]
		}
		if c[1] > t1 {
			t1 = c[1]
		}
		if c[2] > t2 {
			t2 = c[2]
		}
		if c[3] > t3 {
			t3 = c[3]
		}
		if c[4] > t4 {
			t4 = c[4]
		}
		if c[5] > t5 {
			t5 = c[5]
		}
		if c[6] > t6 {
			t6 = c[6]
		}
		if c[7] > t7 {
			t7 = c[7]
		}
	}
	for ; i < len(logits); i++ {
		if logits[i] > t0 {
			t0 = logits[i]
		}
	}
	top := t0
	for _, v := range [...]float32{t1, t2, t3, t4, t5, t6, t7} {
		if v > top {
			top = v
		}
	}
	if top == negInf { // empty, or only -Inf and NaN
		return -1, negInf
	}
	for i, v := range logits {
		if v == top {
			return int32(i), v
		}
	}
	return -1, negInf // not reached: top is one of the logits
}

// dropBelow zeroes the weights under minP (weights are relative to the
// top token's, which is 1) and returns the sum of those left.
func dropBelow(w []float32, minP float32) float64 {
	sum := 0.0
	for i, e := range w {
		if e < minP {
			w[i] = 0
			continue
		}
		sum += float64(e)
	}
	return sum
}
