package grammar

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
)

// maxCachedMasks bounds the token masks a grammar keeps for automaton
// states, and maxCachedPositions those it keeps for rule positions; past
// them masks are computed again when needed.
const (
	maxCachedMasks     = 1024
	maxCachedPositions = 1024
)

// maxStates bounds the automaton states a grammar interns. A recursive
// grammar reaches new states as its outputs nest deeper; past the bound
// the tables start afresh (matchers keep the states they hold, which stay
// valid), so a long-lived grammar's memory stays bounded.
const maxStates = 4096

// frame is a rule position on a stack: a state of the NFA and the frame
// to return to when its rule ends. Frames are interned, so a stack is
// identified by its top frame.
type frame struct {
	state  int32
	dist   int32 // fewest bytes from here to the end of the stack
	parent *frame
	id     uint64
	// resume is the automaton state after returning here (lazily).
	resume *dstate
}

type frameKey struct {
	state  int32
	parent uint64
}

// dstate is a state of the lazily built automaton: the set of stacks the
// output so far can be in, each as its top frame (at a byte-reading NFA
// state).
type dstate struct {
	frames []*frame // sorted by id
	// accept: the whole output may end here.
	accept bool
	// returns (positions' own walks only, see positionMask): the rule at
	// the bottom of the stack may have ended here.
	returns bool
	// dist is the fewest bytes to acceptance (0 when accept or returns);
	// liveDist the fewest through frames.
	dist, liveDist int32
	// next[b] is the state after byte b: nil not computed, deadState dead.
	next [256]*dstate
	mask *tokenMask
	// tooComplex is the bound a call passed computing mask: later calls
	// fail at once instead of paying for it again.
	tooComplex error
}

// deadState marks a transition that no stack survives.
var deadState = &dstate{}

type item struct {
	state  int32
	parent *frame
}

type seenKey struct {
	state  int32
	parent uint64
}

// Grammar is a compiled constraint. Its automaton and token masks are
// built lazily and shared by every matcher of the grammar; the methods
// are safe for concurrent use.
type Grammar struct {
	p *program

	mu     sync.Mutex
	vocab  *Vocab // the vocabulary the cached masks are for
	init   *dstate
	index  map[string]*dstate
	frames map[frameKey]*frame
	nextID uint64
	// bottom stands for the unknown stack below a rule position, in the
	// walks that compute a position's own tokens.
	bottom    *frame
	acceptAll *dstate
	positions map[int32]*positionMask
	masks     int // masks cached in states
	resets    int // times the tables started afresh
	// refs counts the frames the interned states list (see maxFrames).
	refs    int
	w       work // the current call's, see work_bound.go
	seen    map[seenKey]struct{}
	scratch []item
	key     []byte

	// memory is MemoryBytes, updated where the grammar grows and read
	// without g.mu: a cache evicting grammars must not wait for one busy
	// computing a mask.
	memory atomic.Int64
}

func newGrammar(ctx context.Context, n *node) (*Grammar, error) {
	p, err := compileProgram(ctx, n)
	if err != nil {
		return nil, err
	}
	g := &Grammar{p: p, positions: map[int32]*positionMask{}, seen: map[seenKey]struct{}{}}
	g.bottom = &frame{state: -1, id: 1}
	g.nextID = 1
	g.clearTables()
	// The start state, under the bounds of a decoding step: a grammar
	// whose first position already has too many stacks is refused here.
	g.begin(nil)
	g.acceptAll = g.intern(nil, true, false)
	g.init = g.closure([]item{{g.p.starts[0], nil}})
	if g.failed() {
		return nil, g.w.err
	}
	return g, nil
}

// clearTables starts the interning tables afresh. The states and frames
// interned so far stay valid for the matchers that hold them.
func (g *Grammar) clearTables() {
	g.index = map[string]*dstate{}
	g.frames = map[frameKey]*frame{}
	g.masks = 0
	g.refs = 0
}

func parentID(f *frame) uint64 {
	if f == nil {
		return 0
	}
	return f.id
}

func (g *Grammar) frame(state int32, parent *frame) *frame {
	k := frameKey{state, parentID(parent)}
	if f, ok := g.frames[k]; ok {
		return f
	}
	g.nextID++
	f := &frame{state: state, parent: parent, id: g.nextID, dist: g.p.dist[state]}
	if parent != nil && parent != g.bottom {
		f.dist = satAdd(f.dist, parent.dist)
	}
	g.frames[k] = f
	return f
}

