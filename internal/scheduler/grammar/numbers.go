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

// boundedNumber matches JSON numbers within lo and hi: the integers
// exactly, and fractions I.F where every F keeps the value in range (a
// sound subset: the fractions of the range's end units are left out), no
// exponents.
func boundedNumber(lo, hi bound) *node {
	first, last := intBounds(lo, hi)
	var parts []*node
	if f, l, ok := clampRange(first, last); ok {
		parts = append(parts, intRange(f, l))
	}
	frac := concat(oneByte('.'), digits(1, maxFracDigits))
	// Positive I.F lies in [I, I+1): I must satisfy lo, I+1 <= hi.
	posHi := int64(maxIntAbs)
	if hi.set {
		posHi = clampInt(floorRat(hi.v)) - 1
	}
	if f, l, ok := clampRange(max(first, 0), posHi); ok {
		parts = append(parts, concat(intRange(f, l), frac))
	}
	// -I.F lies in (-(I+1), -I]: -(I+1) >= lo, and -I must satisfy hi.
	negHi := int64(maxIntAbs)
	if lo.set {
		c := floorRat(lo.v)
		if !lo.v.IsInt() {
			c.Add(c, big.NewInt(1))
		}
		negHi = -clampInt(c) - 1
	}
	if f, l, ok := clampRange(max(0, -last), negHi); ok {
		parts = append(parts, concat(oneByte('-'), intRange(f, l), frac))
	}
	return orNothing(parts)
}

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
