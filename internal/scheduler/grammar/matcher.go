package grammar

import (
	"slices"

	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// Matcher is one request's position in a grammar: a sampling.Constraint.
type Matcher struct {
	g     *Grammar
	v     *Vocab
	state *dstate
	done  bool
	// err is the bound the automaton passed at this position (see
	// work_bound.go); the matcher allows nothing after it.
	err error
	// ends are the end-of-sequence and stop token ids: allowed where the
	// output is complete.
	ends []int32
	// scratch receives masks that are not the cached one: a state's mask
	// plus the end ids, or a budgeted mask.
	scratch []uint64
}

var _ sampling.Constraint = (*Matcher)(nil)

// NewMatcher starts a request on g over vocabulary v; ends are the
// end-of-sequence and stop token ids. A grammar's cached masks belong to
// one vocabulary: a server has one.
func (g *Grammar) NewMatcher(v *Vocab, ends []int32) *Matcher {
	g.mu.Lock()
	g.bindLocked(v)
	init := g.init
	g.mu.Unlock()
	return &Matcher{g: g, v: v, state: init, ends: slices.Clone(ends), scratch: make([]uint64, v.words)}
}

func (g *Grammar) bindLocked(v *Vocab) {
	if g.vocab == nil {
		g.vocab = v
		g.noteMemory()
	} else if g.vocab != v {
		panic("grammar: one grammar used with two vocabularies")
	}
}

// Prepare binds g to vocabulary v, as NewMatcher does, and computes the
// start position's token mask under the bounds of a decoding step: a
// server calls it when it compiles a constraint, so that a grammar that
// passes the bounds at once is refused with the compile (the error wraps
// ErrTooComplex), and the request's first step finds its mask cached.
func (g *Grammar) Prepare(v *Vocab) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bindLocked(v)
	g.begin(v)
	if g.maskFor(v, g.init, -1, nil) == nil {
		return g.w.err
	}
	return nil
}

// Mask implements sampling.Constraint. When the automaton passes its
// bounds at this position it allows no token, and Err says why.
func (m *Matcher) Mask(remaining int) []uint64 {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.done || m.err != nil {
		clear(m.scratch)
		return m.scratch
	}
	g.begin(m.v)
	s := m.state
	full := g.maskFor(m.v, s, -1, nil)
	if full == nil {
		return m.failLocked()
	}
	bits := full.bits
	// With remaining tokens left, the one sampled now must leave the rest
	// of the output at most remaining-1 tokens away (a token is at least
	// one byte, and every vocabulary here can spell any byte): only the
	// last steps of a long output pay for a budgeted walk.
	if budget := int32(remaining - 1); budget >= 0 && full.maxDist > budget {
		bm := g.maskFor(m.v, s, budget, m.scratch)
		if bm == nil {
			return m.failLocked()
		}
		if bm.count > 0 || s.accept {
			bits = bm.bits
		}
	}
	if s.accept {
		if &bits[0] != &m.scratch[0] {
			copy(m.scratch, bits)
			bits = m.scratch
		}
		for _, id := range m.ends {
			if id >= 0 && int(id) < m.v.size {
				bits[id>>6] |= 1 << (uint(id) & 63)
			}
		}
	}
	return bits
}

// failLocked records the bound the current call passed and returns the
// empty mask.
func (m *Matcher) failLocked() []uint64 {
	m.err = m.g.w.err
	clear(m.scratch)
	return m.scratch
}

// Advance implements sampling.Constraint. It returns false once the
// matcher has failed (Err).
func (m *Matcher) Advance(tok int32) bool {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.done || m.err != nil {
		return false
	}
	if slices.Contains(m.ends, tok) {
		if !m.state.accept {
			return false
		}
		m.done = true
		return true
	}
	tb := m.v.TokenBytes(tok)
	if len(tb) == 0 {
		return false
	}
	g.begin(m.v)
	s := m.state
	for _, c := range tb {
		if s = g.step(s, c); s == nil {
			m.err = g.w.err
			return false
		}
	}
	m.state = s
	if s.isFinal() {
		m.done = true
	}
	return true
}

// Done implements sampling.Constraint.
func (m *Matcher) Done() bool { return m.done }

// Err is why the matcher failed: nil, or an error wrapping ErrTooComplex
// when the grammar's automaton passed the bounds of a decoding step at
// this position. A failed matcher allows no token and advances on none;
// the engine ends its request with this error.
func (m *Matcher) Err() error {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	return m.err
}

// Complete reports whether the output so far is accepted (tests).
func (m *Matcher) Complete() bool {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	return m.done || m.state.accept
}
