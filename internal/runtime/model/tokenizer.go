package model

import (
	"fmt"
	"sort"
	"strings"
	"sync"
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

func (v *vocab) encodeWith(s string, addBOS, control bool, text func(out *idList, s string)) []int32 {
	var out idList
	if addBOS && v.addBOS && v.bos >= 0 {
		out.add(v.bos)
	}
	v.split(s, control, func(t string) { text(&out, t) }, out.add)
	return out.slice()
}

// idList collects a text's token ids in pooled blocks and returns them as
// one slice of exactly their number: a long prompt's ids are allocated
// once, where appending to a slice would allocate about five times their
// size as it regrows, and keep up to a quarter more than they need.
type idList struct {
	blocks []*[idBlock]int32
	n      int
}

const idBlock = 1 << 14

var idBlocks = sync.Pool{New: func() any { return new([idBlock]int32) }}

func (l *idList) add(id int32) {
	i := l.n % idBlock
	if i == 0 {
		l.blocks = append(l.blocks, idBlocks.Get().(*[idBlock]int32))
	}
	l.blocks[len(l.blocks)-1][i] = id
	l.n++
}

// slice returns the ids (nil when none) and gives the blocks back.
func (l *idList) slice() []int32 {
	var out []int32
	if l.n > 0 {
		out = make([]int32, l.n)
	}
	for k, b := range l.blocks {
		copy(out[k*idBlock:], b[:])
		idBlocks.Put(b)
	}
	*l = idList{}
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
