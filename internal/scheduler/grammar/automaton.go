package grammar

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/kvpilot/kvpilot/internal/util/membudget"
)

// MaxNFAStates bounds a compiled constraint, so a request cannot make the
// server build an automaton of unbounded size. The bound is checked as
// states are added, so a refused compile never holds more than this.
const MaxNFAStates = 1 << 18

// BytesPerNFAState is what one automaton state may cost a compile at
// most: the state, its share of the builder's memo and rule tables, and
// the nodes it is built from. It bounds the bytes a compile allocates
// (TestBytesPerNFAState: 421 a state for a choice that reaches
// MaxNFAStates), which bound the heap it can hold whenever the collector
// runs. A compile charges it to the request's memory claim
// (membudget.Charge) per 1024 states, before it builds them.
const BytesPerNFAState = 512

// autoRuleMin is the size (in states) from which a sub-expression that
// is compiled a second time with another continuation becomes a rule,
// called from both places, instead of a copy.
const autoRuleMin = 24

// ErrTooLarge is returned for constraints whose automaton exceeds
// MaxNFAStates.
var ErrTooLarge = errors.New("constraint too large")

// ErrEmptyLanguage is returned for a regex or grammar that accepts no
// text at all, not even the empty one: its start state reaches no
// accepting one, so a request's first step would allow no token. (A
// schema that accepts no document says which keyword leaves nothing,
// see SchemaError.)
var ErrEmptyLanguage = errors.New("accepts no text")

// LeftRecursionError is a grammar whose rule can call itself before
// reading a byte, which a top-down matcher cannot run.
type LeftRecursionError struct{ Rule string }

func (e *LeftRecursionError) Error() string {
	return fmt.Sprintf("rule %s is left-recursive (it can call itself before reading a byte)", e.Rule)
}

type nkind uint8

const (
	nRange nkind = iota // a byte in [lo, hi], then out
	nSplit              // out or out1
	nCall               // the rule out1, then out
	nEnd                // the end of a rule: return to the caller
)

// nstate is a Thompson NFA state with rule calls.
type nstate struct {
	kind      nkind
	lo, hi    byte
	out, out1 int32
}

type memoKey struct {
	n    *node
	next int32
}

type firstUse struct {
	next, size int32
}

// builder compiles nodes back to front: compile(n, next) returns the start
// of n's states, which continue to next. A sub-expression shared by
// pointer is compiled once per continuation, and a large one reused with
// another continuation becomes a rule; rules are compiled once each.
type builder struct {
	ctx     context.Context
	states  []nstate
	memo    map[memoKey]int32
	first   map[*node]firstUse
	auto    map[*node]*rule
	ruleID  map[*rule]int32
	rules   []*rule
	starts  []int32
	pending []int32
	// regular > 0 while compiling the operands of an intersection, which
	// must not call rules.
	regular int
	// body is the rule body being started, which must not become a call
	// of its own rule.
	body *node
	err  error
}

func newBuilder(ctx context.Context) *builder {
	return &builder{ctx: ctx, memo: map[memoKey]int32{}, first: map[*node]firstUse{},
		auto: map[*node]*rule{}, ruleID: map[*rule]int32{}}
}

func (b *builder) add(s nstate) int32 {
	if b.err != nil {
		return 0
	}
	if len(b.states) >= MaxNFAStates {
		b.err = fmt.Errorf("%w: more than %d automaton states", ErrTooLarge, MaxNFAStates)
		return 0
	}
	if len(b.states)&1023 == 0 {
		if err := b.ctx.Err(); err != nil {
			b.err = err
			return 0
		}
		// The next 1024 states, with the memo entries and rule tables
		// that come with them, drawn on the pod's preprocessing budget
		// before they are built (membudget: a compile that cannot get
		// them fails now, whatever its own bounds would allow).
		if err := membudget.Charge(b.ctx, 1024*BytesPerNFAState); err != nil {
			b.err = err
			return 0
		}
	}
	b.states = append(b.states, s)
	return int32(len(b.states) - 1)
}

