package model

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// The regexes of llama.cpp's pre-tokenizers transcribed into a small
// backtracking matcher (ECMAScript's semantics, which llama.cpp's std::regex
// follows), to hold the hand-written splitters of pretokenize.go to them.

// A matcher tries to match a pattern at byte offset i of s, calling k with
// each end the pattern can reach, in the order a backtracking regex engine
// tries them, until k accepts one; it reports whether k did. s is one
// piece: $ and lookaheads stop at its end.
type matcher func(s string, i int, k func(int) bool) bool

// rx matches min to max (max < 0: any number) characters of class,
// greedily: the longest run first, then each shorter one.
func rx(class func(rune) bool, min, max int) matcher {
	return func(s string, i int, k func(int) bool) bool {
		j, n := i, 0
		for j < len(s) && (max < 0 || n < max) {
			r, w := utf8.DecodeRuneInString(s[j:])
			if !class(r) {
				break
			}
			j += w
			n++
		}
		for ; n >= min; n-- {
			if k(j) {
				return true
			}
			if n > 0 {
				_, w := utf8.DecodeLastRuneInString(s[i:j])
				j -= w
			}
		}
		return false
	}
}

func rx1(class func(rune) bool) matcher { return rx(class, 1, 1) }

func rxLit(t string) matcher {
	return func(s string, i int, k func(int) bool) bool {
		return strings.HasPrefix(s[i:], t) && k(i+len(t))
	}
}

// rxOpt is m? (greedy).
func rxOpt(m matcher) matcher {
	return func(s string, i int, k func(int) bool) bool { return m(s, i, k) || k(i) }
}

func rxSeq(ms ...matcher) matcher {
	if len(ms) == 1 {
		return ms[0]
	}
	first, rest := ms[0], rxSeq(ms[1:]...)
	return func(s string, i int, k func(int) bool) bool {
		return first(s, i, func(j int) bool { return rest(s, j, k) })
	}
}

func rxAlt(ms ...matcher) matcher {
	return func(s string, i int, k func(int) bool) bool {
		for _, m := range ms {
			if m(s, i, k) {
				return true
			}
		}
		return false
	}
}

// rxNot is the lookahead (?!m).
func rxNot(m matcher) matcher {
	return func(s string, i int, k func(int) bool) bool {
		return !m(s, i, func(int) bool { return true }) && k(i)
	}
}

// rxEnd is $.
func rxEnd(s string, i int, k func(int) bool) bool { return i == len(s) && k(i) }

// rxIsolate is isolate for a matcher.
func rxIsolate(m matcher) pretokenizer {
	return isolate(func(s string, i int) int {
		end := i
		m(s, i, func(j int) bool { end = j; return true })
		return end
	})
}

func not(f func(rune) bool) func(rune) bool { return func(r rune) bool { return !f(r) } }

var (
	// rxContraction is (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]).
	rxContraction = rxAlt(
		rxSeq(rxLit("'"), rx1(anyOf("sS"))), rxSeq(rxLit("'"), rx1(anyOf("tT"))),
		rxSeq(rxLit("'"), rx1(anyOf("rR")), rx1(anyOf("eE"))), rxSeq(rxLit("'"), rx1(anyOf("vV")), rx1(anyOf("eE"))),
		rxSeq(rxLit("'"), rx1(anyOf("mM"))), rxSeq(rxLit("'"), rx1(anyOf("lL")), rx1(anyOf("lL"))),
		rxSeq(rxLit("'"), rx1(anyOf("dD"))),
	)
	// rxSpaceTail is \s*[\r\n]+|\s+(?!\S)|\s+.
	rxSpaceTail = rxAlt(
		rxSeq(rx(isSpace, 0, -1), rx(isNL, 1, -1)),
		rxSeq(rx(isSpace, 1, -1), rxNot(rx1(not(isSpace)))),
		rx(isSpace, 1, -1),
	)
	rxLead = not(or(isNL, isL, isN))
)

