package grammar

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/util/testing/stackgrammars"
)

// boundedWait is how long a test waits for a call whose work is bounded
// before it calls the call hung (the bound is reached in well under a
// second on a loaded machine).
const boundedWait = time.Minute

// runBounded runs f and fails t if it does not return within boundedWait.
func runBounded(t *testing.T, what string, f func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), boundedWait)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s: still running after %v", what, boundedWait)
	}
}

// checkWork fails t if g's last call or its tables passed their bounds.
func checkWork(t *testing.T, g *Grammar, what string) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w.items > maxCallItems+1 || g.w.steps() > g.w.maxSteps {
		t.Errorf("%s: %d closure items, %d transitions (bounds %d, %d)", what, g.w.items, g.w.steps(), maxCallItems, g.w.maxSteps)
	}
	if n := len(g.frames) + g.refs; n > maxFrames+maxCallItems {
		t.Errorf("%s: %d frames interned and listed (bound %d)", what, n, maxFrames+maxCallItems)
	}
}

// TestStackBlowupIsBounded: grammars whose stacks multiply with their
// depth (helpers/probe-bounds.md, finding 1: each hung the engine) are
// refused by the compile when their start position has too many stacks,
// by Prepare when the start's mask does, and otherwise fail their matcher
// (an empty mask, Err) at the position that does; no call passes its
// bounds, the grammar stays usable where it is within them, a second
// request meeting the same position fails there without doing the work
// again, and a shallower chain decodes.
func TestStackBlowupIsBounded(t *testing.T) {
	v, eos := testVocab()
	for _, tc := range []struct {
		name, src string
		// stage is where it fails: compile, prepare, decode; "" for
		// nowhere.
		stage string
	}{
		{"doubling chain, 10 deep", stackgrammars.Doubling("", 10), ""},
		{"the probe's nullable chain, 14 deep", stackgrammars.Nullable(14), "prepare"},
		{"nullable chain, 20 deep", stackgrammars.Nullable(20), "compile"},
		{"the probe's doubling chain, 20 deep", stackgrammars.Doubling("", 20), "compile"},
		{"doubling chain, 20 deep, after a prefix", stackgrammars.Doubling("bb", 20), "decode"},
		{"doubling chain, 30 deep, after a prefix", stackgrammars.Doubling("bbbbbbbbbbbbbbbb", 30), "decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stage string
			var err error
			var g *Grammar
			runBounded(t, "compile", func() { g, err = CompileGBNF(context.Background(), tc.src) })
			switch {
			case err != nil:
				stage = "compile"
			default:
				checkWork(t, g, "compile")
				runBounded(t, "prepare", func() { err = g.Prepare(v) })
				checkWork(t, g, "prepare")
				if err != nil {
					stage = "prepare"
					break
				}
				m := g.NewMatcher(v, []int32{eos})
				var toks []int32
				for i := 0; i < 64 && !m.Done(); i++ {
					var mask []uint64
					runBounded(t, "mask", func() { mask = m.Mask(64 - i) })
					checkWork(t, g, fmt.Sprintf("mask %d", i))
					if err = m.Err(); err != nil {
						stage = "decode"
						if tok := pick(mask, rand.New(rand.NewPCG(1, 1))); tok >= 0 {
							t.Errorf("a failed matcher allows token %d", tok)
						}
						if m.Advance('a') || m.Advance(eos) || m.Err() != err {
							t.Error("a failed matcher advanced or forgot why it failed")
						}
						break
					}
					tok := pick(mask, rand.New(rand.NewPCG(1, 1)))
					if tok < 0 || !m.Advance(tok) {
						t.Fatalf("mask %d: no token allowed, or the allowed %d refused", i, tok)
					}
					toks = append(toks, tok)
				}
				if stage == "decode" {
					// Where it is within the bounds the grammar still
					// works; where it is not, it fails at once.
					again := g.NewMatcher(v, []int32{eos})
					if pick(again.Mask(64), rand.New(rand.NewPCG(1, 1))) < 0 {
						t.Error("a new matcher allows nothing at the start")
					}
					for _, tok := range toks {
						again.Mask(64)
						again.Advance(tok)
					}
					again.Mask(64)
					if g.w.items != 0 || !errors.Is(again.Err(), ErrTooComplex) {
						t.Errorf("a second matcher at the failed position: %v after %d closure items; want the failure at once", again.Err(), g.w.items)
					}
				}
			}
			// A GBNF compile's error wraps the compile's (GBNFError.Err).
			tooComplex := errors.Is(err, ErrTooComplex)
			if stage != tc.stage || (stage != "") != tooComplex {
				t.Fatalf("failed at %q with %v; want a failure at %q for ErrTooComplex", stage, err, tc.stage)
			}
		})
	}
}