func (b *builder) ruleIndex(r *rule) int32 {
	if id, ok := b.ruleID[r]; ok {
		return id
	}
	id := int32(len(b.rules))
	b.ruleID[r] = id
	b.rules = append(b.rules, r)
	b.starts = append(b.starts, -1)
	b.pending = append(b.pending, id)
	return id
}

func (b *builder) compile(n *node, next int32) int32 {
	if b.err != nil {
		return 0
	}
	k := memoKey{n, next}
	if s, ok := b.memo[k]; ok {
		return s
	}
	top := n == b.body
	b.body = nil
	if f, ok := b.first[n]; ok && !top && f.next != next && f.size >= autoRuleMin && b.regular == 0 {
		r := b.auto[n]
		if r == nil {
			r = &rule{body: n}
			b.auto[n] = r
		}
		s := b.add(nstate{kind: nCall, out: next, out1: b.ruleIndex(r)})
		b.memo[k] = s
		return s
	}
	before := len(b.states)
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
			s = b.dead()
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
	case opCall:
		if b.regular > 0 {
			b.err = errors.New("an intersection of patterns cannot refer to rules")
			return 0
		}
		s = b.add(nstate{kind: nCall, out: next, out1: b.ruleIndex(n.r)})
	case opAnd:
		s = b.intersect(n.subs[0], n.subs[1], next)
	case opDFA:
		s = b.rawDFA(n.dfa, next)
	case opLength:
		s = b.counted(n.subs[0], n.min, n.max, next)
	}
	b.memo[k] = s
	if _, ok := b.first[n]; !ok {
		b.first[n] = firstUse{next: next, size: int32(len(b.states) - before)}
	}
	return s
}

// dead matches nothing: a range no byte is in, looping on itself so that
// it never counts as a way to acceptance.
func (b *builder) dead() int32 {
	s := b.add(nstate{kind: nRange, lo: 1, hi: 0})
	if b.err == nil {
		b.states[s].out = s
	}
	return s
}

// rawDFA compiles d: a state per DFA state, choosing among its edges and,
// where it accepts, next.
func (b *builder) rawDFA(d *rawDFA, next int32) int32 {
	entry := make([]int32, len(d.trans))
	for i := range entry {
		entry[i] = b.add(nstate{})
	}
	for i, edges := range d.trans {
		if b.err != nil {
			return 0
		}
		var alts []int32
		for _, e := range edges {
			alts = append(alts, b.add(nstate{kind: nRange, lo: e.lo, hi: e.hi, out: entry[e.to]}))
		}
		if d.accept[i] {
			alts = append(alts, next)
		}
		st := b.choice(alts, b.dead)
		if b.err != nil {
			return 0
		}
		b.states[entry[i]] = st
	}
	return entry[0]
}

// fragment compiles x (regular: no rule calls) on its own, ending in an
// end marker of its own, for a construction over its states.
func (b *builder) fragment(x *node) (start, end int32) {
	b.regular++
	end = b.add(nstate{kind: nEnd})
	start = b.compile(x, end)
	b.regular--
	return start, end
}

// pairs numbers the states of a product construction: each pair met gets
// a state, filled when its turn on the work list comes.
type pairs[P comparable] struct {
	b    *builder
	ids  map[P]int32
	work []P
	dead int32
}

func newPairs[P comparable](b *builder) *pairs[P] {
	return &pairs[P]{b: b, ids: map[P]int32{}, dead: -1}
}

func (ps *pairs[P]) id(p P) int32 {
	if s, ok := ps.ids[p]; ok {
		return s
	}
	s := ps.b.add(nstate{})
	ps.ids[p] = s
	ps.work = append(ps.work, p)
	return s
}

// deadState is one state matching nothing, shared by the construction.
func (ps *pairs[P]) deadState() int32 {
	if ps.dead < 0 {
		ps.dead = ps.b.dead()
	}
	return ps.dead
}

// run fills each pair's state with what fill returns until no pair is
// left.
func (ps *pairs[P]) run(fill func(p P) nstate) {
	for len(ps.work) > 0 && ps.b.err == nil {
		p := ps.work[len(ps.work)-1]
		ps.work = ps.work[:len(ps.work)-1]
		st := fill(p)
		if ps.b.err == nil {
			ps.b.states[ps.ids[p]] = st
		}
	}
}

