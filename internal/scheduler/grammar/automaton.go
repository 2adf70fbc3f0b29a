package grammar

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// MaxNFAStates bounds a compiled constraint, so a request cannot make the
// server build an automaton of unbounded size.
const MaxNFAStates = 1 << 18

// maxDFAStates bounds the lazily built DFA; past it, states are still
// built but their token masks are not cached.
const maxCachedMasks = 4096

// ErrTooLarge is returned for constraints whose automaton exceeds
// MaxNFAStates.
var ErrTooLarge = errors.New("constraint too large")

type nkind uint8

const (
	nRange nkind = iota
	nSplit
	nMatch
)

// nstate is a Thompson NFA state: a byte range to out, an epsilon split to
// out and out1, or the accepting state.
type nstate struct {
	kind      nkind
	lo, hi    byte
	out, out1 int32
}

type memoKey struct {
	n    *node
	next int32
}

// nfaBuilder compiles nodes back to front: compile(n, next) returns the
// start of n's states, which continue to next. Sub-expressions shared by
// pointer with the same continuation are compiled once.
type nfaBuilder struct {
	states []nstate
	memo   map[memoKey]int32
	err    error
}

func (b *nfaBuilder) add(s nstate) int32 {
	if len(b.states) >= MaxNFAStates {
		b.err = ErrTooLarge
		return 0
	}
	b.states = append(b.states, s)
	return int32(len(b.states) - 1)
}

func (b *nfaBuilder) compile(n *node, next int32) int32 {
	if b.err != nil {
		return 0
	}
	k := memoKey{n, next}
	if s, ok := b.memo[k]; ok {
		return s
	}
	var s int32
	switch n.op {
	case opEmpty:
		s = next
	case opRange:
		s = b.add(nstate{kind: nRange, lo: n.lo, hi: n.hi, out: next})
	case opConcat:
		s = next
		for i := len(n.subs) - 1; i >= 0; i-- {
			s = b.compile(n.subs[i], s)
		}
	case opAlt:
		if len(n.subs) == 0 {
			// Matches nothing: a range no byte is in, looping on itself so
			// that it never counts as a way to acceptance.
			s = b.add(nstate{kind: nRange, lo: 1, hi: 0})
			if b.err == nil {
				b.states[s].out = s
			}
			break
		}
		s = b.compile(n.subs[len(n.subs)-1], next)
		for i := len(n.subs) - 2; i >= 0; i-- {
			s = b.add(nstate{kind: nSplit, out: b.compile(n.subs[i], next), out1: s})
		}
	case opRepeat:
		sub := n.subs[0]
		if n.max < 0 {
			loop := b.add(nstate{kind: nSplit, out1: next})
			body := b.compile(sub, loop)
			if b.err == nil {
				b.states[loop].out = body
			}
			s = loop
		} else {
			s = next
			for range n.max - n.min {
				s = b.add(nstate{kind: nSplit, out: b.compile(sub, s), out1: next})
			}
		}
		for range n.min {
			s = b.compile(sub, s)
		}
	}
	b.memo[k] = s
	return s
}

// dstate is a DFA state: the set of NFA range states reachable, whether
// the input so far is accepted, and its lazily filled transitions.
type dstate struct {
	nfa    []int32
	accept bool
	// dist is the fewest bytes that lead to acceptance (0 when accept).
	dist int32
	// next[b] is the state after byte b: -2 not computed, -1 dead.
	next [256]int32
	// final: accepting and no byte can follow.
	final int8 // -1 unknown, 0 no, 1 yes
	mask  *tokenMask
}

// Grammar is a compiled constraint. Its DFA and token masks are built
// lazily and shared by every matcher of the grammar; the methods are safe
// for concurrent use.
type Grammar struct {
	nfa   []nstate
	start int32 // NFA start
	// distN is, per NFA state, the fewest bytes to the accepting state.
	distN []int32

	mu      sync.Mutex
	states  []*dstate
	index   map[string]int32
	vocab   *Vocab // the vocabulary the cached masks are for
	cached  int
	scratch []int32
	seen    []uint32
	epoch   uint32
}

func newGrammar(n *node) (*Grammar, error) {
	b := &nfaBuilder{memo: map[memoKey]int32{}}
	match := b.add(nstate{kind: nMatch})
	start := b.compile(n, match)
	if b.err != nil {
		return nil, fmt.Errorf("%w: more than %d automaton states", b.err, MaxNFAStates)
	}
	g := &Grammar{nfa: b.states, start: start, index: map[string]int32{}}
	g.distN = distances(g.nfa)
	g.seen = make([]uint32, len(g.nfa))
	init := g.closure([]int32{start})
	g.intern(init)
	return g, nil
}

