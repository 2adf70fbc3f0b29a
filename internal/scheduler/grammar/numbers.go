package grammar

import (
	"math/big"
	"strconv"
	"strings"
)

// maxIntAbs is the largest integer magnitude written (maxIntDigits
// digits); bounds beyond it are as good as none.
const maxIntAbs = 9999999999999999

// maxMultipleOf bounds multipleOf: its automaton has a state per
// remainder, multiplied by the digits of the range it is combined with.
const maxMultipleOf = 4096

// intRange matches the JSON integers in [lo, hi] (|lo|, |hi| <=
// maxIntAbs, lo <= hi), written without leading zeros.
func intRange(lo, hi int64) *node {
	var parts []*node
	if lo < 0 {
		// -v for v in [max(1, -hi), -lo].
		parts = append(parts, concat(oneByte('-'), uintRange(uint64(max(1, -hi)), uint64(-lo))))
	}
	if hi >= 0 {
		parts = append(parts, uintRange(uint64(max(0, lo)), uint64(hi)))
	}
	return orNothing(parts)
}

// uintRange matches the decimal numbers in [a, b], by digit count.
func uintRange(a, b uint64) *node {
	if a > b {
		return nothing
	}
	var parts []*node
	sa, sb := strconv.FormatUint(a, 10), strconv.FormatUint(b, 10)
	for l := len(sa); l <= len(sb); l++ {
		lo, hi := a, b
		if l > len(sa) {
			lo = pow10(l - 1)
		}
		if l < len(sb) {
			hi = pow10(l) - 1
		}
		parts = append(parts, sameLength(strconv.FormatUint(lo, 10), strconv.FormatUint(hi, 10)))
	}
	return alt(parts...)
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

// sameLength matches the digit strings of x's length between x and y.
func sameLength(x, y string) *node {
	if x == y {
		return lit(x)
	}
	if x[0] == y[0] {
		return concat(oneByte(x[0]), sameLength(x[1:], y[1:]))
	}
	n := len(x) - 1
	lowFull := strings.Trim(x[1:], "0") == ""
	highFull := strings.Trim(y[1:], "9") == ""
	var parts []*node
	first, last := x[0], y[0]
	if !lowFull {
		parts = append(parts, concat(oneByte(x[0]), sameLength(x[1:], strings.Repeat("9", n))))
		first++
	}
	if !highFull {
		last--
	}
	if first <= last {
		parts = append(parts, concat(byteRange(first, last), digits(n, n)))
	}
	if !highFull {
		parts = append(parts, concat(oneByte(y[0]), sameLength(strings.Repeat("0", n), y[1:])))
	}
	return alt(parts...)
}

// bound is one side of a numeric range: absent, or a value, inclusive or
// not.
type bound struct {
	set       bool
	v         *big.Rat
	exclusive bool
}

// intBounds returns the smallest and largest integers within lo and hi,
// clamped to the integers written.
func intBounds(lo, hi bound) (int64, int64) {
	first, last := int64(-maxIntAbs), int64(maxIntAbs)
	if lo.set {
		// ceil(lo), or floor(lo)+1 when exclusive.
		f := floorRat(lo.v)
		switch {
		case lo.exclusive:
			f.Add(f, big.NewInt(1))
		case !lo.v.IsInt():
			f.Add(f, big.NewInt(1))
		}
		first = clampInt(f)
	}
	if hi.set {
		f := floorRat(hi.v)
		if hi.exclusive && hi.v.IsInt() {
			f.Sub(f, big.NewInt(1))
		}
		last = clampInt(f)
	}
	return first, last
}

func floorRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m // DivMod is Euclidean: the quotient is the floor for a positive denominator
	return q
}

func clampInt(v *big.Int) int64 {
	switch {
	case v.Cmp(big.NewInt(maxIntAbs)) > 0:
		return maxIntAbs + 1
	case v.Cmp(big.NewInt(-maxIntAbs)) < 0:
		return -maxIntAbs - 1
	}
	return v.Int64()
}

// clampRange keeps first and last within the integers written; it
// reports false when no integer is left.
func clampRange(first, last int64) (int64, int64, bool) {
	first, last = max(first, -maxIntAbs), min(last, maxIntAbs)
	return first, last, first <= last
}

// boundedNumber matches the JSON numbers within lo and hi written
// without an exponent, with at most maxIntDigits digits before the point
// and maxFracDigits after it: exactly, the point compared digit by digit
// with the bounds.
func boundedNumber(lo, hi bound) *node {
	var parts []*node
	zero := bound{set: true, v: new(big.Rat)}
	// Values >= 0: magnitudes from max(lo, 0) to hi.
	if !hi.set || hi.v.Sign() >= 0 {
		from := lo
		if !lo.set || lo.v.Sign() < 0 {
			from = zero
		}
		parts = append(parts, magnitudes(from, hi))
	}
	// Values < 0: "-" and magnitudes from max(-hi, 0), above 0 (0 is
	// written as such), to -lo.
	if !lo.set || lo.v.Sign() < 0 {
		from := bound{set: true, v: new(big.Rat), exclusive: true}
		if hi.set && hi.v.Sign() < 0 {
			from = bound{set: true, v: new(big.Rat).Neg(hi.v), exclusive: hi.exclusive}
		}
		to := bound{}
		if lo.set {
			to = bound{set: true, v: new(big.Rat).Neg(lo.v), exclusive: lo.exclusive}
		}
		parts = append(parts, concat(oneByte('-'), magnitudes(from, to)))
	}
	return orNothing(nonNothing(parts))
}

