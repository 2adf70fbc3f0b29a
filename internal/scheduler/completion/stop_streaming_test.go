package completion

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// The property: for any output split into any tokens, and any stop strings,
//
//   - the concatenated deltas equal the reference: the whole output cut
//     before the first stop string, found naively, as valid UTF-8 and at
//     most MaxResponseChars runes;
//   - every delta is valid UTF-8;
//   - no prefix of the concatenated deltas ever ends inside a stop string
//     that the following output could still complete.

// textAtoms build random outputs; multi-byte runes get split by the random
// token boundaries.
var textAtoms = []string{"a", "b", "c", " ", "é", "日", "\U0001F600"}

// stopAtoms build random stop strings, from a smaller alphabet so that they
// occur often.
var stopAtoms = []string{"a", "b", "é", "\U0001F600"}

func TestStopStreamingProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(20240601, 7))
	for range 20000 {
		var out []byte
		for range rng.IntN(40) {
			out = append(out, textAtoms[rng.IntN(len(textAtoms))]...)
		}
		var cuts []byte
		for range rng.IntN(len(out) + 1) {
			cuts = append(cuts, byte(rng.IntN(6)))
		}
		stops := make([]string, 1+rng.IntN(3))
		for i := range stops {
			var s strings.Builder
			for range 1 + rng.IntN(4) {
				s.WriteString(stopAtoms[rng.IntN(len(stopAtoms))])
			}
			stops[i] = s.String()
		}
		maxChars := 0
		if rng.IntN(3) == 0 {
			maxChars = 1 + rng.IntN(30)
		}
		checkStreaming(t, splitTokens(out, cuts), stops, rng.IntN(4), maxChars)
		if t.Failed() {
			return
		}
	}
}

func FuzzStopStreamer(f *testing.F) {
	f.Add("hello STOP world", "STOP", "", []byte{3, 2, 1, 4}, uint8(0), uint8(0))
	f.Add("xaab aaab", "aab", "b", []byte{1, 1, 1, 1, 1, 1}, uint8(1), uint8(0))
	f.Add("abcd", "abcd", "c", []byte{2, 1, 1}, uint8(0), uint8(0))
	f.Add("caf\u00e9 \U0001F600!", "\U0001F600", "\u00e9 x", []byte{4, 1, 1, 1, 1, 1, 1}, uint8(0), uint8(0))
	f.Add("a\xe2\x82b\xffc\xf0\x9f", "b", "\x82", []byte{2, 1, 1, 3}, uint8(0), uint8(0))
	f.Add("one two</answer> three", "</answer>", "\n\nUser:", []byte{4, 4, 3, 5}, uint8(2), uint8(9))
	f.Fuzz(func(t *testing.T, out, stop1, stop2 string, cuts []byte, minTokens, maxChars uint8) {
		if len(out) > 1<<12 || len(stop1) > 64 || len(stop2) > 64 {
			return
		}
		checkStreaming(t, splitTokens([]byte(out), cuts), []string{stop1, stop2}, int(minTokens%8), int(maxChars))
	})
}

// splitTokens cuts out into tokens of cuts[i]%6 bytes (0 to 5; a token may
// carry no bytes), with whatever remains as the last token.
func splitTokens(out, cuts []byte) [][]byte {
	var toks [][]byte
	for _, c := range cuts {
		n := min(int(c%6), len(out))
		toks = append(toks, out[:n])
		out = out[n:]
	}
	if len(out) > 0 || len(toks) == 0 {
		toks = append(toks, out)
	}
	return toks
}

func checkStreaming(t *testing.T, toks [][]byte, stops []string, minTokens, maxChars int) {
	t.Helper()
	var d Detector
	d.Reset(&Params{MaxTokens: len(toks) + 1, MinTokens: minTokens, StopStrings: stops, MaxResponseChars: maxChars})
	var got, seen []byte
	r := None
	for _, tk := range toks {
		var delta []byte
		delta, r = d.Add(idText, tk, false)
		seen = append(seen, tk...)
		if !utf8.Valid(delta) {
			t.Fatalf("delta %q is not valid UTF-8 (tokens %q, stops %q)", delta, toks, stops)
		}
		got = append(got, delta...)
		if r != None {
			break
		}
		// While the output is valid UTF-8 the released text is its raw
		// prefix, so the hold-back can be checked byte for byte.
		if utf8.Valid(seen) {
			if !bytes.HasPrefix(seen, got) {
				t.Fatalf("released %q is not a prefix of the output %q", got, seen)
			}
			if s, ok := endsInsideStop(seen, len(got), stops); ok {
				t.Fatalf("released %q ends inside a possible %q; output so far %q", got, s, seen)
			}
		}
	}
	if r == None {
		got = append(got, d.Finish(Cancelled)...)
	}

	want, wantTokens, stopped := referenceOutput(toks, stops, minTokens)
	if maxChars > 0 {
		want = firstRunes(want, maxChars)
	}
	if string(got) != want {
		t.Fatalf("streamed %q, want %q (tokens %q, stops %q, min tokens %d, max chars %d)",
			got, want, toks, stops, minTokens, maxChars)
	}
	if maxChars == 0 {
		if stopped != (r == Stop) {
			t.Fatalf("reason %v, reference stopped=%v (tokens %q, stops %q)", r, stopped, toks, stops)
		}
		if stopped && d.OutputTokens() != wantTokens {
			t.Fatalf("stopped after %d tokens, want %d (tokens %q, stops %q)", d.OutputTokens(), wantTokens, toks, stops)
		}
	}
	if n := utf8.RuneCount(got); d.Text() != n {
		t.Fatalf("Text() = %d, released %d runes", d.Text(), n)
	}
}