// regexPreTokenizers are the regex lists of src/llama-vocab.cpp for the
// pre-tokenizers llama.cpp runs through std::regex (GPT-2's regex, which
// it hand-codes, is splitGPT2 here as there).
var regexPreTokenizers = map[string]pretokenizer{
	"default": chain(
		rxIsolate(rx(or(isP, anyOf("$+<=>^~|")), 1, -1)),
		splitGPT2,
		rxIsolate(rx(isN, 1, -1)),
		rxIsolate(rx(isDigit, 3, 3)),
	),
	"falcon": chain(
		rxIsolate(rx(or(isP, anyOf("$+<=>^~|`")), 1, -1)),
		splitGPT2,
		rxIsolate(rx(isDigit, 3, 3)),
	),
	"starcoder": chain(rxIsolate(rx1(isN)), splitGPT2),
	"deepseek-llm": chain(
		rxIsolate(rx1(isNL)),
		rxIsolate(rxSeq(rxOpt(rx1(isSpace)), rx(isDeepSeekLLMLetter, 1, -1))),
		rxIsolate(rxSeq(rxOpt(rx1(isSpace)), rx(isDeepSeekLLMPunct, 1, -1))),
		rxIsolate(rxSeq(rx(isSpace, 1, -1), rxEnd)),
		rxIsolate(rx(isDeepSeekCJK, 1, -1)),
		rxIsolate(rx(isN, 1, -1)),
	),
	"deepseek-coder": chain(
		rxIsolate(rx1(isNL)),
		rxIsolate(rxSeq(rxOpt(rx1(isSpace)), rx(isL, 1, -1))),
		rxIsolate(rxSeq(rxOpt(rx1(isSpace)), rx(isP, 1, -1))),
		rxIsolate(rx(isDeepSeekCJK, 1, -1)),
		rxIsolate(rx1(isN)),
	),
	"deepseek-v3": chain(
		rxIsolate(rx(isN, 1, 3)),
		rxIsolate(rx(isDeepSeekV3CJK, 1, -1)),
		rxIsolate(rxAlt(
			rxSeq(rx1(isASCIIPS), rx(isASCIILetter, 1, -1)),
			rxSeq(rxOpt(rx1(not(or(isNL, isL, isPS)))), rx(isLM, 1, -1)),
			rxSeq(rxOpt(rxLit(" ")), rx(isPS, 1, -1), rx(isNL, 0, -1)),
			rxSpaceTail,
		)),
	),
	"gpt-4o": rxIsolate(rxAlt(
		rxSeq(rxOpt(rx1(rxLead)), rx(upper, 0, -1), rx(lower, 1, -1), rxOpt(rxContraction)),
		rxSeq(rxOpt(rx1(rxLead)), rx(upper, 1, -1), rx(lower, 0, -1), rxOpt(rxContraction)),
		rx(isN, 1, 3),
		rxSeq(rxOpt(rxLit(" ")), rx(isOther, 1, -1), rx(anyOf("\r\n/"), 0, -1)),
		rxSpaceTail,
	)),
	"tekken": rxIsolate(rxAlt(
		rxSeq(rxOpt(rx1(rxLead)), rx(upper, 0, -1), rx(lower, 1, -1)),
		rxSeq(rxOpt(rx1(rxLead)), rx(upper, 1, -1), rx(lower, 0, -1)),
		rx1(isN),
		rxSeq(rxOpt(rxLit(" ")), rx(isOther, 1, -1), rx(anyOf("\r\n/"), 0, -1)),
		rxSpaceTail,
	)),
	// Llama 3's and Qwen 2's, which llama.cpp hand-codes as splitLlama3
	// does.
	"llama-bpe": rxIsolate(rxAlt(
		rxContraction,
		rxSeq(rxOpt(rx1(rxLead)), rx(isL, 1, -1)),
		rx(isN, 1, 3),
		rxSeq(rxOpt(rxLit(" ")), rx(isOther, 1, -1), rx(isNL, 0, -1)),
		rxSpaceTail,
	)),
	// Ling's: '(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|…|\s*[\r\n]|…
	"bailingmoe": rxIsolate(rxAlt(
		rxSeq(rxLit("'"), rxAlt(rx1(anyOf("sSdDmMtT")), rxSeq(rx1(anyOf("lL")), rx1(anyOf("lL"))),
			rxSeq(rx1(anyOf("vV")), rx1(anyOf("eE"))), rxSeq(rx1(anyOf("rR")), rx1(anyOf("eE"))))),
		rxSeq(rxOpt(rx1(rxLead)), rx(isL, 1, -1)),
		rx1(isN),
		rxSeq(rxOpt(rxLit(" ")), rx(isOther, 1, -1), rx(isNL, 0, -1)),
		rxSeq(rx(isSpace, 0, -1), rx1(isNL)),
		rxSeq(rx(isSpace, 1, -1), rxNot(rx1(not(isSpace)))),
		rx(isSpace, 1, -1),
	)),
	"seed-coder": rxIsolate(rxAlt(
		rxContraction,
		rxSeq(rxOpt(rx1(rxLead)), rx(isL, 1, -1)),
		rx1(isN),
		rxSeq(rxOpt(rxLit(" ")), rx(not(or(isSpace, isL, isN, isNL)), 1, -1)),
		rxSpaceTail,
	)),
	"qwen2": rxIsolate(rxAlt(
		rxContraction,
		rxSeq(rxOpt(rx1(rxLead)), rx(isL, 1, -1)),
		rx1(isN),
		rxSeq(rxOpt(rxLit(" ")), rx(isOther, 1, -1), rx(isNL, 0, -1)),
		rxSpaceTail,
	)),
}

