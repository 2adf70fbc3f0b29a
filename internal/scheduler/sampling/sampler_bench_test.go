package sampling

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// flat returns logits with no strong candidates: the worst case for the
// top-p pre-filter.
func flat(vocab int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 2))
	l := make([]float32, vocab)
	for i := range l {
		l[i] = float32(r.NormFloat64())
	}
	return l
}

func BenchmarkSample(b *testing.B) {
	modes := []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"temperature", Params{Temperature: 1}},
		{"top-k 50", Params{Temperature: 0.7, TopK: 50}},
		{"top-p 0.9", Params{Temperature: 1, TopP: 0.9}},
		{"top-k 40 top-p 0.95", Params{Temperature: 0.8, TopK: 40, TopP: 0.95}},
	}
	for _, vocab := range []int{32000, 128256} {
		for _, shape := range []struct {
			name   string
			logits []float32
		}{
			{"peaked", peaked(vocab, 1)},
			{"flat", flat(vocab, 1)},
		} {
			for _, m := range modes {
				b.Run(fmt.Sprintf("vocab=%d/%s/%s", vocab, shape.name, m.name), func(b *testing.B) {
					var s Sampler
					rng := NewRNG(1)
					banned := []int32{2}
					s.Sample(shape.logits, &m.p, &rng, banned)
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						s.Sample(shape.logits, &m.p, &rng, banned)
					}
				})
			}
		}
	}
}

// argmaxOnePass is the plain single pass argmax replaced: the reference for
// TestArgmaxMatchesOnePass and the baseline of BenchmarkArgmax.
func argmaxOnePass(logits []float32) (int32, float32) {
	best, top := int32(-1), negInf
	for i, v := range logits {
		if v > top {
			best, top = int32(i), v
		}
	}
	return best, top
}

// BenchmarkArgmax: the greedy draw over a 151,936-token row (Qwen2's
// vocabulary), the single pass and argmax side by side.
func BenchmarkArgmax(b *testing.B) {
	l := flat(151936, 1)
	for _, f := range []struct {
		name string
		f    func([]float32) (int32, float32)
	}{{"one pass", argmaxOnePass}, {"argmax", argmax}} {
		b.Run(f.name, func(b *testing.B) {
			for range b.N {
				f.f(l)
			}
		})
	}
}
