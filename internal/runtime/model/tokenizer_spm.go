package model

import (
	"fmt"
	"slices"
	"strings"
)

// SPMTokenizer is SentencePiece-style BPE as llama uses it
// (tokenizer.ggml.model "llama"): spaces become '▁', a '▁' is prefixed to
// each run of text (at the start and after every special token), adjacent
// pieces merge highest score first while the merged piece is in the
// vocabulary, and pieces left unknown become their UTF-8 bytes
// (<0xNN> tokens) or the unknown token.
type SPMTokenizer struct {
	vocab
	scores         []float32
	unk            int32
	addSpacePrefix bool
	byteTokens     [256]int32
}

var _ Tokenizer = (*SPMTokenizer)(nil)

const spmSpace = "\u2581"

// NewSPMTokenizer builds a SentencePiece tokenizer. types may be nil (all
// normal; byte tokens are then recognized by their <0xNN> form); bos and unk
// are -1 when absent.
func NewSPMTokenizer(tokens []string, scores []float32, types []int32, bos, unk int32, addBOS, addSpacePrefix bool) (*SPMTokenizer, error) {
	if len(scores) != len(tokens) {
		return nil, fmt.Errorf("%d scores for %d tokens", len(scores), len(tokens))
	}
	if types == nil {
		types = make([]int32, len(tokens))
		for i, tok := range tokens {
			types[i] = tokenNormal
			if _, ok := parseByteToken(tok); ok {
				types[i] = tokenByte
			}
		}
	}
	v, err := newVocab(tokens, types, bos, addBOS)
	if err != nil {
		return nil, err
	}
	if unk >= int32(len(tokens)) {
		return nil, fmt.Errorf("unknown token %d outside the vocabulary of %d", unk, len(tokens))
	}
	t := &SPMTokenizer{vocab: v, scores: scores, unk: unk, addSpacePrefix: addSpacePrefix}
	for i := range t.byteTokens {
		t.byteTokens[i] = -1
	}
	t.pieces = make([][]byte, len(tokens))
	for i, tok := range tokens {
		switch types[i] {
		case tokenControl, tokenUnused:
		case tokenByte:
			if b, ok := parseByteToken(tok); ok {
				t.pieces[i] = []byte{b}
				if t.byteTokens[b] < 0 {
					t.byteTokens[b] = int32(i)
				}
			}
		case tokenUserDefined:
			t.pieces[i] = []byte(tok)
		default:
			t.pieces[i] = []byte(strings.ReplaceAll(tok, spmSpace, " "))
		}
	}
	return t, nil
}

func parseByteToken(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range tok[3:5] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = byte(c - '0')
		case c >= 'A' && c <= 'F':
			d = byte(c-'A') + 10
		case c >= 'a' && c <= 'f':
			d = byte(c-'a') + 10
		default:
			return 0, false
		}
		b = b<<4 | d
	}
	return b, true
}

// Encode implements Tokenizer.
func (t *SPMTokenizer) Encode(text string, addBOS bool) []int32 {
	return t.encode(text, addBOS, true)
}

// encode is Encode that, with control false, leaves control tokens written
// out in text as text.
func (t *SPMTokenizer) encode(text string, addBOS, control bool) []int32 {
	m := getMerger()
	defer m.release()
	return t.encodeWith(text, addBOS, control, func(out *idList, s string) {
		// Every run of text gets the prefix, the one after a special token
		// (<s>[INST] …, Hello</s> world) as much as the first, as
		// llama.cpp and SentencePiece-based reference tokenizers encode it:
		// chat prompts then tokenize as the model saw them in training.
		m.buf = m.buf[:0]
		if t.addSpacePrefix {
			m.buf = append(m.buf, spmSpace...)
		}
		m.buf = appendSPMSpaces(m.buf, s)
		m.merge(m.buf, t)
		m.each(func(piece []byte) {
			if id, ok := t.ids[string(piece)]; ok && t.types[id] != tokenControl {
				out.add(id)
				return
			}
			for _, b := range piece {
				if id := t.byteTokens[b]; id >= 0 {
					out.add(id)
				} else if t.unk >= 0 {
					out.add(t.unk)
				}
			}
		})
	})
}

// appendSPMSpaces appends s with each space written as SentencePiece's '▁'.
func appendSPMSpaces(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s)+(len(spmSpace)-1)*strings.Count(s, " "))
	for {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(append(dst, s[:i]...), spmSpace...)
		s = s[i+1:]
	}
}

// pairCost implements pairCoster: a pair merges when the merged piece is
// a token, the highest score first.
func (t *SPMTokenizer) pairCost(w []byte, start, _, end int) (uint32, bool) {
	id, ok := t.ids[string(w[start:end])]
	if !ok || t.types[id] == tokenControl || t.types[id] == tokenUnused {
		return 0, false
	}
	return scoreCost(t.scores[id]), true
}

// Decode implements Tokenizer, dropping the space Encode prefixed.
func (t *SPMTokenizer) Decode(ids []int32) string {
	s := t.vocab.Decode(ids)
	if t.addSpacePrefix {
		s = strings.TrimPrefix(s, " ")
	}
	return s
}

func (t *SPMTokenizer) ggufMetadata() []ggufKV {
	kvs := []ggufKV{
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", t.tokens},
		{"tokenizer.ggml.scores", t.scores},
		{"tokenizer.ggml.token_type", t.types},
		{"tokenizer.ggml.add_bos_token", t.addBOS},
		{"tokenizer.ggml.add_space_prefix", t.addSpacePrefix},
	}
	if t.unk >= 0 {
		kvs = append(kvs, ggufKV{"tokenizer.ggml.unknown_token_id", uint32(t.unk)})
	}
	return kvs
}
