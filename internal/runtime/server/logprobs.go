package server

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// clampLogprob keeps a logprob JSON-encodable: -Inf (a token the model
// gave no chance) becomes -9999, as vLLM writes it.
func clampLogprob(v float32) float64 {
	if !(v > -9999) {
		return -9999
	}
	return float64(v)
}

// tokenText is a token as logprob entries and /tokenize's token_strs name
// it, with its bytes. A token whose bytes are whole UTF-8 characters is its
// text. Any other (a byte-fallback token, a piece of a character) is
// "bytes:" and its bytes, each one not part of a whole character written
// \xNN and a backslash \\: JSON would turn every such byte into U+FFFD, so
// the alternatives of a completions top_logprobs object, keyed by token,
// would collide. With asID the token is "token_id:<id>"
// (return_tokens_as_token_ids).
func (s *Server) tokenText(id int32, asID bool) (string, []byte) {
	b := s.eng.Config().Decoder.TokenBytes(id)
	if asID {
		return "token_id:" + strconv.Itoa(int(id)), b
	}
	if utf8.Valid(b) {
		return string(b), b
	}
	out := make([]byte, 0, len("bytes:")+4*len(b))
	out = append(out, "bytes:"...)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = fmt.Appendf(out, `\x%02x`, b[i])
		case r == '\\':
			out = append(out, `\\`...)
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return string(out), b
}

// byteInts is a token's bytes as chat logprobs list them.
func byteInts(b []byte) []int {
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return ints
}

// chatLogprobs renders logprob entries (1+top per token) in the chat format.
func (s *Server) chatLogprobs(lps []sampling.TokenLogprob, lp openai.Logprob) []openai.ChatTokenLogprob {
	stride := 1 + lp.Top
	out := make([]openai.ChatTokenLogprob, 0, len(lps)/stride)
	for i := 0; i+stride <= len(lps); i += stride {
		tok, b := s.tokenText(lps[i].ID, lp.TokenIDs)
		e := openai.ChatTokenLogprob{Token: tok, Logprob: clampLogprob(lps[i].Logprob), Bytes: byteInts(b),
			TopLogprobs: make([]openai.ChatTopLogprob, 0, lp.Top)}
		for _, x := range lps[i+1 : i+stride] {
			t, tb := s.tokenText(x.ID, lp.TokenIDs)
			e.TopLogprobs = append(e.TopLogprobs, openai.ChatTopLogprob{Token: t, Logprob: clampLogprob(x.Logprob), Bytes: byteInts(tb)})
		}
		out = append(out, e)
	}
	return out
}

// completionLogprobs renders logprob entries in the legacy completions
// format. off counts the choice's text so far (text_offset), and is
// advanced past these tokens. top_logprobs is an object keyed by token:
// two alternatives with the same text (control tokens without one) are
// told apart by naming the later "token_id:<id>".
func (s *Server) completionLogprobs(lps []sampling.TokenLogprob, lp openai.Logprob, off *textOffsets) *openai.CompletionLogprobs {
	stride := 1 + lp.Top
	n := len(lps) / stride
	out := &openai.CompletionLogprobs{Tokens: make([]string, 0, n), TokenLogprobs: make([]float64, 0, n),
		TopLogprobs: make([]map[string]float64, 0, n), TextOffset: make([]int, 0, n)}
	for i := 0; i+stride <= len(lps); i += stride {
		tok, b := s.tokenText(lps[i].ID, lp.TokenIDs)
		out.Tokens = append(out.Tokens, tok)
		out.TokenLogprobs = append(out.TokenLogprobs, clampLogprob(lps[i].Logprob))
		out.TextOffset = append(out.TextOffset, off.next(b))
		alts := make(map[string]float64, stride)
		for _, x := range lps[i+1 : i+stride] {
			t, _ := s.tokenText(x.ID, lp.TokenIDs)
			if _, dup := alts[t]; dup {
				t = "token_id:" + strconv.Itoa(int(x.ID))
			}
			alts[t] = clampLogprob(x.Logprob)
		}
		out.TopLogprobs = append(out.TopLogprobs, alts)
	}
	return out
}

// textOffsets counts a choice's text in characters as its tokens' bytes
// arrive: text_offset is, as in OpenAI's and vLLM's replies, an index into
// the choice's text string, and clients index it by characters (Python
// str indexes are code points). The text is the engine's: each ill-formed
// byte sequence in it is one U+FFFD, by the Unicode "maximal subpart"
// rule the detector applies (internal/scheduler/completion): the longest
// prefix of a well-formed sequence, or else one byte. A character, or a
// U+FFFD, made of bytes of several tokens is counted once, and each of
// those tokens starts at its index. One textOffsets follows a choice
// across the chunks of a stream.
type textOffsets struct {
	chars int    // characters before tail
	tail  []byte // a well-formed but incomplete sequence at the end so far
}

// next returns the offset of a token whose bytes b come next, and counts
// them.
func (o *textOffsets) next(b []byte) int {
	at := o.chars
	if len(o.tail) > 0 && len(b) > 0 {
		buf := append(o.tail[:len(o.tail):len(o.tail)], b...)
		if size, _ := completion.TextStep(buf); size <= len(o.tail) {
			at++ // the tail ends as a U+FFFD of its own before b
		}
	}
	o.add(b)
	return at
}

// add counts b.
func (o *textOffsets) add(b []byte) {
	if len(o.tail) > 0 {
		b = append(o.tail, b...)
		o.tail = nil
	}
	for len(b) > 0 {
		size, whole := completion.TextStep(b)
		if !whole {
			o.tail = append([]byte(nil), b...)
			return
		}
		o.chars++
		b = b[size:]
	}
}

// addString counts text (an echoed prompt before the output).
func (o *textOffsets) addString(text string) { o.add([]byte(text)) }
