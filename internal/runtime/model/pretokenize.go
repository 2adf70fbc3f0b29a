package model

import (
	"unicode"
	"unicode/utf8"
)

// pretokenizer splits text into the pieces BPE merges within; it calls emit
// with consecutive substrings that cover s.
type pretokenizer func(s string, emit func(string))

// pretokenizerFor picks the splitter for tokenizer.ggml.pre. GPT-2's rule is
// the fallback for names it does not know.
func pretokenizerFor(pre string) pretokenizer {
	switch pre {
	case "llama-bpe", "llama3", "llama-v3", "smaug-bpe", "dbrx", "falcon3":
		return func(s string, emit func(string)) { splitLlama3(s, 3, emit) }
	case "qwen2", "deepseek-r1-qwen", "stablelm2", "megrez":
		return func(s string, emit func(string)) { splitLlama3(s, 1, emit) }
	}
	return splitGPT2
}

func isL(r rune) bool     { return unicode.IsLetter(r) }
func isN(r rune) bool     { return unicode.IsNumber(r) }
func isSpace(r rune) bool { return unicode.IsSpace(r) }
func isOther(r rune) bool { return !isSpace(r) && !isL(r) && !isN(r) }

// runAt returns the end of the run of runes satisfying f starting at i.
func runAt(s string, i int, f func(rune) bool) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !f(r) {
			break
		}
		i += n
	}
	return i
}

func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	return utf8.DecodeRuneInString(s[i:])
}

// contraction matches 's 't 're 've 'm 'll 'd at i (any case when fold).
func contraction(s string, i int, fold bool) int {
	if s[i] != '\'' {
		return 0
	}
	lower := func(b byte) byte {
		if fold && b >= 'A' && b <= 'Z' {
			return b + 'a' - 'A'
		}
		return b
	}
	if i+1 >= len(s) {
		return 0
	}
	if i+2 < len(s) {
		switch string([]byte{lower(s[i+1]), lower(s[i+2])}) {
		case "re", "ve", "ll":
			return 3
		}
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	return 0
}

// whitespace handles the \s+(?!\S)|\s+ alternatives at i (s[i] is space):
// a run followed by non-space gives back its last character.
func whitespace(s string, i int) int {
	end := runAt(s, i, isSpace)
	if end == len(s) {
		return end
	}
	_, n := utf8.DecodeLastRuneInString(s[i:end])
	if end-n > i {
		return end - n
	}
	return end
}

// splitGPT2 implements GPT-2's
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(s string, emit func(string)) {
	for i := 0; i < len(s); {
		end := i + contraction(s, i, false)
		if end == i {
			r, n := runeAt(s, i)
			j := i
			if r == ' ' {
				if r2, _ := runeAt(s, i+n); r2 >= 0 && !isSpace(r2) {
					j, r = i+n, r2
				}
			}
			switch {
			case isL(r):
				end = runAt(s, j, isL)
			case isN(r):
				end = runAt(s, j, isN)
			case isOther(r):
				end = runAt(s, j, isOther)
			default:
				end = whitespace(s, i)
			}
		}
		emit(s[i:end])
		i = end
	}
}

// splitLlama3 implements Llama 3's (maxDigits 3) and Qwen2's (maxDigits 1)
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(s string, maxDigits int, emit func(string)) {
	isNL := func(r rune) bool { return r == '\r' || r == '\n' }
	for i := 0; i < len(s); {
		end := i + contraction(s, i, true)
		r, n := runeAt(s, i)
		r2, _ := runeAt(s, i+n)
		switch {
		case end > i:
		case isL(r):
			end = runAt(s, i, isL)
		case !isNL(r) && !isN(r) && r2 >= 0 && isL(r2):
			end = runAt(s, i+n, isL)
		case isN(r):
			end = i
			for d := 0; d < maxDigits; d++ {
				c, cn := runeAt(s, end)
				if c < 0 || !isN(c) {
					break
				}
				end += cn
			}
		case isOther(r) || (r == ' ' && r2 >= 0 && isOther(r2)):
			j := i
			if r == ' ' {
				j = i + n
			}
			end = runAt(s, runAt(s, j, isOther), isNL)
		default:
			// Whitespace: up to the last newline of the run, if any.
			run := runAt(s, i, isSpace)
			last := -1
			for k := i; k < run; {
				c, cn := runeAt(s, k)
				if isNL(c) {
					last = k + cn
				}
				k += cn
			}
			if last > 0 {
				end = last
			} else {
				end = whitespace(s, i)
			}
		}
		emit(s[i:end])
		i = end
	}
}