// intersect compiles the product of two regular expressions: the states
// of each are compiled apart, and the pairs reachable from the two starts
// become states continuing to next.
func (b *builder) intersect(x, y *node, next int32) int32 {
	sx, endX := b.fragment(x)
	sy, endY := b.fragment(y)
	if b.err != nil {
		return 0
	}
	type pair struct{ x, y int32 }
	ps := newPairs[pair](b)
	id := func(p pair) int32 {
		if p.x == endX && p.y == endY {
			return next
		}
		return ps.id(p)
	}
	start := id(pair{sx, sy})
	ps.run(func(p pair) nstate {
		px, py := b.states[p.x], b.states[p.y]
		switch {
		case px.kind == nSplit:
			return nstate{kind: nSplit, out: id(pair{px.out, p.y}), out1: id(pair{px.out1, p.y})}
		case py.kind == nSplit:
			return nstate{kind: nSplit, out: id(pair{p.x, py.out}), out1: id(pair{p.x, py.out1})}
		case px.kind == nRange && py.kind == nRange && max(px.lo, py.lo) <= min(px.hi, py.hi):
			return nstate{kind: nRange, lo: max(px.lo, py.lo), hi: min(px.hi, py.hi), out: id(pair{px.out, py.out})}
		}
		// One side ended, or the byte ranges are disjoint.
		return nstate{kind: nSplit, out: ps.deadState(), out1: ps.deadState()}
	})
	return start
}

// counted compiles the strings x matches of minChars to maxChars (< 0:
// any) UTF-8 characters: x's states paired with the characters read so
// far (a byte that is not a continuation byte starts one), counting up to
// the bound that matters. Under an upper bound, characters beyond the
// Basic Multilingual Plane are left out (see bmpStringChar).
func (b *builder) counted(x *node, minChars, maxChars int, next int32) int32 {
	sx, _ := b.fragment(x)
	if b.err != nil {
		return 0
	}
	type pair struct{ x, n int32 }
	ps := newPairs[pair](b)
	id := func(p pair) int32 {
		if maxChars >= 0 && int(p.n) > maxChars {
			return ps.deadState()
		}
		return ps.id(p)
	}
	start := id(pair{sx, 0})
	ps.run(func(p pair) nstate {
		px := b.states[p.x]
		switch px.kind {
		case nSplit:
			return nstate{kind: nSplit, out: id(pair{px.out, p.n}), out1: id(pair{px.out1, p.n})}
		case nRange:
			// Split the range where bytes stop or start counting.
			var alts []int32
			for _, r := range [][2]byte{{0, 0x7f}, {0x80, 0xbf}, {0xc0, 0xff}} {
				lo, hi := max(px.lo, r[0]), min(px.hi, r[1])
				if maxChars >= 0 && r[0] == 0xc0 {
					hi = min(hi, 0xef) // no 4-byte characters
				}
				if lo > hi {
					continue
				}
				n := p.n
				if r[0] != 0x80 {
					n++
					if maxChars < 0 {
						n = min(n, int32(minChars))
					}
				}
				alts = append(alts, b.add(nstate{kind: nRange, lo: lo, hi: hi, out: id(pair{px.out, n})}))
			}
			return b.choice(alts, ps.deadState)
		}
		// x ended.
		if int(p.n) >= minChars {
			return nstate{kind: nSplit, out: next, out1: next}
		}
		return nstate{kind: nSplit, out: ps.deadState(), out1: ps.deadState()}
	})
	return start
}

// choice is a state going on to any one of alts (a dead end when there
// are none).
func (b *builder) choice(alts []int32, dead func() int32) nstate {
	if len(alts) == 0 {
		alts = append(alts, dead())
	}
	s := alts[len(alts)-1]
	for j := len(alts) - 2; j >= 1; j-- {
		s = b.add(nstate{kind: nSplit, out: alts[j], out1: s})
	}
	return nstate{kind: nSplit, out: alts[0], out1: s}
}

// program is a compiled constraint: NFA states and rule starts (rule 0 is
// the whole output).
type program struct {
	nfa    []nstate
	starts []int32
	// dist is, per state, the fewest bytes to the end of its rule.
	dist []int32
}