func nonNothing(parts []*node) []*node {
	var out []*node
	for _, p := range parts {
		if p != nothing {
			out = append(out, p)
		}
	}
	return out
}

// magnitudes matches "I" and "I.F" whose value is within from (set, at
// least 0) and to (unset: no bound).
func magnitudes(from, to bound) *node {
	ai, af := decimalParts(from.v)
	if ai > maxIntAbs {
		return nothing
	}
	bi, bf := int64(maxIntAbs)+1, ""
	if to.set {
		if to.v.Cmp(from.v) < 0 || to.v.Cmp(from.v) == 0 && (to.exclusive || from.exclusive) {
			return nothing
		}
		bi, bf = decimalParts(to.v)
		if bi > maxIntAbs {
			to, bi, bf = bound{}, maxIntAbs+1, ""
		}
	}
	anyFrac := fraction(star(byteRange('0', '9')), true)
	var parts []*node
	if ai == bi {
		both := and(fracAtLeast(af, from.exclusive), fracAtMost(bf, to.exclusive))
		return concat(lit(strconv.FormatInt(ai, 10)),
			fraction(both, fracZeroAtLeast(af, from.exclusive) && fracZeroAtMost(bf, to.exclusive)))
	}
	parts = append(parts, concat(lit(strconv.FormatInt(ai, 10)),
		fraction(fracAtLeast(af, from.exclusive), fracZeroAtLeast(af, from.exclusive))))
	if last := min(bi-1, maxIntAbs); ai+1 <= last {
		parts = append(parts, concat(intRange(ai+1, last), anyFrac))
	}
	if to.set {
		parts = append(parts, concat(lit(strconv.FormatInt(bi, 10)),
			fraction(fracAtMost(bf, to.exclusive), fracZeroAtMost(bf, to.exclusive))))
	}
	return alt(parts...)
}

// decimalParts splits a non-negative rational with a finite decimal
// expansion into its integer part (clamped past maxIntAbs) and the digits
// after the point, trailing zeros trimmed.
func decimalParts(r *big.Rat) (int64, string) {
	text := r.FloatString(2 * maxExponent)
	ip, fp, _ := strings.Cut(text, ".")
	i, err := strconv.ParseInt(ip, 10, 64)
	if err != nil || i > maxIntAbs {
		i = maxIntAbs + 1
	}
	return i, strings.TrimRight(fp, "0")
}

// fraction is an optional point and digits matching f (at most
// maxFracDigits of them); no point at all only when zeroOK.
func fraction(f *node, zeroOK bool) *node {
	point := concat(oneByte('.'), lengthOf(f, 1, maxFracDigits))
	if zeroOK {
		return opt(point)
	}
	return point
}

// fracAtLeast matches the digit strings f with 0.f >= 0.a (> when
// strict); a has no trailing zeros.
func fracAtLeast(a string, strict bool) *node {
	if a == "" {
		if strict {
			return concat(star(oneByte('0')), byteRange('1', '9'), star(byteRange('0', '9')))
		}
		return star(byteRange('0', '9'))
	}
	var parts []*node
	if a[0] < '9' {
		parts = append(parts, concat(byteRange(a[0]+1, '9'), star(byteRange('0', '9'))))
	}
	return alt(append(parts, concat(oneByte(a[0]), fracAtLeast(a[1:], strict)))...)
}

// fracAtMost matches the digit strings f with 0.f <= 0.b (< when
// strict); b has no trailing zeros.
func fracAtMost(b string, strict bool) *node {
	if b == "" {
		if strict {
			return nothing
		}
		return star(oneByte('0'))
	}
	parts := []*node{empty} // f ended: 0 < what is left of b
	if b[0] > '0' {
		parts = append(parts, concat(byteRange('0', b[0]-1), star(byteRange('0', '9'))))
	}
	return alt(append(parts, concat(oneByte(b[0]), fracAtMost(b[1:], strict)))...)
}

// fracZeroAtLeast: a missing fraction (0) is >= 0.a (> when strict).
func fracZeroAtLeast(a string, strict bool) bool { return a == "" && !strict }

// fracZeroAtMost: a missing fraction (0) is <= 0.b (< when strict).
func fracZeroAtMost(b string, strict bool) bool { return b != "" || !strict }

// multipleOfDFA matches the JSON integers that are multiples of k: a
// state per remainder of the digits read so far.
func multipleOfDFA(k int) *node {
	// States: 0 start, 1 after '-', 2 zero, 3+r remainder r.
	d := &rawDFA{trans: make([][]rawEdge, 3+k), accept: make([]bool, 3+k)}
	d.accept[2], d.accept[3] = true, true
	d.trans[0] = append(d.trans[0], rawEdge{'-', '-', 1}, rawEdge{'0', '0', 2})
	d.trans[1] = append(d.trans[1], rawEdge{'0', '0', 2})
	for dig := 1; dig <= 9; dig++ {
		e := rawEdge{byte('0' + dig), byte('0' + dig), int32(3 + dig%k)}
		d.trans[0] = append(d.trans[0], e)
		d.trans[1] = append(d.trans[1], e)
	}
	for r := range k {
		for dig := range 10 {
			d.trans[3+r] = append(d.trans[3+r], rawEdge{byte('0' + dig), byte('0' + dig), int32(3 + (r*10+dig)%k)})
		}
	}
	return &node{op: opDFA, dfa: d}
}
