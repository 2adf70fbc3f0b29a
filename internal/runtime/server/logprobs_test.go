package server

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
)

func TestTextOffsets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		tokens []string
		want   []int
		chars  int // of the whole text, an incomplete end counted as its U+FFFD
	}{
		{"ascii", "", []string{"ab", "c", "", "d"}, []int{0, 2, 3, 3}, 4},
		{"echoed prompt", "héllo ", []string{"w", "ö"}, []int{6, 7}, 8},
		{"a character over three tokens", "", []string{"a", "\xe2", "\x82", "\x8c", "b"}, []int{0, 1, 1, 1, 2}, 3},
		{"an emoji over four tokens", "", []string{"\xf0", "\x9f", "\x98", "\x80"}, []int{0, 0, 0, 0}, 1},
		{"a cut sequence is one U+FFFD", "", []string{"\xe2", "\x82", "x"}, []int{0, 0, 1}, 2},
		{"a token ending a cut sequence and going on", "", []string{"\xe2", "\x82x"}, []int{0, 0}, 2},
		{"a token that breaks the sequence at once", "", []string{"\xe2", "x"}, []int{0, 1}, 2},
		{"stray continuation bytes", "", []string{"\x82", "\x82", "a"}, []int{0, 1, 2}, 3},
		{"an incomplete end", "", []string{"a", "\xe2\x82"}, []int{0, 1}, 2},
		{"a lead breaking a lead", "", []string{"\xe2", "\xe2", "\x82", "\x8c"}, []int{0, 1, 1, 1}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o textOffsets
			o.addString(tc.prefix)
			var got []int
			for _, tok := range tc.tokens {
				got = append(got, o.next([]byte(tok)))
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("offsets (-want +got):\n%s", d)
			}
			if n := o.total(); n != tc.chars {
				t.Errorf("%d characters counted, want %d", n, tc.chars)
			}
		})
	}
}

// total is the characters of the whole text, an incomplete end included
// (the engine releases it as one U+FFFD).
func (o *textOffsets) total() int {
	if len(o.tail) > 0 {
		return o.chars + 1
	}
	return o.chars
}

// TestTextOffsetsMatchTheEngineText: for random byte tokens, the offsets
// index the text the engine's detector makes of them: non-decreasing, the
// first 0, each within the text made of the tokens before it, and the
// whole text as long as counted.
func TestTextOffsetsMatchTheEngineText(t *testing.T) {
	alphabet := []byte{'a', ' ', 0xc3, 0xa9, 0xe2, 0x82, 0x8c, 0xf0, 0x9f, 0x98, 0x80, 0xff, 0xed, 0xa0}
	rng := rand.New(rand.NewPCG(7, 11))
	text := func(tokens [][]byte) int {
		var d completion.Detector
		d.Reset(&completion.Params{MaxTokens: len(tokens) + 1})
		var out []byte
		for i, tok := range tokens {
			delta, _ := d.Add(int32(i), tok, false)
			out = append(out, delta...)
		}
		out = append(out, d.Finish(completion.Length)...)
		if !utf8.Valid(out) {
			t.Fatalf("engine text %q is not UTF-8", out)
		}
		return utf8.RuneCount(out)
	}
	for range 2000 {
		tokens := make([][]byte, 1+rng.IntN(8))
		for i := range tokens {
			tokens[i] = make([]byte, rng.IntN(4))
			for j := range tokens[i] {
				tokens[i][j] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		var o textOffsets
		prev := 0
		for i, tok := range tokens {
			at := o.next(tok)
			before := text(tokens[:i]) // the tail, if any, released as U+FFFD
			if at < prev || at > before || at < before-1 || (i == 0 && at != 0) {
				t.Fatalf("tokens %q: token %d at %d (previous %d, text before it %d characters)", tokens, i, at, prev, before)
			}
			prev = at
		}
		if n := text(tokens); o.total() != n {
			t.Fatalf("tokens %q: %d characters counted, the engine's text has %d", tokens, o.total(), n)
		}
	}
}
