package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// tableCost merges the pairs of a table, by the merged text: a random
// vocabulary of merges for the property test.
type tableCost struct {
	costs map[string]uint32
	calls int
}

func (c *tableCost) pairCost(w []byte, start, _, end int) (uint32, bool) {
	c.calls++
	cost, ok := c.costs[string(w[start:end])]
	return cost, ok
}

// naiveMerge is the definition merger implements, written the slow way:
// while some adjacent pair merges, merge the one of lowest cost, the
// leftmost on ties.
func naiveMerge(word string, c *tableCost) []string {
	var pieces []string
	for len(word) > 0 {
		_, n := utf8.DecodeRuneInString(word)
		pieces = append(pieces, word[:n])
		word = word[n:]
	}
	for {
		best, bestCost := -1, uint32(0)
		for i := 0; i+1 < len(pieces); i++ {
			cost, ok := c.costs[pieces[i]+pieces[i+1]]
			if ok && (best < 0 || cost < bestCost) {
				best, bestCost = i, cost
			}
		}
		if best < 0 {
			return pieces
		}
		pieces = slices.Replace(pieces, best, best+2, pieces[best]+pieces[best+1])
	}
}

func merged(m *merger, word string, c pairCoster) []string {
	var out []string
	m.merge([]byte(word), c)
	m.each(func(p []byte) { out = append(out, string(p)) })
	return out
}

// TestMergerMatchesDefinition: on random words over a small alphabet
// (multi-byte characters and an invalid byte included) and random merge
// tables with many equal costs, the merger's pieces are the naive
// definition's, with one merger reused across all words.
func TestMergerMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "b", "c", "é", "日", "\xff"}
	m := new(merger)
	for trial := range 2000 {
		var w strings.Builder
		for range rng.IntN(60) {
			w.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		word := w.String()
		c := &tableCost{costs: map[string]uint32{}}
		// Merges of substrings of the word, so that chains happen.
		for range rng.IntN(40) {
			if len(word) < 2 {
				break
			}
			i, j := rng.IntN(len(word)), rng.IntN(len(word))
			if i > j {
				i, j = j, i
			}
			c.costs[word[i:j+1]] = uint32(rng.IntN(5))
		}
		want := naiveMerge(word, c)
		if diff := cmp.Diff(want, merged(m, word, c)); diff != "" {
			t.Fatalf("trial %d, word %q, merges %v (-want +got):\n%s", trial, word, c.costs, diff)
		}
	}
}

// TestMergerLinear: merging a 1 MiB word judges at most three pairs per
// character (each character's first pair, then two per merge), whatever
// the merges, and a reused merger allocates nothing.
func TestMergerLinear(t *testing.T) {
	const size = 1 << 20
	word := []byte(strings.Repeat("a", size))
	// Every run of a power of two merges, shortest first: a word of one
	// character merges into 2^20 through 2^20-1 merges.
	c := &tableCost{costs: map[string]uint32{}}
	for n := 2; n <= size; n *= 2 {
		c.costs[string(word[:n])] = uint32(n)
	}
	m := new(merger)
	m.merge(word, c)
	var pieces int
	m.each(func([]byte) { pieces++ })
	if pieces != 1 {
		t.Fatalf("%d pieces, want the word merged into one", pieces)
	}
	if c.calls > 3*size {
		t.Errorf("%d pairs judged for a word of %d characters, want at most %d", c.calls, size, 3*size)
	}
	allocs := testing.AllocsPerRun(3, func() { m.merge(word, c) })
	if allocs != 0 {
		t.Errorf("a reused merger allocated %v times per word, want 0", allocs)
	}
}

func TestScoreCostOrdersScores(t *testing.T) {
	scores := []float32{float32(math.Inf(1)), 1e9, 3.5, 1, 1e-30, 0, -1e-30, -1, -3.5, -1e9, float32(math.Inf(-1))}
	for i := 1; i < len(scores); i++ {
		if a, b := scoreCost(scores[i-1]), scoreCost(scores[i]); a >= b {
			t.Errorf("score %v costs %#x, not less than score %v's %#x", scores[i-1], a, scores[i], b)
		}
	}
	if scoreCost(float32(math.Copysign(0, -1))) != scoreCost(0) {
		t.Error("-0 and +0 cost differently")
	}
	if scoreCost(float32(math.NaN())) != math.MaxUint32 {
		t.Error("NaN does not cost most")
	}
}
