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

// tokenMask is the set of tokens allowed in a state (not counting
// end-of-sequence), and the largest distance-to-acceptance among the
// states those tokens lead to.
type tokenMask struct {
	bits    []uint64
	maxDist int32
	count   int
}

func (m *tokenMask) addTokens(v *Vocab, node int32, dist int32) {
	lo, hi := v.tokStart[node], v.tokStart[node+1]
	if lo == hi {
		return
	}
	for _, id := range v.ids[lo:hi] {
		m.bits[id>>6] |= 1 << (uint(id) & 63)
	}
	m.count += int(hi - lo)
	m.maxDist = max(m.maxDist, dist)
}

// positionMask is what a rule position allows whatever the stack below
// it: the tokens read without returning from its rule (with maxDist
// measured to the rule's end), and the trie nodes at which the rule may
// have ended, below which the stack decides.
type positionMask struct {
	tokenMask
	returns []int32
}

// maskFor returns the cached mask of state d, computing it on first use.
// The caller holds g.mu. budget < 0 computes the full mask; otherwise only
// tokens after which acceptance is at most budget bytes away are allowed,
// written into dst (not cached). It returns nil when the call passes its
// bounds (g.failed).
func (g *Grammar) maskFor(v *Vocab, d *dstate, budget int32, dst []uint64) *tokenMask {
	if budget >= 0 {
		clear(dst)
		m := &tokenMask{bits: dst}
		if g.walk(v, 0, d, budget, m); g.failed() {
			return nil
		}
		return m
	}
	if d.mask != nil {
		return d.mask
	}
	if d.tooComplex != nil {
		g.fail(d.tooComplex)
		return nil
	}
	m := g.fullMask(v, d)
	if m == nil {
		if d != deadState { // shared by every grammar: never written
			d.tooComplex = g.w.err
		}
		return nil
	}
	if g.masks < maxCachedMasks {
		d.mask = m
		g.masks++
		g.noteMemory()
	}
	return m
}

// fullMask unites the masks of d's stacks: each top position's own
// tokens, plus, where its rule may end inside a token, the rest of the
// token read from the position returned to. It returns nil when the call
// passes its bounds.
func (g *Grammar) fullMask(v *Vocab, d *dstate) *tokenMask {
	below := func(f *frame) int32 {
		if p := f.parent; p != nil {
			return p.dist
		}
		return 0
	}
	if len(d.frames) == 1 {
		f := d.frames[0]
		if pm := g.positionMask(v, f.state); pm == nil {
			return nil
		} else if len(pm.returns) == 0 {
			return &tokenMask{bits: pm.bits, count: pm.count, maxDist: satAdd(pm.maxDist, below(f))}
		}
	}
	m := &tokenMask{bits: make([]uint64, v.words)}
	for _, f := range d.frames {
		pm := g.positionMask(v, f.state)
		if pm == nil {
			return nil
		}
		if pm.count > 0 {
			for i, w := range pm.bits {
				m.bits[i] |= w
			}
			m.count += pm.count
			m.maxDist = max(m.maxDist, satAdd(pm.maxDist, below(f)))
		}
		if len(pm.returns) == 0 {
			continue
		}
		r := g.resumeAt(f.parent)
		if r == nil {
			return nil
		}
		if r == deadState {
			continue
		}
		for _, node := range pm.returns {
			m.addTokens(v, node, r.dist)
			if g.walk(v, node, r, -1, m); g.failed() {
				return nil
			}
		}
	}
	return m
}

// positionMask returns the tokens of NFA state q (cached while the cache
// has room), or nil when the call passes its bounds.
func (g *Grammar) positionMask(v *Vocab, q int32) *positionMask {
	if pm := g.positions[q]; pm != nil {
		return pm
	}
	pm := &positionMask{tokenMask: tokenMask{bits: make([]uint64, v.words)}}
	d := g.closure([]item{{q, g.bottom}})
	if d == nil {
		return nil
	}
	if g.walkPosition(v, 0, d, pm); g.failed() {
		return nil
	}
	if len(g.positions) < maxCachedPositions {
		g.positions[q] = pm
		g.noteMemory()
	}
	return pm
}

// walkPosition visits the trie below node alongside d, a state of the
// stacks above the unknown bottom. It stops when the call passes its
// bounds.
func (g *Grammar) walkPosition(v *Vocab, node int32, d *dstate, pm *positionMask) {
	for c := v.child[node]; c >= 0; c = v.sibling[c] {
		n := g.step(d, v.b[c])
		if n == nil {
			if g.failed() {
				return
			}
			continue
		}
		if n.returns {
			pm.returns = append(pm.returns, c)
		}
		if len(n.frames) > 0 {
			pm.addTokens(v, c, n.liveDist)
			g.walkPosition(v, c, n, pm)
		}
	}
}

// walk visits the trie below node alongside the automaton from state d.
// It stops when the call passes its bounds.
func (g *Grammar) walk(v *Vocab, node int32, d *dstate, budget int32, m *tokenMask) {
	for c := v.child[node]; c >= 0; c = v.sibling[c] {
		n := g.step(d, v.b[c])
		if n == nil {
			if g.failed() {
				return
			}
			continue
		}
		if budget < 0 || n.dist <= budget {
			m.addTokens(v, c, n.dist)
		}
		g.walk(v, c, n, budget, m)
	}
}
