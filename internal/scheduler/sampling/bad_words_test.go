package sampling

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustBadWords(words [][]int32) *BadWords {
	b, err := CompileBadWords(context.Background(), words)
	if err != nil {
		panic(err)
	}
	return b
}

// bannedAfter lists the tokens b bans after output, sorted.
func bannedAfter(b *BadWords, output []int32) []int32 {
	var out []int32
	b.each(output, func(id int32) { out = append(out, id) })
	slices.Sort(out)
	return slices.Compact(out)
}

func TestBadWordsBans(t *testing.T) {
	b := mustBadWords([][]int32{{5}, {3, 0}, {2, 4}, {1, 3, 7}, {3, 7}, {5}, {3, 0}, {}})
	tests := []struct {
		output []int32
		want   []int32
	}{
		{nil, []int32{5}},
		{[]int32{1}, []int32{5}},
		{[]int32{3}, []int32{0, 5, 7}},
		{[]int32{9, 3}, []int32{0, 5, 7}},
		{[]int32{1, 3}, []int32{0, 5, 7}},
		{[]int32{2}, []int32{4, 5}},
		{[]int32{3, 2}, []int32{4, 5}},
		{[]int32{3, 1}, []int32{5}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, bannedAfter(b, tc.output)); diff != "" {
			t.Errorf("after %v (-want +got):\n%s", tc.output, diff)
		}
	}
	if got := b.Len(); got != 5 {
		t.Errorf("Len = %d, want 5 distinct words", got)
	}
	if lo, hi, ok := b.IDRange(); !ok || lo != 0 || hi != 7 {
		t.Errorf("IDRange = %d, %d, %v; want 0, 7, true", lo, hi, ok)
	}
	if b, _ := CompileBadWords(context.Background(), [][]int32{{}}); b.Len() != 0 || b != nil {
		t.Errorf("only empty words: %v, want nil", b)
	}
}

// TestBadWordsMatchesDefinition compares the compiled set against the
// definition (a word's last token is banned when the output ends with the
// rest) on random words and outputs.
func TestBadWordsMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		words := make([][]int32, rng.IntN(20))
		for i := range words {
			words[i] = make([]int32, 1+rng.IntN(4))
			for j := range words[i] {
				words[i][j] = rng.Int32N(4)
			}
		}
		output := make([]int32, rng.IntN(6))
		for i := range output {
			output[i] = rng.Int32N(4)
		}
		var want []int32
		for _, w := range words {
			pre := w[:len(w)-1]
			if len(output) >= len(pre) && slices.Equal(output[len(output)-len(pre):], pre) {
				want = append(want, w[len(w)-1])
			}
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if diff := cmp.Diff(want, bannedAfter(mustBadWords(words), output), cmp.Comparer(func(a, b []int32) bool {
			return len(a) == 0 && len(b) == 0 || slices.Equal(a, b)
		})); diff != "" {
			t.Fatalf("words %v, output %v (-want +got):\n%s", words, output, diff)
		}
	}
}

// requestBadWords is n words as the server tokenizes a large request's
// bad_words (300k is the size of a 3.5 MiB body): two spellings per word
// (the last token differs), each listed twice.
func requestBadWords(n int) [][]int32 {
	words := make([][]int32, n)
	for i := range words {
		w := int32(i / 4)
		words[i] = []int32{w % 50_000, w / 50_000, int32(i/2) % 2}
	}
	return words
}

// TestBadWordsCompileLinear: 300k words compile to one entry per distinct
// word, and the trie to one node per distinct suffix of the prefixes:
// memory linear in the words' length. Their time is BenchmarkCompileBadWords's
// (the pairwise de-duplication this replaced took minutes).
func TestBadWordsCompileLinear(t *testing.T) {
	words := requestBadWords(300_000)
	b, err := CompileBadWords(context.Background(), words)
	if err != nil {
		t.Fatal(err)
	}
	// The trie holds the prefixes reversed: the root, one node per last
	// prefix token, one per distinct two-token prefix.
	distinct, lasts, prefixes := map[[3]int32]bool{}, map[int32]bool{}, map[[2]int32]bool{}
	for _, w := range words {
		distinct[[3]int32(w)], lasts[w[1]], prefixes[[2]int32(w)] = true, true, true
	}
	if b.Len() != len(distinct) {
		t.Errorf("%d words compiled, want the %d distinct ones", b.Len(), len(distinct))
	}
	if nodes, want := len(b.start)-1, 1+len(lasts)+len(prefixes); nodes != want {
		t.Errorf("%d trie nodes, want %d: one per distinct suffix of the prefixes", nodes, want)
	}
}

// BenchmarkCompileBadWords: the compile of a large request's bad_words,
// per word.
func BenchmarkCompileBadWords(b *testing.B) {
	for _, n := range []int{30_000, 300_000} {
		words := requestBadWords(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CompileBadWords(context.Background(), words); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/word")
		})
	}
}

func TestBadWordsCompileStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	words := make([][]int32, 3*checkEvery)
	for i := range words {
		words[i] = []int32{int32(i)}
	}
	if _, err := CompileBadWords(ctx, words); !errors.Is(err, context.Canceled) {
		t.Errorf("CompileBadWords with a done context: %v, want context.Canceled", err)
	}
}
