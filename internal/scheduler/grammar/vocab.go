package grammar

import (
	"bytes"
	"slices"
)

// Vocab is a model's vocabulary as a trie of the tokens' bytes, built once
// per model and shared by every grammar.
type Vocab struct {
	size  int
	words int
	// Trie nodes in depth-first order; node 0 is the root. Children of a
	// node are linked through sibling, in byte order.
	b       []byte
	child   []int32
	sibling []int32
	// Tokens whose bytes end at node i are ids[tokStart[i]:tokStart[i+1]].
	tokStart []int32
	ids      []int32
	tokBytes [][]byte
}

// NewVocab builds the trie of a vocabulary: tokenBytes(id) for id in
// [0, size). Tokens with no bytes (control tokens) are never allowed by a
// grammar, except end-of-sequence and stop ids where the output is
// complete.
func NewVocab(size int, tokenBytes func(int32) []byte) *Vocab {
	v := &Vocab{size: size, words: (size + 63) / 64, tokBytes: make([][]byte, size)}
	order := make([]int32, 0, size)
	for id := range int32(size) {
		tb := tokenBytes(id)
		v.tokBytes[id] = tb
		if len(tb) > 0 {
			order = append(order, id)
		}
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(v.tokBytes[a], v.tokBytes[b]) })

	v.b, v.child, v.sibling = []byte{0}, []int32{-1}, []int32{-1}
	lastChild := []int32{-1}
	tokNode := make([]int32, len(order))
	path := []int32{0} // path[d] is the node at depth d of the previous token
	var prev []byte
	for i, id := range order {
		tb := v.tokBytes[id]
		lcp := 0
		for lcp < len(prev) && lcp < len(tb) && prev[lcp] == tb[lcp] {
			lcp++
		}
		path = path[:lcp+1]
		for d := lcp; d < len(tb); d++ {
			parent := path[d]
			n := int32(len(v.b))
			v.b = append(v.b, tb[d])
			v.child = append(v.child, -1)
			v.sibling = append(v.sibling, -1)
			lastChild = append(lastChild, -1)
			if lc := lastChild[parent]; lc >= 0 {
				v.sibling[lc] = n
			} else {
				v.child[parent] = n
			}
			lastChild[parent] = n
			path = append(path, n)
		}
		tokNode[i] = path[len(tb)]
		prev = tb
	}
	// Group token ids by node (nodes of equal tokens are equal).
	v.tokStart = make([]int32, len(v.b)+1)
	for _, n := range tokNode {
		v.tokStart[n+1]++
	}
	for i := 1; i < len(v.tokStart); i++ {
		v.tokStart[i] += v.tokStart[i-1]
	}
	v.ids = make([]int32, len(order))
	fill := append([]int32(nil), v.tokStart[:len(v.b)]...)
	for i, id := range order {
		n := tokNode[i]
		v.ids[fill[n]] = id
		fill[n]++
	}
	return v
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// TokenBytes returns a token's bytes.
func (v *Vocab) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= v.size {
		return nil
	}
	return v.tokBytes[id]
}

// tokenMask is the set of tokens allowed in a DFA state (not counting
// end-of-sequence), and the largest distance-to-acceptance among the
// states those tokens lead to.
type tokenMask struct {
	bits    []uint64
	maxDist int32
	count   int
}

// maskFor returns the cached mask of state s, computing it on first use.
// The caller holds g.mu. budget < 0 computes the full mask; otherwise only
// tokens after which acceptance is at most budget bytes away are allowed,
// written into dst (not cached).
func (g *Grammar) maskFor(v *Vocab, s int32, budget int32, dst []uint64) *tokenMask {
	if budget < 0 {
		if m := g.states[s].mask; m != nil {
			return m
		}
	}
	m := &tokenMask{}
	if budget >= 0 {
		clear(dst)
		m.bits = dst
	} else {
		m.bits = make([]uint64, v.words)
	}
	g.walk(v, 0, s, budget, m)
	if budget < 0 && g.cached < maxCachedMasks {
		g.states[s].mask = m
		g.cached++
	}
	return m
}

// walk visits the trie below node alongside the DFA from state s.
func (g *Grammar) walk(v *Vocab, node, s int32, budget int32, m *tokenMask) {
	for c := v.child[node]; c >= 0; c = v.sibling[c] {
		n := g.step(s, v.b[c])
		if n < 0 {
			continue
		}
		if lo, hi := v.tokStart[c], v.tokStart[c+1]; lo < hi {
			d := g.states[n].dist
			if budget < 0 || d <= budget {
				for _, id := range v.ids[lo:hi] {
					m.bits[id>>6] |= 1 << (uint(id) & 63)
				}
				m.count += int(hi - lo)
				m.maxDist = max(m.maxDist, d)
			}
		}
		g.walk(v, c, n, budget, m)
	}
}