// distances computes, per NFA state, the fewest bytes to acceptance: a 0-1
// BFS from the accepting state over reversed edges (splits cost 0, byte
// ranges 1).
func distances(nfa []nstate) []int32 {
	const inf = int32(1 << 30)
	n := len(nfa)
	dist := make([]int32, n)
	for i := range dist {
		dist[i] = inf
	}
	type redge struct {
		from int32
		w    int32
	}
	rev := make([][]redge, n)
	for i, s := range nfa {
		switch s.kind {
		case nRange:
			rev[s.out] = append(rev[s.out], redge{int32(i), 1})
		case nSplit:
			rev[s.out] = append(rev[s.out], redge{int32(i), 0})
			rev[s.out1] = append(rev[s.out1], redge{int32(i), 0})
		}
	}
	dq := make([]int32, 0, n)
	head := 0
	for i, s := range nfa {
		if s.kind == nMatch {
			dist[i] = 0
			dq = append(dq, int32(i))
		}
	}
	// A plain queue processed until no distance improves (Bellman-Ford on
	// a 0/1 graph); each state is re-queued only when it gets shorter.
	for head < len(dq) {
		v := dq[head]
		head++
		for _, e := range rev[v] {
			if d := dist[v] + e.w; d < dist[e.from] {
				dist[e.from] = d
				dq = append(dq, e.from)
			}
		}
	}
	return dist
}

// closure returns the sorted NFA range and match states reachable from
// set through splits.
func (g *Grammar) closure(set []int32) []int32 {
	g.epoch++
	if g.epoch == 0 {
		clear(g.seen)
		g.epoch = 1
	}
	stack := append(g.scratch[:0], set...)
	var out []int32
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if g.seen[s] == g.epoch {
			continue
		}
		g.seen[s] = g.epoch
		switch st := &g.nfa[s]; st.kind {
		case nSplit:
			stack = append(stack, st.out1, st.out)
		default:
			out = append(out, s)
		}
	}
	g.scratch = stack
	slices.Sort(out)
	return out
}

func (g *Grammar) intern(set []int32) int32 {
	key := unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(set))), len(set)*4)
	if id, ok := g.index[key]; ok {
		return id
	}
	d := &dstate{nfa: set, dist: 1 << 30, final: -1}
	for i := range d.next {
		d.next[i] = -2
	}
	for _, s := range set {
		if g.nfa[s].kind == nMatch {
			d.accept = true
		}
		d.dist = min(d.dist, g.distN[s])
	}
	id := int32(len(g.states))
	g.states = append(g.states, d)
	// The key must own its bytes: set is not modified after interning.
	g.index[key] = id
	return id
}

// step returns the DFA state after byte c from state s, or -1. The caller
// holds g.mu.
func (g *Grammar) step(s int32, c byte) int32 {
	d := g.states[s]
	if n := d.next[c]; n != -2 {
		return n
	}
	var moved []int32
	for _, ns := range d.nfa {
		st := &g.nfa[ns]
		if st.kind == nRange && st.lo <= c && c <= st.hi {
			moved = append(moved, st.out)
		}
	}
	n := int32(-1)
	if len(moved) > 0 {
		if set := g.closure(moved); len(set) > 0 {
			n = g.intern(set)
		}
	}
	d.next[c] = n
	return n
}

// isFinal reports whether s accepts and no byte may follow. The caller
// holds g.mu.
func (g *Grammar) isFinal(s int32) bool {
	d := g.states[s]
	if d.final < 0 {
		d.final = 0
		if d.accept {
			d.final = 1
			for _, ns := range d.nfa {
				if g.nfa[ns].kind == nRange {
					d.final = 0
					break
				}
			}
		}
	}
	return d.final == 1
}

// Accepts reports whether the grammar matches text exactly.
func (g *Grammar) Accepts(text []byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := int32(0)
	for _, c := range text {
		if s = g.step(s, c); s < 0 {
			return false
		}
	}
	return g.states[s].accept
}

// MinLength is the fewest bytes of an accepted text.
func (g *Grammar) MinLength() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return int(g.states[0].dist)
}

// NumNFAStates is the compiled size (tests, limits).
func (g *Grammar) NumNFAStates() int { return len(g.nfa) }
