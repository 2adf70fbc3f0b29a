package grammar

import (
	"math/rand/v2"
	"testing"
)

// Like bench_matcher_test.go, this file uses only API that predates the
// work bounds (work_bound.go), so the same code measures the matcher
// before and after them.

// BenchmarkMaskColdSchema is one output decoded on a grammar compiled
// afresh (its automaton states and masks not yet built) at a
// 151,936-token vocabulary: the masks a request pays for when it is the
// first to use its schema, the case the work bounds count most in. One
// op is one output of up to 64 tokens; ns/mask is per Mask call.
func BenchmarkMaskColdSchema(b *testing.B) {
	benchCold(b, personSchema)
}

// BenchmarkMaskColdRecursive is BenchmarkMaskColdSchema on the recursive
// tree schema.
func BenchmarkMaskColdRecursive(b *testing.B) {
	benchCold(b, treeSchema)
}

func benchCold(b *testing.B, schema string) {
	v, eos := syntheticVocab(benchVocabSize)
	rng := rand.New(rand.NewPCG(1, 1))
	const maxTokens = 64
	masks := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		g, err := JSONSchema([]byte(schema))
		if err != nil {
			b.Fatal(err)
		}
		m := g.NewMatcher(v, []int32{eos})
		b.StartTimer()
		for i := range maxTokens {
			mask := m.Mask(maxTokens - i)
			masks++
			tok := pick(mask, rng)
			if tok == eos || !m.Advance(tok) || m.Done() {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(masks), "ns/mask")
}
