package grammar

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// maxLookaheadStates bounds the automaton a lookahead's complement is
// determinized into, and maxLookaheadNFA the lookahead's own automaton
// (each determinized state looks at each byte from each of its states).
const (
	maxLookaheadStates = 512
	maxLookaheadNFA    = 2048
)

// patternNode is regexNode plus lookaheads at the start of the pattern
// ("^(?!\.)(?!.*\.\.)…", as zod writes emails): a lookahead (?=X) keeps
// the strings that begin with a match of X, (?!X) those that do not, so
// the pattern is its rest intersected with X… or with X…'s complement.
// Lookarounds elsewhere are refused by the regular-expression parser.
func patternNode(ctx context.Context, pattern string, allow func(lo, hi rune) [][2]rune) (*node, error) {
	rest := strings.TrimPrefix(pattern, "^")
	type look struct {
		negate bool
		body   string
	}
	var looks []look
	for strings.HasPrefix(rest, "(?=") || strings.HasPrefix(rest, "(?!") {
		end := groupEnd(rest)
		if end < 0 {
			break
		}
		looks = append(looks, look{negate: rest[2] == '!', body: rest[3:end]})
		rest = rest[end+1:]
	}
	if len(looks) == 0 {
		return regexNode(pattern, allow)
	}
	n, err := regexNode(rest, allow)
	if err != nil {
		return nil, err
	}
	for _, l := range looks {
		x, err := regexNode(l.body, nil)
		if err != nil {
			return nil, fmt.Errorf("lookahead (?%c%s): %w", map[bool]byte{true: '!', false: '='}[l.negate], l.body, err)
		}
		prefix := concat(x, star(byteRange(0, 0xff)))
		if l.negate {
			if prefix, err = complement(ctx, prefix); err != nil {
				return nil, fmt.Errorf("lookahead (?!%s): %w", l.body, err)
			}
		}
		n = and(n, prefix)
	}
	return n, nil
}

// groupEnd returns the index of the parenthesis closing the group that
// starts s, or -1.
func groupEnd(s string) int {
	depth, inClass := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// complement is the byte strings n (regular) does not match, as a
// determinized automaton.
func complement(ctx context.Context, n *node) (*node, error) {
	b := newBuilder(ctx)
	start, end := b.fragment(n)
	if b.err != nil {
		return nil, b.err
	}
	if len(b.states) > maxLookaheadNFA {
		return nil, fmt.Errorf("more than %d automaton states", maxLookaheadNFA)
	}
	closure := func(set []int32) []int32 {
		var out []int32
		reach(b.states, set, func(s int32, st nstate) []int32 {
			if st.kind == nSplit {
				return []int32{st.out, st.out1}
			}
			out = append(out, s)
			return nil
		})
		slices.Sort(out)
		return out
	}
	key := func(set []int32) string {
		var k []byte
		for _, s := range set {
			k = binary.LittleEndian.AppendUint32(k, uint32(s))
		}
		return string(k)
	}
	// State 0 is the start; a set that matches nothing more is the sink.
	sets := [][]int32{closure([]int32{start})}
	ids := map[string]int32{key(sets[0]): 0}
	d := &rawDFA{}
	for i := 0; i < len(sets); i++ {
		if len(sets) > maxLookaheadStates {
			return nil, fmt.Errorf("more than %d states", maxLookaheadStates)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var targets [256]int32
		for c := range 256 {
			var moved []int32
			for _, s := range sets[i] {
				if st := b.states[s]; st.kind == nRange && st.lo <= byte(c) && byte(c) <= st.hi {
					moved = append(moved, st.out)
				}
			}
			next := closure(moved)
			k := key(next)
			id, ok := ids[k]
			if !ok {
				id = int32(len(sets))
				ids[k] = id
				sets = append(sets, next)
			}
			targets[c] = id
		}
		var edges []rawEdge
		for c := 0; c < 256; {
			e := c
			for e+1 < 256 && targets[e+1] == targets[c] {
				e++
			}
			edges = append(edges, rawEdge{byte(c), byte(e), targets[c]})
			c = e + 1
		}
		d.trans = append(d.trans, edges)
		accept := false
		for _, s := range sets[i] {
			if s == end {
				accept = true
			}
		}
		d.accept = append(d.accept, !accept)
	}
	return &node{op: opDFA, dfa: d}, nil
}