// endsInsideStop reports whether released bytes of out end inside text that
// the bytes after out could still turn into a stop string.
func endsInsideStop(out []byte, released int, stops []string) (string, bool) {
	for _, s := range stops {
		for j := max(0, released-len(s)+1); j < released; j++ {
			if rest := out[j:]; len(rest) < len(s) && strings.HasPrefix(s, string(rest)) {
				return s, true
			}
		}
	}
	return "", false
}

// referenceOutput computes the expected text naively from the whole output:
// of all stop-string occurrences that end in a token preceded by at least
// minTokens tokens, the request stops at the one ending in the earliest
// token (among those, the earliest start, then the longest), and the text
// is everything before it.
func referenceOutput(toks [][]byte, stops []string, minTokens int) (text string, tokens int, stopped bool) {
	var out []byte
	ends := make([]int, len(toks)) // ends[k]: offset after token k
	for k, tk := range toks {
		out = append(out, tk...)
		ends[k] = len(out)
	}
	bestTok, bestStart, bestLen := -1, 0, 0
	for _, s := range stops {
		if s == "" {
			continue
		}
		for i := 0; i+len(s) <= len(out); i++ {
			if string(out[i:i+len(s)]) != s {
				continue
			}
			k := 0 // the token holding the occurrence's last byte
			for ends[k] < i+len(s) {
				k++
			}
			if k < minTokens {
				continue
			}
			if bestTok < 0 || k < bestTok || (k == bestTok && (i < bestStart || (i == bestStart && len(s) > bestLen))) {
				bestTok, bestStart, bestLen = k, i, len(s)
			}
		}
	}
	if bestTok < 0 {
		return validUTF8(out), len(toks), false
	}
	return validUTF8(out[:bestStart]), bestTok + 1, true
}

// validUTF8 replaces each maximal subpart of an ill-formed sequence with
// U+FFFD, written from the table of well-formed byte sequences in the
// Unicode standard (Table 3-7) rather than with package utf8.
func validUTF8(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); {
		c := b[i]
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c < 0x80:
			need = 1
		case c >= 0xC2 && c <= 0xDF:
			need = 2
		case c == 0xE0:
			need, lo = 3, 0xA0
		case c == 0xED:
			need, hi = 3, 0x9F
		case c >= 0xE1 && c <= 0xEF:
			need = 3
		case c == 0xF0:
			need, lo = 4, 0x90
		case c == 0xF4:
			need, hi = 4, 0x8F
		case c >= 0xF1 && c <= 0xF3:
			need = 4
		}
		n := 1
		for need > 0 && n < need && i+n < len(b) {
			x := b[i+n]
			if n == 1 && (x < lo || x > hi) || n > 1 && (x < 0x80 || x > 0xBF) {
				break
			}
			n++
		}
		if n == need {
			sb.Write(b[i : i+n])
		} else {
			sb.WriteString("\uFFFD")
		}
		i += n
	}
	return sb.String()
}

func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

func TestValidUTF8Reference(t *testing.T) {
	// The reference and the package agree on well-known cases; the fuzz
	// target compares them on everything else.
	for _, tc := range []struct{ in, want string }{
		{"abc", "abc"},
		{"\xE2\x82\xAC", "€"},
		{"\xE2\x82", "\uFFFD"},
		{"\xE2\x82A", "\uFFFDA"},
		{"\xE0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xF0\x9F\x98", "\uFFFD"},
		{"\xC0\xAF", "\uFFFD\uFFFD"},
	} {
		if got := validUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("validUTF8(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := string(appendValid(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("appendValid(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
