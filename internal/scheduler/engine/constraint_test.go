package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
	"github.com/kvpilot/kvpilot/internal/util/testing/stackgrammars"
)

// TestConstraintShapesOutput: whatever the executor prefers, a constrained
// request's output is in the constraint's language and ends (reason stop)
// as soon as nothing may follow, both when the engine samples from logits
// and when the executor samples by itself.
func TestConstraintShapesOutput(t *testing.T) {
	for _, logits := range []bool{true, false} {
		o := defaultOpts()
		o.logits = logits
		env := newEnv(t, o)
		dec := letters{eos: env.x.eos}
		v := grammar.NewVocab(testVocab, dec.TokenBytes)
		g, err := grammar.Regex(`(abc|xyz)(q(abc|xyz))*`)
		if err != nil {
			t.Fatal(err)
		}
		var streams []*Stream
		for i := range 8 {
			r := req("c", prompt(5, uint64(i)), 40)
			r.Constraint = g.NewMatcher(v, []int32{env.x.eos})
			streams = append(streams, mustSubmit(t, env.e, r))
		}
		// An unconstrained neighbour in the same batches is unaffected.
		free := mustSubmit(t, env.e, req("free", prompt(5, 99), 40))
		env.runUntilIdle(t, 200)
		for _, s := range streams {
			_, text, f := collect(t, s)
			if !g.Accepts([]byte(text)) {
				t.Errorf("logits=%v: output %q is not in the language", logits, text)
			}
			if f.FinishReason != completion.Stop && f.FinishReason != completion.Length {
				t.Errorf("logits=%v: finish %v (%v)", logits, f.FinishReason, f.Err)
			}
		}
		if _, text, _ := collect(t, free); g.Accepts([]byte(text)) && len(text) > 3 {
			t.Errorf("the unconstrained request looks constrained: %q", text)
		}
	}
}

// TestConstraintFinishesWithinMaxTokens: with a budget that barely fits,
// the output is still complete.
func TestConstraintFinishesWithinMaxTokens(t *testing.T) {
	o := defaultOpts()
	o.logits = true
	env := newEnv(t, o)
	dec := letters{eos: env.x.eos}
	v := grammar.NewVocab(testVocab, dec.TokenBytes)
	g, err := grammar.Regex(`a[b-z]*c`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		r := req("c", prompt(5, uint64(i)), 6)
		r.Constraint = g.NewMatcher(v, []int32{env.x.eos})
		s := mustSubmit(t, env.e, r)
		env.runUntilIdle(t, 100)
		_, text, f := collect(t, s)
		if !g.Accepts([]byte(text)) {
			t.Errorf("output %q (finish %v) incomplete within 6 tokens", text, f.FinishReason)
		}
	}
}

// TestConstraintFailureEndsOnlyItsRequest: a grammar whose stacks multiply
// past the grammar's work bound after "bb" (helpers/probe-bounds.md,
// finding 1: it hung the engine loop) ends its own request with reason
// error and the grammar's error when the mask after the first "b" meets
// them, both when the engine samples and when the executor does; an
// unconstrained request in the same batches runs to its length.
func TestConstraintFailureEndsOnlyItsRequest(t *testing.T) {
	for _, logits := range []bool{true, false} {
		g, err := grammar.CompileGBNF(context.Background(), stackgrammars.Doubling("bb", 20))
		if err != nil {
			t.Fatal(err)
		}
		o := defaultOpts()
		o.logits = logits
		env := newEnv(t, o)
		v := grammar.NewVocab(testVocab, letters{eos: env.x.eos}.TokenBytes)
		r := req("bad", prompt(5, 1), 20)
		r.Constraint = g.NewMatcher(v, []int32{env.x.eos})
		bad := mustSubmit(t, env.e, r)
		fr := req("free", prompt(5, 2), 20)
		fr.Params.IgnoreEOS = true
		free := mustSubmit(t, env.e, fr)
		env.runUntilIdle(t, 200)
		if _, text, f := collect(t, bad); f.FinishReason != completion.Error || !errors.Is(f.Err, grammar.ErrTooComplex) || text != "b" {
			t.Errorf("logits=%v: constrained request: %q, finish %v (%v); want \"b\", then error ErrTooComplex", logits, text, f.FinishReason, f.Err)
		}
		if toks, _, f := collect(t, free); f.FinishReason != completion.Length || len(toks) != 20 {
			t.Errorf("logits=%v: unconstrained request: %d tokens, finish %v (%v)", logits, len(toks), f.FinishReason, f.Err)
		}
	}
}
