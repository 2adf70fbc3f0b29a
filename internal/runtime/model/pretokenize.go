package model

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pretokenizer splits text into the pieces BPE merges within; it calls emit
// with consecutive substrings that cover s.
type pretokenizer func(s string, emit func(string))

// preTokenizer is how a tokenizer.ggml.pre value prepares text for BPE, as
// llama.cpp v0.5.0 defines it (src/llama-vocab.cpp, llm_tokenizer_bpe and
// the loader's pre-tokenizer switch). llama.cpp splits with a list of
// regexes, each applied to every piece the one before left (text between
// matches stays a piece of its own). Go's regexp has no lookahead, so each
// regex is a hand-written matcher here: those llama.cpp hand-codes (GPT-2,
// Llama 3, Qwen 2, Qwen 3.5, Kimi K2) follow that code, the others the
// regex, and pretokenize_regex_test.go holds them to a backtracking
// transcription of the regexes.
type preTokenizer struct {
	split pretokenizer
	// ignoreMerges takes a piece that is a token as a whole, without
	// merging (llama.cpp's ignore_merges: the Llama 3 family, Tekken).
	ignoreMerges bool
	// addBOS is llama.cpp's default for tokenizer.ggml.add_bos_token when
	// the file leaves it out.
	addBOS bool
}