// closure returns the state of the stacks reachable from items without
// reading a byte: splits are followed, calls push their rule's start,
// rule ends return to their caller. It returns nil, and records why,
// when the call passes its bounds (work_bound.go).
func (g *Grammar) closure(items []item) *dstate {
	if g.failed() {
		return nil
	}
	clear(g.seen)
	stack := append(g.scratch[:0], items...)
	var frames []*frame
	accept, returns := false, false
	visited := 0
	for len(stack) > 0 && !g.failed() {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		k := seenKey{it.state, parentID(it.parent)}
		if _, ok := g.seen[k]; ok {
			continue
		}
		g.seen[k] = struct{}{}
		visited++
		if g.w.items++; g.w.items > maxCallItems {
			g.fail(errCallItems)
		}
		switch st := &g.p.nfa[it.state]; st.kind {
		case nRange:
			frames = append(frames, g.frame(it.state, it.parent))
		case nSplit:
			stack = append(stack, item{st.out1, it.parent}, item{st.out, it.parent})
		case nCall:
			parent := it.parent
			if g.p.nfa[st.out].kind != nEnd { // a call in tail position returns straight to the caller's caller
				parent = g.frame(st.out, it.parent)
			}
			stack = append(stack, item{g.p.starts[st.out1], parent})
		case nEnd:
			switch p := it.parent; p {
			case nil:
				accept = true
			case g.bottom:
				returns = true
			default:
				stack = append(stack, item{p.state, p.parent})
			}
		}
	}
	g.scratch = stack
	if visited > bigClosure { // do not keep a large seen set and stack
		g.seen, g.scratch = map[seenKey]struct{}{}, nil
	}
	if g.failed() {
		return nil
	}
	slices.SortFunc(frames, func(a, b *frame) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return g.intern(frames, accept, returns)
}

func (g *Grammar) intern(frames []*frame, accept, returns bool) *dstate {
	if len(frames) == 0 && !accept && !returns {
		return deadState
	}
	key := g.key[:0]
	var flags byte
	if accept {
		flags |= 1
	}
	if returns {
		flags |= 2
	}
	key = append(key, flags)
	for _, f := range frames {
		key = binary.LittleEndian.AppendUint64(key, f.id)
	}
	g.key = key
	if d, ok := g.index[string(key)]; ok {
		return d
	}
	if len(g.index) >= maxStates || len(g.frames)+g.refs >= maxFrames {
		g.resets++
		g.clearTables()
	}
	g.refs += len(frames)
	d := &dstate{frames: frames, accept: accept, returns: returns, liveDist: inf}
	for _, f := range frames {
		d.liveDist = min(d.liveDist, f.dist)
	}
	d.dist = d.liveDist
	if accept || returns {
		d.dist = 0
	}
	g.index[string(key)] = d
	g.noteMemory()
	return d
}

// step returns the state after byte c from d, or nil: no stack survives,
// or the call passed its bounds (g.failed). The caller holds g.mu. A
// transition already computed costs a few instructions (step inlines): a
// token mask follows one per trie node it visits.
func (g *Grammar) step(d *dstate, c byte) *dstate {
	if n := d.next[c]; n != nil && n != deadState && g.w.stepsLeft > 0 {
		g.w.stepsLeft--
		return n
	}
	return g.stepSlow(d, c)
}

// stepSlow is step past its fast path: a dead state or transition, the
// bound, or a transition to compute.
func (g *Grammar) stepSlow(d *dstate, c byte) *dstate {
	if d == deadState { // shared by every grammar: never written
		return nil
	}
	if g.w.stepsLeft <= 0 { // zero too after any failure: the walks stop
		g.fail(errCallSteps)
		return nil
	}
	g.w.stepsLeft--
	if n := d.next[c]; n != nil {
		if n == deadState {
			return nil
		}
		return n
	}
	var moved []item
	for _, f := range d.frames {
		st := &g.p.nfa[f.state]
		if st.lo <= c && c <= st.hi {
			moved = append(moved, item{st.out, f.parent})
		}
	}
	n := deadState
	if len(moved) > 0 {
		if n = g.closure(moved); n == nil {
			return nil // not cached: the bound is the call's
		}
	}
	d.next[c] = n
	if n == deadState {
		return nil
	}
	return n
}

// resumeAt is the state after a rule returns to f (f nil: the output
// ends), or nil when the call passed its bounds.
func (g *Grammar) resumeAt(f *frame) *dstate {
	if f == nil {
		return g.acceptAll
	}
	if f.resume == nil {
		f.resume = g.closure([]item{{f.state, f.parent}})
	}
	return f.resume
}

// isFinal reports whether d accepts and no byte may follow.
func (d *dstate) isFinal() bool { return d.accept && len(d.frames) == 0 }

// Accepts reports whether the grammar matches text exactly; false too
// when a byte's step passes the bounds of work_bound.go.
func (g *Grammar) Accepts(text []byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.init
	for _, c := range text {
		g.begin(nil)
		if d = g.step(d, c); d == nil {
			return false
		}
	}
	return d.accept
}

// MinLength is the fewest bytes of an accepted text.
func (g *Grammar) MinLength() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return int(g.init.dist)
}

// NumNFAStates is the compiled size (tests, limits).
func (g *Grammar) NumNFAStates() int { return len(g.p.nfa) }

// NumRules is the number of rules compiled (the whole output counts as
// one).
func (g *Grammar) NumRules() int { return len(g.p.starts) }

// MemoryBytes estimates the memory the grammar holds: its automaton, the
// states and frames interned so far and the cached masks. It does not
// wait for a call in progress: it returns the estimate as of the last
// state the grammar interned or mask it cached.
func (g *Grammar) MemoryBytes() int64 { return g.memory.Load() }

// noteMemory updates MemoryBytes; it is called where the grammar grows
// (a state interned, a mask cached, the vocabulary bound). The caller
// holds g.mu.
func (g *Grammar) noteMemory() {
	n := int64(len(g.p.nfa))*16 + int64(len(g.index))*(256*8+96) + int64(len(g.frames))*64 + int64(g.refs)*8
	if g.vocab != nil {
		n += int64(g.masks+len(g.positions)) * int64(g.vocab.words) * 8
	}
	g.memory.Store(n)
}