// TestTransitionBound: a grammar whose start has a thousand stacks, each
// returning into free text of its own inside a token, would walk a
// 151,936-token vocabulary's trie thousands of times for one mask; the
// walk stops at the transition bound, and Prepare refuses the grammar,
// where 300 such stacks stay within it.
func TestTransitionBound(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 151,936-token vocabulary")
	}
	v, _ := syntheticVocab(benchVocabSize)
	for _, tc := range []struct {
		n       int
		refused bool
	}{{300, false}, {1000, true}} {
		g, err := CompileGBNF(context.Background(), stackgrammars.FanOut(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		runBounded(t, "prepare", func() { err = g.Prepare(v) })
		checkWork(t, g, "prepare")
		if refused := errors.Is(err, ErrTooComplex); refused != tc.refused || refused && !errors.Is(err, errCallSteps) {
			t.Errorf("fan-out %d: %v after %d transitions (bound %d); want refused %v, at the transition bound", tc.n, err, g.w.steps(), g.w.maxSteps, tc.refused)
		}
	}
}

// TestWorkOfRealisticGrammars: decoding noise over a 151,936-token
// vocabulary, realistic grammars (JSON schemas, recursive ones, json.gbnf,
// tool calls, a choice among 5,000 strings) stay well inside the bounds
// of a call: at most a quarter of maxCallItems and of the transitions.
// The largest numbers are logged (-v).
func TestWorkOfRealisticGrammars(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 151,936-token vocabulary")
	}
	v, eos := syntheticVocab(benchVocabSize)
	choices := make([]string, 5000)
	for i := range choices {
		choices[i] = fmt.Sprintf("option-%d-%x", i, i*7919)
	}
	tools := []ToolSpec{{Name: "person", Parameters: []byte(personSchema)}, {Name: "tree", Parameters: []byte(treeSchema)}, {Name: "any"}}
	hermes := ToolCallFormat{Prefix: "<tool_call>\n", Suffix: "\n</tool_call>", Separator: "\n", ArgsKey: "arguments"}
	for _, tc := range []struct {
		name    string
		compile func() (*Grammar, error)
	}{
		{"person schema", func() (*Grammar, error) { return JSONSchema([]byte(personSchema)) }},
		{"recursive tree schema", func() (*Grammar, error) { return JSONSchema([]byte(treeSchema)) }},
		{"json.gbnf", func() (*Grammar, error) { return CompileGBNF(context.Background(), jsonGBNF) }},
		{"nested lists", func() (*Grammar, error) { return CompileGBNF(context.Background(), deepGBNF) }},
		{"json_object", func() (*Grammar, error) { return AnyJSONObject(), nil }},
		{"parallel tool calls", func() (*Grammar, error) { return ToolCalls(hermes, tools, true) }},
		{"choice of 5000", func() (*Grammar, error) { return CompileChoice(context.Background(), choices) }},
	} {
		g, err := tc.compile()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := g.Prepare(v); err != nil {
			t.Fatalf("%s: prepare: %v", tc.name, err)
		}
		maxItems, maxSteps := g.w.items, g.w.steps()
		note := func() {
			maxItems, maxSteps = max(maxItems, g.w.items), max(maxSteps, g.w.steps())
		}
		rng := rand.New(rand.NewPCG(3, 3))
		const maxTokens = 300
		for range 4 {
			m := g.NewMatcher(v, []int32{eos})
			for i := 0; i < maxTokens && !m.Done(); i++ {
				mask := m.Mask(maxTokens - i)
				note()
				if err := m.Err(); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				tok := pick(mask, rng)
				if tok == eos {
					break
				}
				if !m.Advance(tok) {
					t.Fatalf("%s: allowed token %d refused", tc.name, tok)
				}
				note()
			}
		}
		t.Logf("%s: at most %d closure items and %d transitions (%.1f tries) a call", tc.name, maxItems, maxSteps, float64(maxSteps)/float64(len(v.b)))
		if maxItems > maxCallItems/4 || maxSteps > maxCallStepsPerNode*len(v.b)/4 {
			t.Errorf("%s: %d closure items, %d transitions a call: not well inside the bounds (%d, %d)",
				tc.name, maxItems, maxSteps, maxCallItems, maxCallStepsPerNode*len(v.b))
		}
	}
}

// TestMemoryBytesDoesNotWaitForACall: a cache evicting grammars reads
// their sizes while holding its own lock, so reading one must not wait
// for a call (a mask on the engine's goroutine) holding the grammar.
func TestMemoryBytesDoesNotWaitForACall(t *testing.T) {
	g, err := JSONSchema([]byte(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := testVocab()
	if err := g.Prepare(v); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock() // a call in progress
	defer g.mu.Unlock()
	var n int64
	runBounded(t, "MemoryBytes", func() { n = g.MemoryBytes() })
	if n < int64(len(g.p.nfa))*16 || n < int64(g.masks)*int64(v.words)*8 {
		t.Errorf("MemoryBytes %d: less than the automaton and the masks it holds", n)
	}
}

// BenchmarkMaskAtBound is the worst decoding step the bounds allow: a
// Mask that passes one of them, on a grammar compiled afresh, at a
// 151,936-token vocabulary. The grammars are the slowest to reach the
// items bound of the stack-multiplying shapes tried (nullable and
// doubling chains, 4 to 16 deep), and a fan-out that reaches the
// transition bound.
func BenchmarkMaskAtBound(b *testing.B) {
	v, eos := syntheticVocab(benchVocabSize)
	for _, bc := range []struct{ name, src string }{
		{"items: nullable chain 14 deep", stackgrammars.Nullable(14)},
		{"items: doubling chain 16 deep after 26 bytes", stackgrammars.Doubling("bbbbbbbbbbbbbbbbbbbbbbbbbb", 16)},
		{"transitions: fan-out 1000", stackgrammars.FanOut(1000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				g, err := CompileGBNF(context.Background(), bc.src)
				if err != nil {
					b.Fatal(err)
				}
				m := g.NewMatcher(v, []int32{eos})
				for {
					b.StartTimer()
					mask := m.Mask(64)
					b.StopTimer()
					if m.Err() != nil {
						break
					}
					// The prefix's bytes, one a token, until the mask
					// meets the stacks.
					if tok := pick(mask, rand.New(rand.NewPCG(1, 1))); tok < 0 || !m.Advance(tok) {
						b.Fatal("the grammar ended before its bound")
					}
				}
				if !errors.Is(m.Err(), errCallItems) && !errors.Is(m.Err(), errCallSteps) {
					b.Fatalf("failed with %v: at no bound", m.Err())
				}
			}
		})
	}
}
