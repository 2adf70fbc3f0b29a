package grammar

import "fmt"

// The pushdown automaton is built lazily, while requests decode, on the
// engine's goroutine. Its size is not the NFA's: a grammar whose rules
// call the next rule from two places (r0 ::= r1 | r1 r1, r1 ::= r2 | r2
// r2, …) has 2^depth stacks at one position while its NFA stays tiny.
// These bounds cap the work of one call (Mask, Advance, Prepare, a
// compile's start state) and the memory a grammar interns, whatever the
// grammar. A call that passes one stops, caches nothing partial, and
// fails: the compile or Prepare with an error, a matcher with Err. The
// state whose mask passed a bound remembers it, so the next request to
// reach it fails at once instead of paying again.
//
// At the bounds a call took 25-85 ms on a loaded 2-core machine
// (BenchmarkMaskAtBound); realistic grammars stay under a quarter of them
// (TestWorkOfRealisticGrammars).
const (
	// maxCallItems bounds the (NFA state, stack) pairs one call visits,
	// over all the closures it computes. JSON schemas, json.gbnf and
	// tool-call grammars visit fewer than 30,000 a call over a
	// 151,936-token vocabulary, a choice among 12,000 strings (near the
	// compile's bound) 48,000. At twice this bound the slowest shape took
	// six times as long (its maps outgrow the caches): 200 ms, not 35.
	maxCallItems = 1 << 17
	// maxCallStepsPerNode bounds the transitions one call follows (cached
	// ones included) per node of the vocabulary's trie. A token mask
	// walks the trie about once a distinct top position: realistic
	// grammars follow at most one trie's worth a call, a choice among
	// 12,000 strings ten.
	maxCallStepsPerNode = 32
	// minCallSteps is the transition bound for small vocabularies.
	minCallSteps = 1 << 20
	// maxFrames bounds the frames a grammar interns plus the frames its
	// interned states list (a state may list up to maxCallItems); past it
	// the tables start afresh, as they do past maxStates.
	maxFrames = 1 << 18
	// bigClosure is the closure size past which the closure's scratch
	// (its seen set, its stack) is dropped afterwards instead of kept
	// for the next closure.
	bigClosure = 1 << 12
)

// ErrTooComplex is a constraint whose automaton needs more work at one
// position than a decoding step may take (errors.Is(err, ErrTooLarge)
// holds too). A compile returns it when the start position is at fault;
// a matcher that meets it later fails (Matcher.Err).
var ErrTooComplex = fmt.Errorf("%w: too many rule stacks or alternatives at one position", ErrTooLarge)

// workError is the bound a call passed.
type workError struct{ what string }

func (e *workError) Error() string {
	return ErrTooComplex.Error() + " (" + e.what + "; rules that call the next rule from several places, many levels deep, multiply the stacks)"
}

func (e *workError) Unwrap() error { return ErrTooComplex }

var (
	errCallItems = &workError{fmt.Sprintf("one step reaches more than %d (rule position, stack) pairs", maxCallItems)}
	errCallSteps = &workError{"one step follows more automaton transitions than its bound"}
)

// work counts one call's work (the caller holds g.mu): the closure items
// visited and the transitions it may still follow.
type work struct {
	items     int
	stepsLeft int // zero once err is set, so that walks stop
	maxSteps  int
	err       error // the first bound passed; nil while within them
}

// begin starts a bounded call over vocabulary v (nil: no trie walk).
func (g *Grammar) begin(v *Vocab) {
	g.w = work{maxSteps: minCallSteps}
	if v != nil {
		g.w.maxSteps = max(minCallSteps, maxCallStepsPerNode*len(v.b))
	}
	g.w.stepsLeft = g.w.maxSteps
}

// steps is the transitions the call followed.
func (w *work) steps() int { return w.maxSteps - w.stepsLeft }

// failed reports whether the current call passed a bound.
func (g *Grammar) failed() bool { return g.w.err != nil }

// fail records the bound passed (the first one) and stops the call's
// walks.
func (g *Grammar) fail(err error) {
	if g.w.err == nil {
		g.w.err = err
	}
	g.w.stepsLeft = 0
}
