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
// matches stays a piece of its own); the regexes it runs through std::regex
// are written here as matchers of the same backtracking semantics, and the
// ones it hand-codes (GPT-2, Llama 3, Qwen 2, Qwen 3.5, Kimi K2) as splitters
// following that code.
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
	llama3 := func(s string, emit func(string)) { splitLlama3(s, 3, isL, emit) }
	add(preTokenizer{split: splitDefault}, "", "default")
	add(gpt2, "gpt-2", "phi-2", "gigachat", "a.x-4.0", "mellum", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4")
	add(preTokenizer{split: llama3, ignoreMerges: true, addBOS: true}, "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2")
	add(preTokenizer{split: llama3}, "dbrx", "smaug-bpe", "glm4", "chatglm-bpe")
	add(preTokenizer{split: func(s string, emit func(string)) { splitLlama3(s, 1, isL, emit) }},
		"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2")
	add(preTokenizer{split: func(s string, emit func(string)) { splitLlama3(s, 1, isLM, emit) }}, "qwen35")
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
// (maxDigits 1) and Qwen 3.5's (maxDigits 1, letter [\p{L}\p{M}])
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?letter+|\p{N}{1,maxDigits}| ?[^\s letter \p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(s string, maxDigits int, letter func(rune) bool, emit func(string)) {
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
			end = i
			for d := 0; d < maxDigits; d++ {
				c, cn := runeAt(s, end)
				if c < 0 || !isN(c) {
					break
				}
				end += cn
			}
		case other(r) || (r == ' ' && r2 >= 0 && other(r2)):
			j := i
			if r == ' ' {
				j = i + n
			}
			end = runAt(s, runAt(s, j, other), isNL)
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
			end = i
			for d := 0; d < 3 && end < len(s); d++ {
				c, cn := runeAt(s, end)
				if !isN(c) {
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
			end = newlineWhitespace(s, i)
		}
		emit(s[i:end])
		i = end
	}
}

// A matcher tries to match a pattern at byte offset i of s, calling k with
// each end the pattern can reach, in the order a backtracking regex engine
// (ECMAScript's, which llama.cpp's std::regex is) tries them, until k
// accepts one; it reports whether k did. s is one piece: llama.cpp runs
// each regex over one piece at a time, so $ and lookaheads stop at its end.
type matcher func(s string, i int, k func(int) bool) bool

// run matches min to max (max < 0: any number) characters of class,
// greedily: the longest run first, then each shorter one.
func run(class func(rune) bool, min, max int) matcher {
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

// one matches one character of class; opt(one(class)) is class?.
func one(class func(rune) bool) matcher { return run(class, 1, 1) }

// lit matches the text t.
func lit(t string) matcher {
	return func(s string, i int, k func(int) bool) bool {
		return strings.HasPrefix(s[i:], t) && k(i+len(t))
	}
}

// opt is m? (greedy: with m first).
func opt(m matcher) matcher {
	return func(s string, i int, k func(int) bool) bool { return m(s, i, k) || k(i) }
}

func seq(ms ...matcher) matcher {
	if len(ms) == 1 {
		return ms[0]
	}
	first, rest := ms[0], seq(ms[1:]...)
	return func(s string, i int, k func(int) bool) bool {
		return first(s, i, func(j int) bool { return rest(s, j, k) })
	}
}

func alt(ms ...matcher) matcher {
	return func(s string, i int, k func(int) bool) bool {
		for _, m := range ms {
			if m(s, i, k) {
				return true
			}
		}
		return false
	}
}

// notFollowedBy is the lookahead (?!m).
func notFollowedBy(m matcher) matcher {
	return func(s string, i int, k func(int) bool) bool {
		if m(s, i, func(int) bool { return true }) {
			return false
		}
		return k(i)
	}
}

// atEnd is $: the end of the piece.
func atEnd(s string, i int, k func(int) bool) bool { return i == len(s) && k(i) }

// isolate splits s as llama.cpp splits a piece by one regex (std::regex
// iterator): each leftmost match is a piece, and so is the text between
// matches.
func isolate(m matcher) pretokenizer {
	return func(s string, emit func(string)) {
		gap := 0
		for i := 0; i < len(s); {
			end := -1
			m(s, i, func(j int) bool { end = j; return true })
			if end > i {
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
	first, rest := passes[0], chain(passes[1:]...)
	return func(s string, emit func(string)) {
		first(s, func(piece string) { rest(piece, emit) })
	}
}

// ranges is a character class written as llama.cpp writes one between
// brackets ("A-Za-zµ"), for the regexes it matches code point by code point
// (std::wregex): there every whitespace character past ASCII stands for
// vertical tab, so none of them is in a class that lists it.
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
	return func(r rune) bool {
		if r > 0x7F && isSpace(r) {
			r = '\v'
		}
		for _, x := range rs {
			if r >= x[0] && r <= x[1] {
				return true
			}
		}
		return false
	}
}

func ascii(lo, hi rune) func(rune) bool { return func(r rune) bool { return r >= lo && r <= hi } }

func anyOf(chars string) func(rune) bool {
	return func(r rune) bool { return r < utf8.RuneSelf && strings.ContainsRune(chars, r) }
}

func not(f func(rune) bool) func(rune) bool { return func(r rune) bool { return !f(r) } }

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

// Matchers shared by the regexes below.
var (
	isDigit = ascii('0', '9')
	// contractionCI is (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]).
	contractionCI matcher = func(s string, i int, k func(int) bool) bool {
		n := contraction(s, i, true)
		return n > 0 && k(i+n)
	}
	// spaceTail is \s*[\r\n]+|\s+(?!\S)|\s+.
	spaceTail = alt(
		seq(run(isSpace, 0, -1), run(isNL, 1, -1)),
		seq(run(isSpace, 1, -1), notFollowedBy(one(not(isSpace)))),
		run(isSpace, 1, -1),
	)
)

// splitDefault is llama.cpp's default (tokenizer.ggml.pre unset or
// "default"): [\p{P}\$\+<=>\^~\|]+, then GPT-2's regex, \p{N}+ and
// [0-9][0-9][0-9].
var splitDefault = chain(
	isolate(run(or(isP, anyOf("$+<=>^~|")), 1, -1)),
	splitGPT2,
	isolate(run(isN, 1, -1)),
	isolate(run(isDigit, 3, 3)),
)

// splitFalcon is Falcon's [\p{P}\$\+<=>\^~\|`]+, GPT-2's regex,
// [0-9][0-9][0-9].
var splitFalcon = chain(
	isolate(run(or(isP, anyOf("$+<=>^~|`")), 1, -1)),
	splitGPT2,
	isolate(run(isDigit, 3, 3)),
)

// splitStarCoder is StarCoder's (and Refact's, Command R's …) \p{N}, then
// GPT-2's regex: every digit alone.
var splitStarCoder = chain(isolate(one(isN)), splitGPT2)

// The classes of the DeepSeek regexes that list code points, as
// src/llama-vocab.cpp writes them (escaped here so that no editor
// normalizes them: several are canonically equivalent to others).
const (
	deepseekLLMLetters = "A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943"
	deepseekLLMPunct   = "!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002"
	deepseekCJK        = "\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF"
	deepseekV3CJK      = "\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF"
)

// splitDeepSeekLLM is DeepSeek LLM's [\r\n], \s?[deepseekLLMLetters]+,
// \s?[deepseekLLMPunct]+, \s+$, [deepseekCJK]+, \p{N}+.
var splitDeepSeekLLM = chain(
	isolate(one(isNL)),
	isolate(seq(opt(one(isSpace)), run(ranges(deepseekLLMLetters), 1, -1))),
	isolate(seq(opt(one(isSpace)), run(ranges(deepseekLLMPunct), 1, -1))),
	isolate(seq(run(isSpace, 1, -1), atEnd)),
	isolate(run(ranges(deepseekCJK), 1, -1)),
	isolate(run(isN, 1, -1)),
)

// splitDeepSeekCoder is DeepSeek Coder's [\r\n], \s?\p{L}+, \s?\p{P}+,
// [deepseekCJK]+, \p{N}.
var splitDeepSeekCoder = chain(
	isolate(one(isNL)),
	isolate(seq(opt(one(isSpace)), run(isL, 1, -1))),
	isolate(seq(opt(one(isSpace)), run(isP, 1, -1))),
	isolate(run(ranges(deepseekCJK), 1, -1)),
	isolate(one(isN)),
)

// splitDeepSeekV3 is DeepSeek V3's \p{N}{1,3}, [deepseekV3CJK]+, then
// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
var splitDeepSeekV3 = chain(
	isolate(run(isN, 1, 3)),
	isolate(run(ranges(deepseekV3CJK), 1, -1)),
	isolate(alt(
		seq(one(or(ascii('!', '/'), ascii(':', '@'), ascii('[', '`'), ascii('{', '~'))), run(or(ascii('A', 'Z'), ascii('a', 'z')), 1, -1)),
		seq(opt(one(not(or(isNL, isL, isPS)))), run(isLM, 1, -1)),
		seq(opt(lit(" ")), run(isPS, 1, -1), run(isNL, 0, -1)),
		spaceTail,
	)),
)

// upper and lower are llama.cpp's stand-ins for [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
// and [\p{Ll}\p{Lm}\p{Lo}\p{M}] in the o200k and Tekken regexes,
// (?=[\p{L}])([^a-z]) and (?=[\p{L}])([^A-Z]): a letter that is not an
// ASCII lower (upper) case one. Marks are no letters there.
var (
	upper = func(r rune) bool { return isL(r) && !(r >= 'a' && r <= 'z') }
	lower = func(r rune) bool { return isL(r) && !(r >= 'A' && r <= 'Z') }
	// lead is [^\r\n\p{L}\p{N}].
	lead = not(or(isNL, isL, isN))
)

// splitGPT4o is o200k's (GPT-4o, gpt-oss, Llama 4, MiniMax M2) regex as
// llama.cpp adapts it:
// [^\r\n\p{L}\p{N}]?upper*lower+contraction?|[^\r\n\p{L}\p{N}]?upper+lower*contraction?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
var splitGPT4o = isolate(alt(
	seq(opt(one(lead)), run(upper, 0, -1), run(lower, 1, -1), opt(contractionCI)),
	seq(opt(one(lead)), run(upper, 1, -1), run(lower, 0, -1), opt(contractionCI)),
	run(isN, 1, 3),
	seq(opt(lit(" ")), run(isOther, 1, -1), run(anyOf("\r\n/"), 0, -1)),
	spaceTail,
))

// splitTekken is Tekken's (Mistral NeMo and later) regex as llama.cpp
// adapts it:
// [^\r\n\p{L}\p{N}]?upper*lower+|[^\r\n\p{L}\p{N}]?upper+lower*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
var splitTekken = isolate(alt(
	seq(opt(one(lead)), run(upper, 0, -1), run(lower, 1, -1)),
	seq(opt(one(lead)), run(upper, 1, -1), run(lower, 0, -1)),
	one(isN),
	seq(opt(lit(" ")), run(isOther, 1, -1), run(anyOf("\r\n/"), 0, -1)),
	spaceTail,
))
