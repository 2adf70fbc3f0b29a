package model

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// BPETokenizer is GPT-2's byte-level BPE (tokenizer.ggml.model "gpt2"):
// text is split by a pre-tokenizer, each piece's bytes are mapped to
// printable characters, and merges are applied lowest rank first. It is
// also Gemma 4's SentencePiece-style BPE (tokenizer.ggml.model "gemma4"),
// as llama.cpp runs it: spaces become '▁', text is split only into runs of
// newlines and runs of the rest, merges apply to UTF-8 characters, and
// bytes no token covers become <0xNN> tokens.
type BPETokenizer struct {
	vocab
	// merges maps each merge line ("left right") to its rank (high 32
	// bits) and the length of its left token (low 32 bits): one string
	// key per merge loads faster than a pair, and the length tells the
	// line's split from another that reads the same.
	merges map[string]uint64
	// mergeList is kept to write the tokenizer back.
	mergeList []string
	pre       string
	split     pretokenizer
	// ignoreMerges takes a piece that is a token whole (preTokenizer).
	ignoreMerges bool
	// gemma4 is the SentencePiece-style variant; byteTokens are then its
	// <0xNN> tokens (-1 where missing).
	gemma4     bool
	byteTokens [256]int32
}

var _ Tokenizer = (*BPETokenizer)(nil)

// NewBPETokenizer builds a byte-level BPE tokenizer. tokens are in
// byte-level form (GPT-2's byte-to-unicode mapping); merges are "left right"
// pairs in rank order; types may be nil (all normal); bos is -1 when there is
// none; pre names the pre-tokenizer as tokenizer.ggml.pre does, with
// llama.cpp's names ("gpt-2", "llama-bpe", "qwen2", "gpt-4o", …; empty is
// llama.cpp's default): an unknown one is an error that lists the known.
func NewBPETokenizer(tokens []string, types []int32, merges []string, bos int32, addBOS bool, pre string) (*BPETokenizer, error) {
	p, err := lookupPreTokenizer(pre)
	if err != nil {
		return nil, err
	}
	v, err := newVocab(tokens, types, bos, addBOS)
	if err != nil {
		return nil, err
	}
	t := &BPETokenizer{vocab: v, mergeList: merges, pre: pre, split: p.split, ignoreMerges: p.ignoreMerges}
	if err := t.readMerges(); err != nil {
		return nil, err
	}
	t.pieces = make([][]byte, len(tokens))
	for i, tok := range tokens {
		switch t.types[i] {
		case tokenControl, tokenUnused:
		case tokenUserDefined:
			t.pieces[i] = []byte(tok)
		default:
			t.pieces[i] = fromByteLevel(tok)
		}
	}
	return t, nil
}

