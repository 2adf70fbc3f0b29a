package sampling

import "math"

// expWeights sets w[i] = e^((logits[i]-top)·invT) for each logit (w may be
// logits itself) and returns their sum. top is the largest logit and invT
// > 0, so every exponent is at most 0; below expCutoff, and for NaN or -Inf
// logits, the weight is 0.
//
// It does not call math.Exp: this loop runs over the whole vocabulary on
// every draw, and math.Exp's full-range handling (overflow, subnormals, NaN,
// ±Inf) costs more than the exponential itself here. Its relative error is
// below 1e-8, far under the float32 precision the weights are kept in.
func expWeights(w, logits []float32, top float32, invT float64) float64 {
	const (
		log2e = 1.44269504088896340736
		// ln 2 split so that k·ln2Hi is exact for the k that occur.
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
	)
	w = w[:len(logits)]
	sum := 0.0
	for i, v := range logits {
		var e float32
		// NaN and -Inf fail the comparison.
		if x := (float64(v) - float64(top)) * invT; x > expCutoff {
			// e^x = 2^k · e^r with k the integer nearest x·log2(e)
			// (truncating a value shifted by -0.5 rounds, as x <= 0) and
			// |r| <= ln2/2, where the degree-7 Taylor polynomial is off by
			// at most 5.2e-9. Estrin's scheme has a shorter dependency
			// chain than Horner's, so consecutive iterations overlap.
			k := int64(x*log2e - 0.5)
			r := x - float64(k)*ln2Hi - float64(k)*ln2Lo
			r2 := r * r
			r4 := r2 * r2
			p := (1 + r + r2*(1.0/2+r*(1.0/6))) + r4*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040)))
			e = float32(p * math.Float64frombits(uint64(k+1023)<<52))
		}
		w[i] = e
		sum += float64(e)
	}
	return sum
}
