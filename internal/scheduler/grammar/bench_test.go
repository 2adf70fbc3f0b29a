package grammar

import (
	"context"
	mathbits "math/bits"
	"math/rand/v2"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// benchVocabSize is Qwen2.5's vocabulary size.
const benchVocabSize = 151936

// syntheticVocab is a BPE-like vocabulary of size n: the 256 bytes, then
// pieces drawn from words, spaces, digits, punctuation and CJK characters,
// 1 to 12 bytes long; the last id has no bytes (EOS).
func syntheticVocab(n int) (*Vocab, int32) {
	rng := rand.New(rand.NewPCG(7, 7))
	pieces := make([][]byte, n)
	for b := range 256 {
		pieces[b] = []byte{byte(b)}
	}
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	const punct = `{}[]":,. \n0123456789-_`
	for i := 256; i < n-1; i++ {
		var p []byte
		switch rng.IntN(5) {
		case 0, 1: // a word, often with a leading space
			if rng.IntN(2) == 0 {
				p = append(p, ' ')
			}
			for range 1 + rng.IntN(10) {
				p = append(p, letters[rng.IntN(len(letters))])
			}
		case 2: // punctuation and digits
			for range 1 + rng.IntN(4) {
				p = append(p, punct[rng.IntN(len(punct))])
			}
		case 3: // CJK
			for range 1 + rng.IntN(3) {
				p = append(p, encodeRune(rune(0x4e00+rng.IntN(0x5000)))...)
			}
		default: // mixed
			p = append(p, '"')
			for range rng.IntN(8) {
				p = append(p, letters[rng.IntN(len(letters))])
			}
			p = append(p, punct[rng.IntN(len(punct))])
		}
		pieces[i] = p
	}
	eos := int32(n - 1)
	return NewVocab(n, func(id int32) []byte { return pieces[id] }), eos
}

// BenchmarkConstrainedStep is one decoding step of a JSON-schema request
// at a 151,936-token vocabulary: the mask (cached per automaton state
// after the first visit), applying it to the logits, and advancing on the
// token drawn (the draw itself, a scan to an allowed token from a random
// place, stands in for the sampler, whose cost constraints do not
// change). The schema is not recursive: the same benchmark runs on the
// regular automaton this package had before its pushdown matcher
// (hack/bench-grammar.sh compares the two).
func BenchmarkConstrainedStep(b *testing.B) {
	g, err := JSONSchema([]byte(personSchema))
	benchCompiled(b, g, err, true)
}

// BenchmarkConstrainedStepRecursive is BenchmarkConstrainedStep on a
// recursive schema (a tree of nodes), which only the pushdown matcher
// runs: outputs nest, and new stacks keep meeting new automaton states.
func BenchmarkConstrainedStepRecursive(b *testing.B) {
	g, err := JSONSchema([]byte(treeSchema))
	benchCompiled(b, g, err, true)
}

// BenchmarkConstrainedStepGBNF is BenchmarkConstrainedStep on llama.cpp's
// JSON grammar in GBNF.
func BenchmarkConstrainedStepGBNF(b *testing.B) {
	g, err := CompileGBNF(context.Background(), jsonGBNF)
	benchCompiled(b, g, err, true)
}

// BenchmarkMatcherStepRecursive is BenchmarkMatcherStep (the matcher
// alone) on the recursive tree schema.
func BenchmarkMatcherStepRecursive(b *testing.B) {
	g, err := JSONSchema([]byte(treeSchema))
	benchCompiled(b, g, err, false)
}

// BenchmarkMatcherStepGBNF is BenchmarkMatcherStep on llama.cpp's JSON
// grammar in GBNF.
func BenchmarkMatcherStepGBNF(b *testing.B) {
	g, err := CompileGBNF(context.Background(), jsonGBNF)
	benchCompiled(b, g, err, false)
}

// deepGBNF nests lists of strings without bound: decoding noise keeps
// meeting stacks it has not seen, so most steps build new automaton
// states and masks (the pushdown matcher's worst case for its caches).
const deepGBNF = `root ::= "[" (item ("," item)*)? "]"
item ::= root | "\"" [^"\\]* "\""`

// BenchmarkMatcherStepDeep is BenchmarkMatcherStep on deepGBNF.
func BenchmarkMatcherStepDeep(b *testing.B) {
	g, err := CompileGBNF(context.Background(), deepGBNF)
	benchCompiled(b, g, err, false)
}

// benchCompiled is benchSteps on a grammar just compiled.
func benchCompiled(b *testing.B, g *Grammar, err error, applyMask bool) {
	if err != nil {
		b.Fatal(err)
	}
	benchSteps(b, g, applyMask)
}

// BenchmarkApplyMask is the per-step cost of masking alone, for a mask
// allowing one token in eight.
func BenchmarkApplyMask(b *testing.B) {
	logits := make([]float32, benchVocabSize)
	mask := make([]uint64, (benchVocabSize+63)/64)
	for i := range mask {
		mask[i] = 0x0101010101010101
	}
	b.ReportAllocs()
	for range b.N {
		sampling.ApplyMask(logits, mask)
	}
}

// BenchmarkBuildVocab is the one-time cost of the vocabulary trie.
func BenchmarkBuildVocab(b *testing.B) {
	for range b.N {
		syntheticVocab(benchVocabSize)
	}
}

// pick returns an allowed token: the first set bit at or after a random
// word (wrapping around).
func pick(mask []uint64, rng *rand.Rand) int32 {
	start := rng.IntN(len(mask))
	for i := range mask {
		w := (start + i) % len(mask)
		if bits := mask[w]; bits != 0 {
			return int32(w*64 + mathbits.TrailingZeros64(bits))
		}
	}
	return -1
}