// newGemma4Tokenizer builds Gemma 4's tokenizer (tokenizer.ggml.model
// "gemma4"): tokens are UTF-8 text with '▁' for spaces and <0xNN> byte
// tokens (type byte); merges as NewBPETokenizer's. llama.cpp always adds
// its BOS token.
func newGemma4Tokenizer(tokens []string, types []int32, merges []string, bos int32) (*BPETokenizer, error) {
	v, err := newVocab(tokens, types, bos, true)
	if err != nil {
		return nil, err
	}
	t := &BPETokenizer{vocab: v, mergeList: merges, pre: "gemma4", gemma4: true}
	if err := t.readMerges(); err != nil {
		return nil, err
	}
	for i := range t.byteTokens {
		t.byteTokens[i] = -1
	}
	t.pieces = make([][]byte, len(tokens))
	for i, tok := range tokens {
		switch t.types[i] {
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

// readMerges indexes mergeList. A merge is split at its first space past
// its first byte, as llama.cpp splits it, so that a left token that is a
// space survives.
func (t *BPETokenizer) readMerges() error {
	t.merges = make(map[string]uint64, len(t.mergeList))
	for rank, m := range t.mergeList {
		sp := -1
		if len(m) > 1 {
			if k := strings.IndexByte(m[1:], ' '); k >= 0 {
				sp = k + 1
			}
		}
		if sp < 0 {
			return fmt.Errorf("merge %d %q is not two tokens separated by a space", rank, m)
		}
		if _, dup := t.merges[m]; !dup {
			t.merges[m] = uint64(rank)<<32 | uint64(sp)
		}
	}
	return nil
}

// Encode implements Tokenizer.
func (t *BPETokenizer) Encode(text string, addBOS bool) []int32 {
	return t.encode(text, addBOS, true)
}

// encode is Encode that, with control false, leaves control tokens written
// out in text as text.
func (t *BPETokenizer) encode(text string, addBOS, control bool) []int32 {
	m := getMerger()
	defer m.release()
	if t.gemma4 {
		return t.encodeWith(text, addBOS, control, func(out *idList, s string) {
			t.encodeGemma4(m, out, s)
		})
	}
	return t.encodeWith(text, addBOS, control, func(out *idList, s string) {
		t.split(s, func(word string) {
			m.buf = toByteLevel(m.buf[:0], word)
			if t.ignoreMerges {
				if id, ok := t.ids[string(m.buf)]; ok {
					out.add(id)
					return
				}
			}
			m.merge(m.buf, t)
			m.each(func(piece []byte) {
				if id, ok := t.ids[string(piece)]; ok {
					out.add(id)
					return
				}
				// Not in the vocabulary (a broken file): fall back to its characters.
				for len(piece) > 0 {
					r, n := utf8.DecodeRune(piece)
					piece = piece[n:]
					if id, ok := t.ids[string(r)]; ok {
						out.add(id)
					}
				}
			})
		})
	})
}

// encodeGemma4 encodes one run of text as llama.cpp encodes Gemma 4's: a
// run of newlines that is a token is that token; anything else merges.
func (t *BPETokenizer) encodeGemma4(m *merger, out *idList, s string) {
	m.buf = appendSPMSpaces(m.buf[:0], s)
	for text := m.buf; len(text) > 0; {
		nl := text[0] == '\n'
		end := 1
		for end < len(text) && (text[end] == '\n') == nl {
			end++
		}
		word := text[:end]
		text = text[end:]
		if nl {
			if id, ok := t.ids[string(word)]; ok {
				out.add(id)
				continue
			}
		}
		m.merge(word, t)
		m.each(func(piece []byte) {
			if id, ok := t.ids[string(piece)]; ok {
				out.add(id)
				return
			}
			for _, b := range piece {
				if id := t.byteTokens[b]; id >= 0 {
					out.add(id)
				}
			}
		})
	}
}

// pairCost implements pairCoster: a pair merges at its merge's rank.
func (t *BPETokenizer) pairCost(w []byte, start, mid, end int) (uint32, bool) {
	var buf [128]byte
	key := append(append(append(buf[:0], w[start:mid]...), ' '), w[mid:end]...)
	v, ok := t.merges[string(key)]
	if !ok || int(uint32(v)) != mid-start {
		return 0, false
	}
	return uint32(v >> 32), true
}

func (t *BPETokenizer) ggufMetadata() []ggufKV {
	scores := make([]float32, len(t.tokens))
	model := "gpt2"
	if t.gemma4 {
		model = "gemma4"
	}
	kvs := []ggufKV{
		{"tokenizer.ggml.model", model},
		{"tokenizer.ggml.tokens", t.tokens},
		{"tokenizer.ggml.token_type", t.types},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.merges", t.mergeList},
		{"tokenizer.ggml.add_bos_token", t.addBOS},
	}
	if t.pre != "" && !t.gemma4 {
		kvs = append(kvs, ggufKV{"tokenizer.ggml.pre", t.pre})
	}
	return kvs
}

// GPT-2 maps each byte to a printable character so that BPE works on text:
// printable Latin-1 bytes map to themselves, the others to U+0100 onwards.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

func toByteLevel(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s))
	for i := 0; i < len(s); i++ {
		r := byteToRune[s[i]]
		if r < 0x80 {
			dst = append(dst, byte(r))
		} else {
			dst = append(dst, string(r)...)
		}
	}
	return dst
}

func fromByteLevel(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := runeToByte[r]; ok {
			out = append(out, b)
		} else {
			out = append(out, string(r)...)
		}
	}
	return out
}

// The byte vocabulary of Random and the built-in models: ids 0-255 are the
// bytes, then BOS and EOS. It is a byte-level BPE with no merges, so it
// round-trips through GGUF as an ordinary "gpt2" tokenizer.
const (
	ByteBOS       int32 = 256
	ByteEOS       int32 = 257
	ByteVocabSize       = 258
)

// NewByteTokenizer returns the byte vocabulary padded with unused control
// tokens to vocabSize entries (at least ByteVocabSize).
func NewByteTokenizer(vocabSize int) *BPETokenizer {
	vocabSize = max(vocabSize, ByteVocabSize)
	tokens := make([]string, vocabSize)
	types := make([]int32, vocabSize)
	for b := range 256 {
		tokens[b] = string(byteToRune[b])
		types[b] = tokenNormal
	}
	tokens[ByteBOS], types[ByteBOS] = "<s>", tokenControl
	tokens[ByteEOS], types[ByteEOS] = "</s>", tokenControl
	for i := ByteVocabSize; i < vocabSize; i++ {
		tokens[i], types[i] = fmt.Sprintf("<|unused_%d|>", i), tokenUnused
	}
	t, err := NewBPETokenizer(tokens, types, nil, ByteBOS, true, "")
	if err != nil {
		panic(err)
	}
	return t
}
