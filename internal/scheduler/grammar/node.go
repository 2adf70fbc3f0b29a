// Package grammar compiles output constraints (a JSON schema, a regular
// expression, a list of choices, a GBNF grammar, a tool-call format) into
// a pushdown byte automaton, and turns the automaton into per-step token
// masks over a model's vocabulary for constrained decoding.
//
// A constraint is a set of rules, each a regular expression over bytes
// and calls of rules (a $ref target, a GBNF nonterminal, a JSON value):
// a rule is compiled once however often it is referenced, so the compiled
// size is linear in the schema or grammar, and rules may be recursive.
// Each rule compiles to a Thompson NFA fragment; decoding keeps a set of
// stacks of rule positions, and the sets reached are interned as the
// states of a lazily built automaton (one state the first time decoding
// reaches it), as a DFA would be for a regular language. The tokens a
// state allows are computed by walking a trie of the vocabulary
// alongside the automaton, in two parts, as xgrammar does: the tokens a
// rule position allows without returning from its rule depend on the
// position alone and are computed once per position; only the tokens
// that run past the rule's end are checked against the stack below.
// Masks are cached with their state: in steady state a decoding step is a
// cache lookup and one pass over the mask.
package grammar

// op is a node's operator.
type op uint8

const (
	opEmpty  op = iota // matches ""
	opRange            // one byte in [lo, hi]
	opConcat           // subs in sequence
	opAlt              // any one of subs
	opRepeat           // subs[0] between min and max times (max < 0: unbounded)
	opCall             // the rule r
	opAnd              // the strings both subs[0] and subs[1] match (regular subs only)
	opDFA              // the strings dfa accepts
	opLength           // the strings subs[0] (regular) matches of min to max (< 0: any) characters
)

// rawDFA is an automaton given state by state (state 0 starts), for
// languages a regular expression would spell at great length (the
// multiples of a number).
type rawDFA struct {
	trans  [][]rawEdge
	accept []bool
}

type rawEdge struct {
	lo, hi byte
	to     int32
}

// node is a regular expression over bytes.
type node struct {
	op       op
	lo, hi   byte
	subs     []*node
	min, max int
	r        *rule
	dfa      *rawDFA
}

// rule is a named sub-grammar compiled once and called by reference. Its
// body may call it again (recursion), except at its very start (left
// recursion, which a top-down matcher cannot run, is refused).
type rule struct {
	name string
	body *node
}

func call(r *rule) *node { return &node{op: opCall, r: r} }

func and(a, b *node) *node { return &node{op: opAnd, subs: []*node{a, b}} }

func lengthOf(n *node, min, max int) *node {
	return &node{op: opLength, subs: []*node{n}, min: min, max: max}
}

var empty = &node{op: opEmpty}

func byteRange(lo, hi byte) *node { return &node{op: opRange, lo: lo, hi: hi} }

func oneByte(b byte) *node { return byteRange(b, b) }

func lit(s string) *node {
	if len(s) == 0 {
		return empty
	}
	if len(s) == 1 {
		return oneByte(s[0])
	}
	subs := make([]*node, len(s))
	for i := range len(s) {
		subs[i] = oneByte(s[i])
	}
	return &node{op: opConcat, subs: subs}
}

// spliceMax is the most subs a sequence may have to be spliced into a
// sequence that contains it; a longer one stays one node (the language is
// the same). Splicing every sequence would copy each one built around the
// one before (an object's members, a nested object, a GBNF group inside a
// group) again at every step: time and memory quadratic in the schema or
// grammar. Splicing only short ones keeps building linear, and an
// expression whose sequences are all short compiles as it did when every
// sequence was spliced.
const spliceMax = 16

// concat is its operands in sequence: operands that match only "" are
// left out, short sequences spliced in.
func concat(subs ...*node) *node {
	var out []*node
	for _, s := range subs {
		switch {
		case s.op == opEmpty:
		case s.op == opConcat && len(s.subs) <= spliceMax:
			out = append(out, s.subs...)
		default:
			out = append(out, s)
		}
	}
	switch len(out) {
	case 0:
		return empty
	case 1:
		return out[0]
	}
	return &node{op: opConcat, subs: out}
}

func alt(subs ...*node) *node {
	if len(subs) == 1 {
		return subs[0]
	}
	return &node{op: opAlt, subs: subs}
}

func repeat(n *node, min, max int) *node {
	return &node{op: opRepeat, subs: []*node{n}, min: min, max: max}
}

func opt(n *node) *node  { return repeat(n, 0, 1) }
func star(n *node) *node { return repeat(n, 0, -1) }

// utf8Range matches the UTF-8 encodings of the runes in [lo, hi]
// (surrogates excluded).
func utf8Range(lo, hi rune) *node {
	if lo > hi {
		return nil
	}
	var parts []*node
	bounds := [][2]rune{{0, 0x7f}, {0x80, 0x7ff}, {0x800, 0xd7ff}, {0xe000, 0xffff}, {0x10000, 0x10ffff}}
	for _, b := range bounds {
		l, h := max(lo, b[0]), min(hi, b[1])
		if l > h {
			continue
		}
		parts = append(parts, byteSeqs(encodeRune(l), encodeRune(h)))
	}
	if len(parts) == 0 {
		return nil
	}
	return alt(parts...)
}

// byteSeqs matches the byte strings between lo and hi (same length) that
// are encodings of the runes between them.
func byteSeqs(lo, hi []byte) *node {
	if len(lo) == 1 {
		return byteRange(lo[0], hi[0])
	}
	if lo[0] == hi[0] {
		return concat(oneByte(lo[0]), byteSeqs(lo[1:], hi[1:]))
	}
	n := len(lo) - 1
	minCont, maxCont := make([]byte, n), make([]byte, n)
	for i := range n {
		minCont[i], maxCont[i] = 0x80, 0xbf
	}
	var parts []*node
	parts = append(parts, concat(oneByte(lo[0]), byteSeqs(lo[1:], maxCont)))
	if hi[0]-lo[0] > 1 {
		parts = append(parts, concat(byteRange(lo[0]+1, hi[0]-1), byteSeqs(minCont, maxCont)))
	}
	parts = append(parts, concat(oneByte(hi[0]), byteSeqs(minCont, hi[1:])))
	return alt(parts...)
}

func encodeRune(r rune) []byte {
	switch {
	case r < 0x80:
		return []byte{byte(r)}
	case r < 0x800:
		return []byte{0xc0 | byte(r>>6), 0x80 | byte(r)&0x3f}
	case r < 0x10000:
		return []byte{0xe0 | byte(r>>12), 0x80 | byte(r>>6)&0x3f, 0x80 | byte(r)&0x3f}
	}
	return []byte{0xf0 | byte(r>>18), 0x80 | byte(r>>12)&0x3f, 0x80 | byte(r>>6)&0x3f, 0x80 | byte(r)&0x3f}
}
