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
	if g.vocab == nil {
		g.vocab = v
	} else if g.vocab != v {
		panic("grammar: one grammar used with two vocabularies")
	}
	init := g.init
	g.mu.Unlock()
	return &Matcher{g: g, v: v, state: init, ends: slices.Clone(ends), scratch: make([]uint64, v.words)}
}

// Mask implements sampling.Constraint.
func (m *Matcher) Mask(remaining int) []uint64 {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.done {
		clear(m.scratch)
		return m.scratch
	}
	s := m.state
	full := g.maskFor(m.v, s, -1, nil)
	bits := full.bits
	// With remaining tokens left, the one sampled now must leave the rest
	// of the output at most remaining-1 tokens away (a token is at least
	// one byte, and every vocabulary here can spell any byte): only the
	// last steps of a long output pay for a budgeted walk.
	if budget := int32(remaining - 1); budget >= 0 && full.maxDist > budget {
		bm := g.maskFor(m.v, s, budget, m.scratch)
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

// Advance implements sampling.Constraint.
func (m *Matcher) Advance(tok int32) bool {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.done {
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
	s := m.state
	for _, c := range tb {
		if s = g.step(s, c); s == nil {
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

// Complete reports whether the output so far is accepted (tests).
func (m *Matcher) Complete() bool {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	return m.done || m.state.accept
}
