package completion

import "unicode/utf8"

// Tokenizers emit raw bytes: a byte-fallback token may carry one byte of a
// multi-byte rune, and a model can produce byte sequences that are not UTF-8
// at all. The helpers here read such text as a sequence of steps, each one
// rune or one ill-formed subsequence, following the Unicode "maximal
// subpart" practice (also the WHATWG decoder's): an ill-formed subsequence is
// the longest prefix of a well-formed sequence, or else one byte, and becomes
// one U+FFFD. Because an incomplete sequence at the end of the text is such a
// prefix, "the incomplete trailing sequence becomes U+FFFD" is the same rule.

// step returns the length of the step that starts at b[0] (len(b) > 0) and
// whether it is a well-formed rune.
func step(b []byte) (size int, ok bool) {
	if b[0] < utf8.RuneSelf {
		return 1, true
	}
	if r, n := utf8.DecodeRune(b); r != utf8.RuneError || n > 1 {
		return n, true
	}
	// utf8.FullRune is false exactly for a well-formed prefix that needs
	// more bytes, so the longest such prefix is the maximal subpart.
	for n := min(len(b), utf8.UTFMax-1); n > 1; n-- {
		if !utf8.FullRune(b[:n]) {
			return n, false
		}
	}
	return 1, false
}

// TextStep is the length of the step of text that starts at b[0] (a rune,
// or an ill-formed subsequence the text shows as one U+FFFD); complete is
// false when b is all a well-formed prefix that more bytes may complete
// (then size is len(b)). Callers that count a text's characters as its
// tokens' bytes arrive count steps as the engine's text does.
func TextStep(b []byte) (size int, complete bool) {
	if !utf8.FullRune(b) {
		return len(b), false
	}
	size, _ = step(b)
	return size, true
}

// incompleteTail is the length of the well-formed but incomplete sequence at
// the end of b (0 if b ends at a rune boundary or in ill-formed bytes): bytes
// that may still become a rune when the next token arrives.
func incompleteTail(b []byte) int {
	for n := 1; n <= min(len(b), utf8.UTFMax-1); n++ {
		c := b[len(b)-n]
		switch {
		case c < utf8.RuneSelf:
			return 0
		case c >= 0xC0: // a leading byte (or one that can never be one)
			if utf8.FullRune(b[len(b)-n:]) {
				return 0
			}
			return n
		}
		// A continuation byte: the rune may have started further back.
	}
	return 0
}

// stepStart returns the start of the step of b that contains offset i, or i
// when a step starts there. It lets a cut at i move back so that it never
// splits a rune or an ill-formed subsequence, judged with the bytes after i
// in view.
func stepStart(b []byte, i int) int {
	for j := i - 1; j >= max(0, i-(utf8.UTFMax-1)); j-- {
		c := b[j]
		if c < utf8.RuneSelf {
			return i
		}
		if c >= 0xC0 {
			if n, _ := step(b[j:]); j+n > i {
				return j
			}
			return i
		}
	}
	return i
}

// cutAfter returns the offset in b after its first n steps, and whether b
// has that many (n <= 0 gives 0, true).
func cutAfter(b []byte, n int) (int, bool) {
	if n <= 0 {
		return 0, true
	}
	seen := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
		} else {
			size, _ := step(b[i:])
			i += size
		}
		seen++
		if seen == n {
			return i, true
		}
	}
	return len(b), false
}

// appendValid appends b to dst with every ill-formed step replaced by U+FFFD.
func appendValid(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		size, ok := step(b[i:])
		if ok {
			dst = append(dst, b[i:i+size]...)
		} else {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		}
		i += size
	}
	return dst
}
