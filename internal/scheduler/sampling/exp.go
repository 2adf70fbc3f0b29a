package sampling

import "math"

// expNeg returns e^x for expCutoff < x <= 0. Its relative error is below
// 1e-8, far under the float32 precision the weights are kept in, and it is
// several times cheaper than math.Exp, whose full-range handling (overflow,
// subnormals, NaN) the sampler does not need: it runs once per vocabulary
// entry on every draw.
func expNeg(x float64) float64 {
	const (
		log2e = 1.44269504088896340736
		// ln 2 split so that k·ln2Hi is exact for the k that occur.
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
	)
	// e^x = 2^k · e^r with k the integer nearest x·log2(e) (truncation of
	// a value shifted by -0.5 rounds, as x <= 0) and |r| <= ln2/2, where
	// the degree-7 Taylor polynomial is off by at most 5.2e-9.
	k := int64(x*log2e - 0.5)
	r := x - float64(k)*ln2Hi - float64(k)*ln2Lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float64frombits(uint64(k+1023)<<52)
}