// pretokenizeAlphabet is what random texts are made of: the characters the
// regexes tell apart (cases, marks, digits of other scripts, CJK, kana,
// Hangul, punctuation and symbols in and past ASCII, whitespace past ASCII,
// controls, format characters).
var pretokenizeAlphabet = []string{
	"a", "b", "Z", "Q", "e", "'", "'s", "'S", "'ll", "'RE", " ", " ", "  ", "\n", "\r\n", "\t", "1", "23", "4567", "\u0663", "\u00BD",
	"(", ")", ".", ",", "!", "$", "+", "<", "`", "^", "|", "~", "/", "_", "-", "\"", "@", "[", "\\",
	"\u00E9", "\u00C9", "\u00DF", "\u0416", "\u0436", "\u01C5", "\u02B0", "\u4E2D", "\u6587", "\u4F60", "\u306E", "\u30AB", "\uD55C", "\u0800", "\u0627",
	"\u0301", "\u0915\u094D", "\U0001F999", "\U0001F636\u200D\U0001F32B\uFE0F", "\u00A0", "\u3000", "\u2003", "\u3001", "\uFF01", "\uFF21", "\uFF5A",
	"\u2019", "\u2026", "\u2122", "\u00B0", "\x00", "\x7f", "\u0085", "\u03A9", "\u2126", "\u1F7D",
}

func randomPretokenizeText(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(24) {
		b.WriteString(pretokenizeAlphabet[rng.IntN(len(pretokenizeAlphabet))])
	}
	return b.String()
}

// TestPreTokenizersFollowRegexes: each hand-written splitter splits random
// texts as its regex list does.
func TestPreTokenizersFollowRegexes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, pre := range slices.Sorted(maps.Keys(regexPreTokenizers)) {
		ref := regexPreTokenizers[pre]
		p, err := lookupPreTokenizer(pre)
		if err != nil {
			t.Fatal(err)
		}
		for range 2000 {
			s := randomPretokenizeText(rng)
			var got, want []string
			p.split(s, func(x string) { got = append(got, x) })
			ref(s, func(x string) { want = append(want, x) })
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s %q (-regex +splitter):\n%s", pre, s, diff)
			}
		}
	}
}
