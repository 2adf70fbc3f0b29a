package model

import (
	"fmt"
	"math"
	"sync"
	"unicode/utf8"
)

// pairCoster judges two adjacent pieces of a word, word[start:mid] and
// word[mid:end]: whether they merge, and at what cost (lower merges first).
type pairCoster interface {
	pairCost(word []byte, start, mid, end int) (cost uint32, ok bool)
}

// merger is BPE's merge loop, shared by the tokenizers: it splits a word
// into UTF-8 characters and repeatedly merges the adjacent pair of lowest
// cost, the leftmost on ties, until no pair merges.
//
// A long prompt can be one word (a SentencePiece vocabulary merges a whole
// run of text; a run of letters is one pre-token), so its memory is linear
// in the word's length with small constants: 12 bytes per byte of the
// word for the links and the heap's index and 8 per character for the
// heap, none of it when no two characters merge, and nothing allocated per
// merge. Each piece has at most one pair in the heap (the one it starts),
// updated in place as its neighbours merge, so no stale entry accumulates.
// A merger is reused across the words of a text and, through mergers,
// across texts.
type merger struct {
	word []byte
	// next and prev link the pieces, indexed by the byte offset where a
	// piece starts (meaningful there only): the offset of the next
	// (previous) piece, -1 at the ends. A piece ends where the next begins.
	next, prev []int32
	// pos is where in heap the pair a piece starts is, -1 when that pair
	// does not merge.
	pos []int32
	// heap is a binary min-heap of the pairs that merge, each cost<<32 |
	// the byte offset of its left piece: one comparison orders by cost,
	// then leftmost first.
	heap []uint64
	// chars is set when no two characters merge: the pieces are the word's
	// characters, and no links were built.
	chars bool
	// buf is the tokenizers' scratch for the text they merge (a word in
	// byte-level form, SentencePiece's text with '▁' for spaces).
	buf []byte
}

// mergers keeps mergers between texts; one that grew for a word longer
// than maxPooledWord gives its arrays back to the collector instead.
var mergers = sync.Pool{New: func() any { return new(merger) }}

const maxPooledWord = 1 << 16

func getMerger() *merger { return mergers.Get().(*merger) }

func (m *merger) release() {
	if cap(m.next) > maxPooledWord || cap(m.heap) > maxPooledWord || cap(m.buf) > maxPooledWord {
		*m = merger{}
	}
	m.word = nil
	mergers.Put(m)
}

// merge merges word's characters by c's costs; each then yields the
// pieces. word must not change until the pieces are read.
func (m *merger) merge(word []byte, c pairCoster) {
	if len(word) > math.MaxInt32 {
		// Bodies are limited far below this (--max-body-bytes).
		panic(fmt.Sprintf("model: a word of %d bytes is too long to merge", len(word)))
	}
	m.word, m.heap, m.chars = word, m.heap[:0], true
	left := -1
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRune(word[i:])
		if left >= 0 {
			if cost, ok := c.pairCost(word, left, i, i+n); ok {
				if m.chars {
					// The first pair that merges: room for every pair at
					// once, as appending would allocate several times that.
					m.chars = false
					if n := utf8.RuneCount(word); cap(m.heap) < n {
						m.heap = make([]uint64, 0, n)
					}
				}
				m.heap = append(m.heap, uint64(cost)<<32|uint64(left))
			}
		}
		left = i
		i += n
	}
	if m.chars {
		return
	}
	m.next = resize(m.next, len(word))
	m.prev = resize(m.prev, len(word))
	m.pos = resize(m.pos, len(word))
	last := int32(-1)
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRune(word[i:])
		m.prev[i], m.pos[i] = last, -1
		if last >= 0 {
			m.next[last] = int32(i)
		}
		last = int32(i)
		i += n
	}
	m.next[last] = -1
	for i, k := range m.heap {
		m.pos[uint32(k)] = int32(i)
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	for len(m.heap) > 0 {
		l := int32(uint32(m.heap[0]))
		r := m.next[l]
		m.remove(l)
		m.remove(r)
		after := m.next[r]
		m.next[l] = after
		if after >= 0 {
			m.prev[after] = l
		}
		if p := m.prev[l]; p >= 0 {
			m.update(p, c)
		}
		m.update(l, c)
	}
}

func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// each calls f with each piece of the word last merged, in order.
func (m *merger) each(f func(piece []byte)) {
	w := m.word
	if m.chars {
		for len(w) > 0 {
			_, n := utf8.DecodeRune(w)
			f(w[:n])
			w = w[n:]
		}
		return
	}
	for s := int32(0); s >= 0; s = m.next[s] {
		f(w[s:m.end(s)])
	}
}

func (m *merger) end(s int32) int {
	if n := m.next[s]; n >= 0 {
		return int(n)
	}
	return len(m.word)
}

// update re-judges the pair piece s starts, after s or its right
// neighbour grew.
func (m *merger) update(s int32, c pairCoster) {
	r := m.next[s]
	if r < 0 {
		m.remove(s)
		return
	}
	cost, ok := c.pairCost(m.word, int(s), int(r), m.end(r))
	if !ok {
		m.remove(s)
		return
	}
	k := uint64(cost)<<32 | uint64(s)
	if i := m.pos[s]; i >= 0 {
		m.heap[i] = k
		m.fix(int(i))
		return
	}
	m.pos[s] = int32(len(m.heap))
	m.heap = append(m.heap, k)
	m.up(len(m.heap) - 1)
}

// remove takes the pair piece s starts out of the heap, if it is there.
func (m *merger) remove(s int32) {
	i := int(m.pos[s])
	if i < 0 {
		return
	}
	m.pos[s] = -1
	last := len(m.heap) - 1
	if i != last {
		m.heap[i] = m.heap[last]
		m.pos[uint32(m.heap[i])] = int32(i)
	}
	m.heap = m.heap[:last]
	if i != last {
		m.fix(i)
	}
}

func (m *merger) fix(i int) {
	if !m.down(i) {
		m.up(i)
	}
}

func (m *merger) swap(i, j int) {
	h := m.heap
	h[i], h[j] = h[j], h[i]
	m.pos[uint32(h[i])] = int32(i)
	m.pos[uint32(h[j])] = int32(j)
}

func (m *merger) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if m.heap[p] <= m.heap[i] {
			return
		}
		m.swap(i, p)
		i = p
	}
}

// down sifts entry i towards the leaves and reports whether it moved.
func (m *merger) down(i int) bool {
	start, n := i, len(m.heap)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && m.heap[c+1] < m.heap[c] {
			c++
		}
		if m.heap[i] <= m.heap[c] {
			break
		}
		m.swap(i, c)
		i = c
	}
	return i > start
}

// scoreCost orders SentencePiece scores as merge costs: the highest score
// costs least. Equal scores, -0 and +0 included, cost the same; NaN costs
// most.
func scoreCost(score float32) uint32 {
	switch {
	case score != score:
		return math.MaxUint32
	case score == 0:
		score = 0
	}
	b := math.Float32bits(-score)
	if b>>31 != 0 {
		return ^b
	}
	return b | 1<<31
}
