package server

import (
	"bytes"

	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// thinkingBudget caps a sequence's <think> reasoning at budget tokens:
// once the reasoning has that many and is still open, the tokens of
// closing (close, "\n</think>\n\n" as the tokenizer writes it) are the
// only ones allowed, one after another, and the model then writes its
// answer unconstrained. Output that does not start in reasoning (the
// prompt did not open it, and the output does not open it first) is not
// constrained at all. Anthropic's thinking.budget_tokens sets it.
type thinkingBudget struct {
	budget  int
	close   []int32
	decoder engine.TokenDecoder
	all     []uint64 // every token
	one     []uint64 // the forced token's mask, reused

	state   int // budgetStart, budgetIn, budgetForcing, budgetOff
	count   int
	forced  int    // tokens of close written while forcing
	lead    []byte // budgetStart: the output's first bytes
	tail    []byte // budgetIn: the last bytes, to see </think>
	started bool
}

const (
	budgetStart = iota
	budgetIn
	budgetForcing
	budgetOff
)

var _ sampling.Constraint = (*thinkingBudget)(nil)

func newThinkingBudget(budget int, close []int32, dec engine.TokenDecoder, vocabSize int, inReasoning bool) *thinkingBudget {
	words := (vocabSize + 63) / 64
	all := make([]uint64, words)
	for i := range all {
		all[i] = ^uint64(0)
	}
	t := &thinkingBudget{budget: budget, close: close, decoder: dec, all: all, one: make([]uint64, words)}
	if inReasoning {
		t.state = budgetIn
	}
	return t
}

// Mask implements sampling.Constraint.
func (t *thinkingBudget) Mask(int) []uint64 {
	if t.state == budgetIn && t.count >= t.budget {
		t.state, t.forced = budgetForcing, 0
	}
	if t.state != budgetForcing {
		return t.all
	}
	clear(t.one)
	id := t.close[t.forced]
	t.one[id>>6] |= 1 << (uint(id) & 63)
	return t.one
}

// Advance implements sampling.Constraint.
func (t *thinkingBudget) Advance(token int32) bool {
	if !sampling.Allowed(t.Mask(0), token) {
		return false
	}
	b := t.decoder.TokenBytes(token)
	switch t.state {
	case budgetStart:
		t.lead = append(t.lead, b...)
		lead := bytes.TrimLeft(t.lead, " \t\r\n")
		switch {
		case bytes.HasPrefix(lead, []byte("<think>")):
			t.state, t.tail = budgetIn, append(t.tail[:0], lead[len("<think>"):]...)
		case len(lead) > 0 && !bytes.HasPrefix([]byte("<think>"), lead):
			t.state = budgetOff
		}
	case budgetIn:
		t.count++
		t.tail = append(t.tail, b...)
		if bytes.Contains(t.tail, []byte("</think>")) {
			t.state = budgetOff
		} else if n := len(t.tail); n > 16 {
			t.tail = append(t.tail[:0], t.tail[n-16:]...)
		}
	case budgetForcing:
		t.forced++
		if t.forced == len(t.close) {
			t.state = budgetOff
		}
	}
	return true
}

// Done implements sampling.Constraint: the budget never ends the output.
func (t *thinkingBudget) Done() bool { return false }