// compileProgram compiles n (the whole output) and the rules it calls.
func compileProgram(ctx context.Context, n *node) (*program, error) {
	b := newBuilder(ctx)
	b.ruleIndex(&rule{name: "root", body: n})
	for len(b.pending) > 0 && b.err == nil {
		id := b.pending[0]
		b.pending = b.pending[1:]
		end := b.add(nstate{kind: nEnd})
		b.body = b.rules[id].body
		b.starts[id] = b.compile(b.rules[id].body, end)
	}
	if b.err != nil {
		return nil, b.err
	}
	p := &program{nfa: b.states, starts: b.starts}
	p.dist = p.distances()
	if r := p.leftRecursive(); r >= 0 {
		name := b.rules[r].name
		if name == "" {
			name = "a repeated sub-expression"
		}
		return nil, &LeftRecursionError{Rule: name}
	}
	return p, nil
}

const inf = int32(math.MaxInt32 / 4)

func satAdd(a, b int32) int32 { return min(a+b, inf) }

// distances computes, per state, the fewest bytes to the end of its rule,
// a call costing its rule's fewest bytes: a label-correcting fixed point
// over reversed edges, where a rule's start improving re-examines its
// callers.
func (p *program) distances() []int32 {
	n := len(p.nfa)
	dist := make([]int32, n)
	for i := range dist {
		dist[i] = inf
	}
	rev := make([][]int32, n)
	for i, s := range p.nfa {
		switch s.kind {
		case nRange:
			rev[s.out] = append(rev[s.out], int32(i))
		case nSplit:
			rev[s.out] = append(rev[s.out], int32(i))
			rev[s.out1] = append(rev[s.out1], int32(i))
		case nCall:
			rev[s.out] = append(rev[s.out], int32(i))
			if st := p.starts[s.out1]; st >= 0 {
				rev[st] = append(rev[st], int32(i))
			}
		}
	}
	var queue []int32
	for i, s := range p.nfa {
		if s.kind == nEnd {
			dist[i] = 0
			queue = append(queue, int32(i))
		}
	}
	eval := func(s nstate) int32 {
		switch s.kind {
		case nRange:
			return satAdd(dist[s.out], 1)
		case nSplit:
			return min(dist[s.out], dist[s.out1])
		case nCall:
			return satAdd(dist[p.starts[s.out1]], dist[s.out])
		}
		return 0
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, u := range rev[v] {
			if d := eval(p.nfa[u]); d < dist[u] {
				dist[u] = d
				queue = append(queue, u)
			}
		}
	}
	return dist
}

// reach visits the states reachable from starts, each once, going on to
// the states visit returns.
func reach(nfa []nstate, starts []int32, visit func(s int32, st nstate) []int32) {
	seen := map[int32]bool{}
	stack := append([]int32(nil), starts...)
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[s] {
			continue
		}
		seen[s] = true
		stack = append(stack, visit(s, nfa[s])...)
	}
}

// leftRecursive returns a rule that can call itself without reading a
// byte, or -1.
func (p *program) leftRecursive() int {
	// calls[r] are the rules r can call before reading a byte.
	calls := make([][]int32, len(p.starts))
	for r, start := range p.starts {
		reach(p.nfa, []int32{start}, func(s int32, st nstate) []int32 {
			switch st.kind {
			case nSplit:
				return []int32{st.out, st.out1}
			case nCall:
				calls[r] = append(calls[r], st.out1)
				if p.dist[p.starts[st.out1]] == 0 { // nullable: may be skipped
					return []int32{st.out}
				}
			}
			return nil
		})
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]int8, len(p.starts))
	var visit func(r int32) int
	visit = func(r int32) int {
		color[r] = grey
		for _, c := range calls[r] {
			switch color[c] {
			case grey:
				return int(c)
			case white:
				if found := visit(c); found >= 0 {
					return found
				}
			}
		}
		color[r] = black
		return -1
	}
	for r := range p.starts {
		if color[r] == white {
			if found := visit(int32(r)); found >= 0 {
				return found
			}
		}
	}
	return -1
}
