package server

import (
	"slices"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// allowedSet is a request's allowed_token_ids (vLLM's) as a mask over the
// vocabulary, shared read-only by its sequences: every other token's logit
// is masked out, end-of-sequence and stop token ids included unless listed.
type allowedSet struct {
	mask []uint64
	// early is mask without the end-of-sequence and stop token ids:
	// min_tokens bans them, as it does without allowed_token_ids (a
	// constraint replaces the engine's own ban).
	early []uint64
}

// allowedTokens builds the request's allowed set, nil when it has none.
// It is an output constraint, so it cannot go with structured outputs or
// an enforced tool call (400 naming allowed_token_ids).
func (s *Server) allowedTokens(c *openai.Common, j *job) (*allowedSet, *openai.Error) {
	if len(c.AllowedTokenIDs) == 0 {
		return nil, nil
	}
	vocab := s.eng.Config().VocabSize
	switch {
	case vocab <= 0:
		return nil, openai.BadRequest("allowed_token_ids", "allowed_token_ids needs the model's vocabulary size, which this server was not given")
	case j.grammar != nil:
		return nil, openai.BadRequest("allowed_token_ids", "allowed_token_ids and a structured output format or an enforced tool call both constrain the output; give one")
	}
	a := &allowedSet{mask: make([]uint64, (vocab+63)/64)}
	for _, id := range c.AllowedTokenIDs {
		if id < 0 || int(id) >= vocab {
			return nil, openai.BadRequest("allowed_token_ids", "allowed_token_ids: token id %d outside the vocabulary [0, %d)", id, vocab)
		}
		a.mask[id/64] |= 1 << (uint(id) % 64)
	}
	a.early = a.mask
	ends := c.StopTokenIDs
	if !c.IgnoreEOS {
		ends = slices.Concat(ends, s.eng.Config().EOS)
	}
	cloned := false
	for _, id := range ends {
		if !sampling.Allowed(a.mask, id) {
			continue
		}
		if !cloned {
			a.early, cloned = slices.Clone(a.mask), true
		}
		a.early[id/64] &^= 1 << (uint(id) % 64)
	}
	if c.MinTokens != nil && *c.MinTokens > 0 && !slices.ContainsFunc(a.early, func(w uint64) bool { return w != 0 }) {
		return nil, openai.BadRequest("allowed_token_ids", "allowed_token_ids lists only end-of-sequence and stop tokens, which min_tokens bans")
	}
	return a, nil
}

// constraint is one sequence's view of the set: it bans the ends while
// fewer than minTokens tokens were generated.
func (a *allowedSet) constraint(minTokens int) sampling.Constraint {
	return &allowedTokens{set: a, minTokens: minTokens}
}

// allowedTokens implements sampling.Constraint for one sequence.
type allowedTokens struct {
	set       *allowedSet
	minTokens int
	generated int
}

var _ sampling.Constraint = (*allowedTokens)(nil)

// Mask implements sampling.Constraint.
func (t *allowedTokens) Mask(int) []uint64 {
	if t.generated < t.minTokens {
		return t.set.early
	}
	return t.set.mask
}

// Advance implements sampling.Constraint.
func (t *allowedTokens) Advance(token int32) bool {
	if !sampling.Allowed(t.Mask(0), token) {
		return false
	}
	t.generated++
	return true
}

// Done implements sampling.Constraint: the set restricts each token, never
// the output's end.
func (t *allowedTokens) Done() bool { return false }
