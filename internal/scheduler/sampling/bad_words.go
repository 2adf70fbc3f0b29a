package sampling

import (
	"context"
	"math"
	"slices"
)

// BadWords is a compiled set of token sequences never generated (vLLM's
// bad_words): a sequence's last token is banned whenever the output ends
// with the tokens before it. It is built once per request, in time and
// memory linear in the words' total length, with repeated words folded
// into one, and is read-only afterwards, so every sequence of a request
// shares it.
//
// The prefixes (all tokens of a word but its last) are stored reversed in
// a trie: the output is walked backward from its last token, and each node
// reached names the tokens banned after that suffix. A step costs the
// length of the longest prefix, whatever the number of words.
type BadWords struct {
	// edges maps (node, token) to the child node that extends the suffix
	// node stands for by one token further back in the output.
	edges map[uint64]int32
	// bans of node i are banned[start[i]:start[i+1]], sorted. Node 0 is
	// the empty suffix: the one-token words.
	start  []int32
	banned []int32
	// minID and maxID bound every token id named, for range checks.
	minID, maxID int32
	words        int
}

// checkEvery is how many words are compiled between checks of the context.
const checkEvery = 4096

// CompileBadWords compiles words (each a non-empty token sequence; empty
// ones are skipped). It stops with ctx's error when ctx ends first, so a
// client that leaves stops the work its request started.
func CompileBadWords(ctx context.Context, words [][]int32) (*BadWords, error) {
	type ban struct {
		node int32
		id   int32
	}
	edges := make(map[uint64]int32, len(words)/2)
	bans := make([]ban, 0, len(words))
	nodes := int32(1)
	b := &BadWords{minID: math.MaxInt32, maxID: math.MinInt32}
	for i, w := range words {
		if i%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if len(w) == 0 {
			continue
		}
		node := int32(0)
		for j := len(w) - 2; j >= 0; j-- {
			k := edgeKey(node, w[j])
			next, ok := edges[k]
			if !ok {
				next = nodes
				nodes++
				edges[k] = next
			}
			node = next
		}
		for _, id := range w {
			b.minID, b.maxID = min(b.minID, id), max(b.maxID, id)
		}
		bans = append(bans, ban{node, w[len(w)-1]})
	}
	if len(bans) == 0 {
		return nil, nil
	}
	// Counting sort of the bans by node, so each node's are contiguous;
	// then each node's sorted and repeats dropped.
	start := make([]int32, nodes+1)
	for _, x := range bans {
		start[x.node+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	banned := make([]int32, len(bans))
	fill := slices.Clone(start[:nodes])
	for _, x := range bans {
		banned[fill[x.node]] = x.id
		fill[x.node]++
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.start, b.banned = make([]int32, nodes+1), banned[:0]
	for n := range nodes {
		ids := banned[start[n]:start[n+1]]
		slices.Sort(ids)
		b.banned = append(b.banned, slices.Compact(ids)...)
		b.start[n+1] = int32(len(b.banned))
	}
	b.edges, b.words = edges, len(b.banned)
	return b, nil
}

func edgeKey(node, tok int32) uint64 { return uint64(uint32(node))<<32 | uint64(uint32(tok)) }

// Len is the number of distinct words (nil: 0).
func (b *BadWords) Len() int {
	if b == nil {
		return 0
	}
	return b.words
}

// IDRange returns the smallest and largest token id of any word; ok is
// false for an empty set.
func (b *BadWords) IDRange() (lo, hi int32, ok bool) {
	if b.Len() == 0 {
		return 0, 0, false
	}
	return b.minID, b.maxID, true
}

// each calls ban with every token banned after output.
func (b *BadWords) each(output []int32, ban func(id int32)) {
	if b.Len() == 0 {
		return
	}
	node := int32(0)
	for i := len(output); ; i-- {
		for _, id := range b.banned[b.start[node]:b.start[node+1]] {
			ban(id)
		}
		if i == 0 {
			return
		}
		next, ok := b.edges[edgeKey(node, output[i-1])]
		if !ok {
			return
		}
		node = next
	}
}
