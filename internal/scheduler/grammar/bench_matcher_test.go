package grammar

import (
	"math/rand/v2"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// This file uses only the API the regular automaton before the pushdown
// matcher had, so hack/bench-grammar.sh builds it unchanged against that
// commit too: the two matchers run the same benchmark code.

// BenchmarkMatcherStep is the matcher alone per token, at a 151,936-token
// vocabulary on a non-recursive schema: the mask (cached per automaton
// state after its first visit) and advancing on an allowed token; no
// logits are masked.
func BenchmarkMatcherStep(b *testing.B) {
	g, err := JSONSchema([]byte(personSchema))
	if err != nil {
		b.Fatal(err)
	}
	benchSteps(b, g, false)
}

// benchSteps decodes with g over a synthetic 151,936-token vocabulary,
// one token per iteration, drawing an allowed token (a scan from a random
// place stands in for the sampler); applyMask also masks a logits row as
// the sampler would. A matcher that completes, or reaches 256 tokens,
// starts over.
func benchSteps(b *testing.B, g *Grammar, applyMask bool) {
	v, eos := syntheticVocab(benchVocabSize)
	logits := make([]float32, benchVocabSize)
	rng := rand.New(rand.NewPCG(1, 1))
	m := g.NewMatcher(v, []int32{eos})
	const maxTokens = 256
	step := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		mask := m.Mask(maxTokens - step)
		if applyMask {
			sampling.ApplyMask(logits, mask)
		}
		tok := pick(mask, rng)
		if !m.Advance(tok) {
			b.Fatalf("allowed token %d refused", tok)
		}
		step++
		if m.Done() || step == maxTokens {
			m = g.NewMatcher(v, []int32{eos})
			step = 0
		}
	}
}
