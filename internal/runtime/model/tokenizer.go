package model

import (
	"container/heap"
	"fmt"
	"sort"
	"strings"
)

// Tokenizer turns text into token ids and back.
type Tokenizer interface {
	// Encode tokenizes text. Control and user-defined tokens written out in
	// text (as chat templates do) become those tokens. With addBOS, the
	// model's BOS token is prepended when its tokenizer metadata asks for one
	// (tokenizer.ggml.add_bos_token, true unless set).
	Encode(text string, addBOS bool) []int32
	// TokenBytes is the raw bytes of one token: SentencePiece '▁' becomes a
	// space, byte tokens <0xNN> that byte; control tokens are empty. The
	// engine streams text by concatenating them (a multi-byte UTF-8
	// character may span tokens).
	TokenBytes(id int32) []byte
	// Decode concatenates the tokens' bytes (SentencePiece drops the space
	// it prefixed to the text).
	Decode(ids []int32) string
	// VocabSize is the number of token ids.
	VocabSize() int
}

// GGUF token types (tokenizer.ggml.token_type).
const (
	tokenNormal      int32 = 1
	tokenUnknown     int32 = 2
	tokenControl     int32 = 3
	tokenUserDefined int32 = 4
	tokenUnused      int32 = 5
	tokenByte        int32 = 6
)

// vocab is what both tokenizer kinds share.
type vocab struct {
	tokens []string
	types  []int32
	ids    map[string]int32
	// specials are matched in text before tokenizing: control and
	// user-defined tokens, by first byte, longest first.
	specials map[byte][]int32
	bos      int32
	addBOS   bool
	// pieces caches TokenBytes.
	pieces [][]byte
	// controlText holds the text of each control token (nil for others):
	// SpecialText.
	controlText map[int32][]byte
}

func newVocab(tokens []string, types []int32, bos int32, addBOS bool) (vocab, error) {
	if len(tokens) == 0 {
		return vocab{}, fmt.Errorf("empty vocabulary")
	}
	if types == nil {
		types = make([]int32, len(tokens))
		for i := range types {
			types[i] = tokenNormal
		}
	}
	if len(types) != len(tokens) {
		return vocab{}, fmt.Errorf("%d token types for %d tokens", len(types), len(tokens))
	}
	v := vocab{tokens: tokens, types: types, ids: make(map[string]int32, len(tokens)), specials: map[byte][]int32{}, bos: bos, addBOS: addBOS}
	for i, t := range tokens {
		if _, dup := v.ids[t]; !dup {
			v.ids[t] = int32(i)
		}
		if types[i] == tokenControl && t != "" {
			if v.controlText == nil {
				v.controlText = map[int32][]byte{}
			}
			v.controlText[int32(i)] = []byte(t)
		}
		if (types[i] == tokenControl || types[i] == tokenUserDefined) && t != "" {
			v.specials[t[0]] = append(v.specials[t[0]], int32(i))
		}
	}
	for _, ids := range v.specials {
		sort.SliceStable(ids, func(a, b int) bool { return len(tokens[ids[a]]) > len(tokens[ids[b]]) })
	}
	if bos >= int32(len(tokens)) {
		return vocab{}, fmt.Errorf("bos token %d outside the vocabulary of %d", bos, len(tokens))
	}
	return v, nil
}

func (v *vocab) VocabSize() int { return len(v.tokens) }

// split calls text for each run of ordinary text and special for each
// special token written out in s. Every run of text starts s or follows a
// special token.
//
// With control false, control tokens written out stay text (user-defined
// ones are still matched): llama.cpp's parse_special=false, which its vocab
// tests use.
func (v *vocab) split(s string, control bool, text func(string), special func(int32)) {
	start := 0
	for i := 0; i < len(s); i++ {
		for _, id := range v.specials[s[i]] {
			if !control && v.types[id] == tokenControl {
				continue
			}
			if tok := v.tokens[id]; strings.HasPrefix(s[i:], tok) {
				if i > start {
					text(s[start:i])
				}
				special(id)
				i += len(tok) - 1
				start = i + 1
				break
			}
		}
	}
	if start < len(s) {
		text(s[start:])
	}
}

func (v *vocab) encodeWith(s string, addBOS, control bool, text func(out []int32, s string) []int32) []int32 {
	var out []int32
	if addBOS && v.addBOS && v.bos >= 0 {
		out = append(out, v.bos)
	}
	v.split(s, control, func(t string) { out = text(out, t) }, func(id int32) { out = append(out, id) })
	return out
}

func (v *vocab) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(v.pieces) {
		return nil
	}
	return v.pieces[id]
}

// SpecialText is a control token's text, nil for any other token: the
// output of requests that keep special tokens (skip_special_tokens: false),
// which TokenBytes leaves out.
func (v *vocab) SpecialText(id int32) []byte { return v.controlText[id] }

func (v *vocab) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.Write(v.TokenBytes(id))
	}
	return b.String()
}

// mergeSymbol is a piece of a word during merging: word[start:end].
type mergeSymbol struct {
	start, end, prev, next int
}

type mergeCandidate struct {
	left, right int
	// cost orders merges: lowest first, then leftmost.
	cost float64
	// size is the merged length, to detect stale candidates.
	size int
}

type mergeQueue []mergeCandidate

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].cost != q[j].cost {
		return q[i].cost < q[j].cost
	}
	return q[i].left < q[j].left
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(mergeCandidate)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// mergeWord splits word into UTF-8 characters and repeatedly merges the
// adjacent pair of lowest cost (leftmost on ties) until cost reports no
// mergeable pair; cost judges the pair word[start:mid], word[mid:end]. It
// calls emit with each final piece, in order.
func mergeWord(word string, cost func(word string, start, mid, end int) (float64, bool), emit func(piece string)) {
	syms := make([]mergeSymbol, 0, len(word))
	for i := range word {
		if n := len(syms); n > 0 {
			syms[n-1].end = i
		}
		syms = append(syms, mergeSymbol{start: i, prev: len(syms) - 1, next: len(syms) + 1})
	}
	if len(syms) == 0 {
		return
	}
	syms[len(syms)-1].end = len(word)
	syms[len(syms)-1].next = -1
	q := mergeQueue{}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		a, b := syms[l], syms[r]
		if c, ok := cost(word, a.start, b.start, b.end); ok {
			heap.Push(&q, mergeCandidate{left: l, right: r, cost: c, size: b.end - a.start})
		}
	}
	for i := 0; i+1 < len(syms); i++ {
		try(i, i+1)
	}
	for q.Len() > 0 {
		c := heap.Pop(&q).(mergeCandidate)
		l, r := &syms[c.left], &syms[c.right]
		if l.end == l.start || r.end == r.start || l.next != c.right || r.end-l.start != c.size {
			continue
		}
		l.end, l.next = r.end, r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.start = r.end
		try(l.prev, c.left)
		try(c.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		emit(word[syms[i].start:syms[i].end])
	}
}