// preTokenizers maps each supported tokenizer.ggml.pre value (llama.cpp's
// names) to its splitting. An unknown value is a load error: splitting text
// the way another model was trained to see it changes every prompt's tokens
// without a trace. The empty value is llama.cpp's "default", which it also
// uses (with a warning) when a file names no pre-tokenizer.
var preTokenizers = func() map[string]preTokenizer {
	m := map[string]preTokenizer{}
	add := func(p preTokenizer, names ...string) {
		for _, n := range names {
			m[n] = p
		}
	}
	gpt2 := preTokenizer{split: splitGPT2}
	llama3 := func(s string, emit func(string)) { splitLlama3(s, 3, isL, true, emit) }
	qwen2 := func(s string, emit func(string)) { splitLlama3(s, 1, isL, true, emit) }
	add(preTokenizer{split: splitDefault}, "", "default")
	add(gpt2, "gpt-2", "phi-2", "gigachat", "a.x-4.0", "mellum", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4")
	add(preTokenizer{split: llama3, ignoreMerges: true, addBOS: true}, "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2")
	add(preTokenizer{split: llama3}, "dbrx", "smaug-bpe", "glm4", "chatglm-bpe")
	// Ling's regex (bailingmoe) reads differently but matches what Qwen 2's
	// does: \s*[\r\n] ends where \s*[\r\n]+ does.
	add(preTokenizer{split: qwen2}, "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2",
		"bailingmoe", "bailingmoe2", "llada-moe")
	add(preTokenizer{split: func(s string, emit func(string)) { splitLlama3(s, 1, isLM, true, emit) }}, "qwen35")
	add(preTokenizer{split: func(s string, emit func(string)) { splitLlama3(s, 1, isL, false, emit) }}, "seed-coder")
	add(preTokenizer{split: splitStarCoder}, "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2")
	add(preTokenizer{split: splitFalcon}, "falcon")
	add(preTokenizer{split: splitDeepSeekLLM}, "deepseek-llm")
	add(preTokenizer{split: splitDeepSeekCoder}, "deepseek-coder")
	add(preTokenizer{split: splitDeepSeekV3}, "deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4")
	add(preTokenizer{split: splitGPT4o}, "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2")
	add(preTokenizer{split: splitTekken, ignoreMerges: true, addBOS: true}, "tekken")
	add(preTokenizer{split: splitKimiK2}, "kimi-k2")
	return m
}()

// lookupPreTokenizer returns the splitting of tokenizer.ggml.pre value pre,
// or an error naming it and the supported values.
func lookupPreTokenizer(pre string) (preTokenizer, error) {
	if p, ok := preTokenizers[pre]; ok {
		return p, nil
	}
	names := make([]string, 0, len(preTokenizers))
	for n := range preTokenizers {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return preTokenizer{}, fmt.Errorf("pre-tokenizer %q (tokenizer.ggml.pre) is unsupported (supported: %s)", pre, strings.Join(names, ", "))
}

// Character classes, as llama.cpp's tables classify code points (Go's
// unicode tables agree with them but for code points assigned in later
// Unicode versions). Whitespace is llama.cpp's set: Go's unicode.IsSpace.
func isL(r rune) bool     { return unicode.IsLetter(r) }
func isLM(r rune) bool    { return unicode.IsLetter(r) || unicode.IsMark(r) }
func isN(r rune) bool     { return unicode.IsNumber(r) }
func isP(r rune) bool     { return unicode.IsPunct(r) }
func isPS(r rune) bool    { return unicode.IsPunct(r) || unicode.IsSymbol(r) }
func isSpace(r rune) bool { return unicode.IsSpace(r) }
func isNL(r rune) bool    { return r == '\r' || r == '\n' }
func isOther(r rune) bool { return !isSpace(r) && !isL(r) && !isN(r) }

// isHan is llama.cpp's unicode_cpt_is_han: the CJK ideograph blocks.
func isHan(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2EBEF, r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

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
	if i >= len(s) || s[i] != '\'' {
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

// newlineWhitespace handles the \s*[\r\n]+|\s+(?!\S)|\s+ alternatives at i
// (s[i] is space): up to the last newline of the run, if any.
func newlineWhitespace(s string, i int) int {
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
		return last
	}
	return whitespace(s, i)
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

// splitLlama3 implements Llama 3's (maxDigits 3, letter \p{L}), Qwen 2's
// (maxDigits 1), Qwen 3.5's (maxDigits 1, letter [\p{L}\p{M}]) and
// Seed-Coder's (maxDigits 1, no [\r\n]* after punctuation: punctNL false)
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?letter+|\p{N}{1,maxDigits}| ?[^\s letter \p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(s string, maxDigits int, letter func(rune) bool, punctNL bool, emit func(string)) {
	other := func(r rune) bool { return !isSpace(r) && !letter(r) && !isN(r) }
	for i := 0; i < len(s); {
		end := i + contraction(s, i, true)
		r, n := runeAt(s, i)
		r2, _ := runeAt(s, i+n)
		switch {
		case end > i:
		case letter(r):
			end = runAt(s, i, letter)
		case !isNL(r) && !isN(r) && r2 >= 0 && letter(r2):
			end = runAt(s, i+n, letter)
		case isN(r):
			end = runUpTo(s, i, isN, maxDigits)
		case other(r) || (r == ' ' && r2 >= 0 && other(r2)):
			j := i
			if r == ' ' {
				j = i + n
			}
			end = runAt(s, j, other)
			if punctNL {
				end = runAt(s, end, isNL)
			}
		default:
			end = newlineWhitespace(s, i)
		}
		emit(s[i:end])
		i = end
	}
}

// splitKimiK2 implements Kimi K2's split, which llama.cpp hand-codes
// (unicode_regex_split_custom_kimi_k2) for
// [\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// as that code does: a run of letters other than Han (marks are not
// letters there) with an optional lead and contraction.
func splitKimiK2(s string, emit func(string)) {
	nonHan := func(r rune) bool { return isL(r) && !isHan(r) }
	for i := 0; i < len(s); {
		r, n := runeAt(s, i)
		r2, _ := runeAt(s, i+n)
		lead := !isNL(r) && !isL(r) && !isN(r)
		var end int
		switch {
		case isHan(r):
			end = runAt(s, i, isHan)
		case nonHan(r) || (lead && r2 >= 0 && nonHan(r2)):
			end = runAt(s, i+n, nonHan)
			end += contraction(s, end, true)
		case isN(r):
			end = runUpTo(s, i, isN, 3)
		case isOther(r) || (r == ' ' && r2 >= 0 && isOther(r2)):
			j := i
			if r == ' ' {
				j = i + n
			}
			end = runAt(s, runAt(s, j, isOther), isNL)
		default:
			end = newlineWhitespace(s, i)
		}
		emit(s[i:end])
		i = end
	}
}

// isolate splits s as llama.cpp splits a piece by one regex (a std::regex
// iterator): each leftmost match is a piece, and so is the text between
// matches. match returns the end of the match at i, or i when none starts
// there.
func isolate(match func(s string, i int) int) pretokenizer {
	return func(s string, emit func(string)) {
		gap := 0
		for i := 0; i < len(s); {
			if end := match(s, i); end > i {
				if gap < i {
					emit(s[gap:i])
				}
				emit(s[i:end])
				i, gap = end, end
				continue
			}
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
		}
		if gap < len(s) {
			emit(s[gap:])
		}
	}
}

// chain applies each splitting to every piece the one before it left, as
// llama.cpp applies a pre-tokenizer's list of regexes.
func chain(passes ...pretokenizer) pretokenizer {
	if len(passes) == 1 {
		return passes[0]
	}
	return func(s string, emit func(string)) {
		// The funcs that hand one pass's pieces to the next are made once
		// per text, not once per piece.
		next := emit
		for i := len(passes) - 1; i >= 1; i-- {
			pass, after := passes[i], next
			next = func(piece string) { pass(piece, after) }
		}
		passes[0](s, next)
	}
}

// Matches for isolate, each named by the regex it stands for.

// runOf is class+.
func runOf(class func(rune) bool) func(s string, i int) int {
	return func(s string, i int) int { return runAt(s, i, class) }
}

// oneOf is class.
func oneOf(class func(rune) bool) func(s string, i int) int {
	return func(s string, i int) int {
		if r, n := runeAt(s, i); n > 0 && class(r) {
			return i + n
		}
		return i
	}
}

// upTo is class{1,max}.
func upTo(class func(rune) bool, max int) func(s string, i int) int {
	return func(s string, i int) int { return runUpTo(s, i, class, max) }
}

// runUpTo returns the end of the run of at most max runes satisfying class
// starting at i.
func runUpTo(s string, i int, class func(rune) bool, max int) int {
	for range max {
		r, n := runeAt(s, i)
		if n == 0 || !class(r) {
			break
		}
		i += n
	}
	return i
}

// threeDigits is [0-9][0-9][0-9].
func threeDigits(s string, i int) int {
	if i+3 <= len(s) && isDigit(rune(s[i])) && isDigit(rune(s[i+1])) && isDigit(rune(s[i+2])) {
		return i + 3
	}
	return i
}

// spaceThen is \s?class+ for a class without whitespace.
func spaceThen(class func(rune) bool) func(s string, i int) int {
	return func(s string, i int) int {
		r, n := runeAt(s, i)
		if n > 0 && isSpace(r) {
			if end := runAt(s, i+n, class); end > i+n {
				return end
			}
		}
		return runAt(s, i, class)
	}
}

// trailingSpace is \s+$: the whitespace that ends the piece.
func trailingSpace(s string, i int) int {
	if end := runAt(s, i, isSpace); end == len(s) {
		return end
	}
	return i
}

// ranges is a character class written as llama.cpp writes one between
// brackets ("A-Za-z\u00B5"), for the regexes it matches code point by code
// point (std::wregex): there every whitespace character past ASCII stands
// for a vertical tab, so none of them is in a class that lists it.
func ranges(class string) func(rune) bool {
	var rs [][2]rune
	cs := []rune(class)
	for i := 0; i < len(cs); i++ {
		if i+2 < len(cs) && cs[i+1] == '-' {
			rs = append(rs, [2]rune{cs[i], cs[i+2]})
			i += 2
			continue
		}
		rs = append(rs, [2]rune{cs[i], cs[i]})
	}
	// Sorted and merged, for a binary search.
	sort.Slice(rs, func(a, b int) bool { return rs[a][0] < rs[b][0] })
	merged := rs[:0]
	for _, x := range rs {
		if n := len(merged); n > 0 && x[0] <= merged[n-1][1]+1 {
			merged[n-1][1] = max(merged[n-1][1], x[1])
			continue
		}
		merged = append(merged, x)
	}
	return func(r rune) bool {
		if r > 0x7F && isSpace(r) {
			return false
		}
		k := sort.Search(len(merged), func(k int) bool { return merged[k][1] >= r })
		return k < len(merged) && merged[k][0] <= r
	}
}

func ascii(lo, hi rune) func(rune) bool { return func(r rune) bool { return r >= lo && r <= hi } }

func anyOf(chars string) func(rune) bool {
	return func(r rune) bool { return r < utf8.RuneSelf && r >= 0 && strings.ContainsRune(chars, r) }
}

func or(fs ...func(rune) bool) func(rune) bool {
	return func(r rune) bool {
		for _, f := range fs {
			if f(r) {
				return true
			}
		}
		return false
	}
}

var (
	isDigit = ascii('0', '9')
	// isASCIIPS is [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~].
	isASCIIPS = or(ascii('!', '/'), ascii(':', '@'), ascii('[', '`'), ascii('{', '~'))
	// isASCIILetter is [A-Za-z].
	isASCIILetter = or(ascii('A', 'Z'), ascii('a', 'z'))
)

// splitDefault is llama.cpp's default (tokenizer.ggml.pre unset or
// "default"): [\p{P}\$\+<=>\^~\|]+, then GPT-2's regex, \p{N}+ and
// [0-9][0-9][0-9].
var splitDefault = chain(
	isolate(runOf(or(isP, anyOf("$+<=>^~|")))),
	splitGPT2,
	isolate(runOf(isN)),
	isolate(threeDigits),
)

// splitFalcon is Falcon's [\p{P}\$\+<=>\^~\|`]+, GPT-2's regex,
// [0-9][0-9][0-9].
var splitFalcon = chain(
	isolate(runOf(or(isP, anyOf("$+<=>^~|`")))),
	splitGPT2,
	isolate(threeDigits),
)

// splitStarCoder is StarCoder's (and Refact's, Command R's, …) \p{N}, then
// GPT-2's regex: every digit alone.
var splitStarCoder = chain(isolate(oneOf(isN)), splitGPT2)

// The classes of the DeepSeek regexes that list code points, as
// src/llama-vocab.cpp writes them (escaped here so that no editor
// normalizes them: several are canonically equivalent to others).
const (
	deepseekLLMLetters = "A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943"
	deepseekLLMPunct   = "!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002"
	deepseekCJK        = "\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF"
	deepseekV3CJK      = "\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF"
)

var (
	isDeepSeekLLMLetter = ranges(deepseekLLMLetters)
	isDeepSeekLLMPunct  = ranges(deepseekLLMPunct)
	isDeepSeekCJK       = ranges(deepseekCJK)
	isDeepSeekV3CJK     = ranges(deepseekV3CJK)
)

// splitDeepSeekLLM is DeepSeek LLM's [\r\n], \s?[deepseekLLMLetters]+,
// \s?[deepseekLLMPunct]+, \s+$, [deepseekCJK]+, \p{N}+.
var splitDeepSeekLLM = chain(
	isolate(oneOf(isNL)),
	isolate(spaceThen(isDeepSeekLLMLetter)),
	isolate(spaceThen(isDeepSeekLLMPunct)),
	isolate(trailingSpace),
	isolate(runOf(isDeepSeekCJK)),
	isolate(runOf(isN)),
)

// splitDeepSeekCoder is DeepSeek Coder's [\r\n], \s?\p{L}+, \s?\p{P}+,
// [deepseekCJK]+, \p{N}.
var splitDeepSeekCoder = chain(
	isolate(oneOf(isNL)),
	isolate(spaceThen(isL)),
	isolate(spaceThen(isP)),
	isolate(runOf(isDeepSeekCJK)),
	isolate(oneOf(isN)),
)

// splitDeepSeekV3 is DeepSeek V3's \p{N}{1,3}, [deepseekV3CJK]+, then
// matchDeepSeekV3.
var splitDeepSeekV3 = chain(
	isolate(upTo(isN, 3)),
	isolate(runOf(isDeepSeekV3CJK)),
	isolate(matchDeepSeekV3),
)

// matchDeepSeekV3 is
// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Digits and other characters (controls, format characters) match none of
// it unless a letter follows.
func matchDeepSeekV3(s string, i int) int {
	r, n := runeAt(s, i)
	r2, _ := runeAt(s, i+n)
	switch {
	case isASCIIPS(r) && r2 >= 0 && isASCIILetter(r2):
		return runAt(s, i+n, isASCIILetter)
	case !isNL(r) && !isL(r) && !isPS(r) && r2 >= 0 && isLM(r2):
		return runAt(s, i+n, isLM)
	case isLM(r):
		return runAt(s, i, isLM)
	case isPS(r) || (r == ' ' && r2 >= 0 && isPS(r2)):
		j := i
		if r == ' ' {
			j += n
		}
		return runAt(s, runAt(s, j, isPS), isNL)
	case isSpace(r):
		return newlineWhitespace(s, i)
	}
	return i
}

// upper and lower are llama.cpp's stand-ins for [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
// and [\p{Ll}\p{Lm}\p{Lo}\p{M}] in the o200k and Tekken regexes,
// (?=[\p{L}])([^a-z]) and (?=[\p{L}])([^A-Z]): a letter that is not an
// ASCII lower (upper) case one. Marks are no letters there, and a letter
// past ASCII is both.
func upper(r rune) bool { return isL(r) && !(r >= 'a' && r <= 'z') }
func lower(r rune) bool { return isL(r) && !(r >= 'A' && r <= 'Z') }

// splitGPT4o is o200k's (GPT-4o, gpt-oss, Llama 4, MiniMax M2) regex as
// llama.cpp adapts it:
// [^\r\n\p{L}\p{N}]?upper*lower+contraction?|[^\r\n\p{L}\p{N}]?upper+lower*contraction?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitGPT4o(s string, emit func(string)) { splitO200k(s, 3, true, emit) }

// splitTekken is Tekken's (Mistral NeMo and later) regex as llama.cpp
// adapts it:
// [^\r\n\p{L}\p{N}]?upper*lower+|[^\r\n\p{L}\p{N}]?upper+lower*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitTekken(s string, emit func(string)) { splitO200k(s, 1, false, emit) }

func splitO200k(s string, maxDigits int, contractions bool, emit func(string)) {
	nlOrSlash := func(r rune) bool { return isNL(r) || r == '/' }
	for i := 0; i < len(s); {
		r, n := runeAt(s, i)
		j := i
		if !isNL(r) && !isL(r) && !isN(r) {
			// The optional lead; without it no word can start here.
			j = i + n
		}
		end := o200kWord(s, j)
		switch {
		case end > j:
			if contractions {
				end += contraction(s, end, true)
			}
		case isN(r):
			end = runUpTo(s, i, isN, maxDigits)
		case isOther(r) || (r == ' ' && j < len(s) && isOther(runeAtOr(s, j))):
			k := i
			if r == ' ' {
				k = j
			}
			end = runAt(s, runAt(s, k, isOther), nlOrSlash)
		default:
			end = newlineWhitespace(s, i)
		}
		emit(s[i:end])
		i = end
	}
}

// runeAtOr is the rune at i, -1 past the end.
func runeAtOr(s string, i int) rune {
	r, _ := runeAt(s, i)
	return r
}

// o200kWord matches upper*lower+ at j, else upper+lower*, and returns its
// end (j when neither matches). upper* is greedy and gives back letters
// one by one until lower+ can start: past a run of upper letters, lower+
// takes the lower case letters that follow, else the last letter of the
// run that is also lower (one past ASCII) ends the match.
func o200kWord(s string, j int) int {
	k := runAt(s, j, upper)
	if end := runAt(s, k, lower); end > k {
		return end
	}
	for q := k; q > j; {
		r, n := utf8.DecodeLastRuneInString(s[j:q])
		if lower(r) {
			return q
		}
		q -= n
	}
	return k
}
