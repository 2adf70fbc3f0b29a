package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPreTokenizerTables holds the pre-tokenizers that llama.cpp's models/
// has no vocabulary for (o200k, Tekken, GLM-4, DeepSeek V3, Kimi K2,
// MiniMax M2, Seed-Coder, Ling), and a few that it has, to splits read off
// their regexes: contractions, digit groups, CJK, case changes, marks,
// punctuation runs, whitespace before newlines. The expected pieces were
// checked with hack/pretokenize-oracle.py (Python's regex module running
// llama.cpp's regex lists; Kimi K2 its hand-coded split transcribed), e.g.
//
//	hack/pretokenize-oracle.py gpt-4o '"path/to/file.go:12 -- ok/\n"'
func TestPreTokenizerTables(t *testing.T) {
	for _, tc := range []struct {
		pre, text string
		want      []string
	}{
		{"gpt-4o", "Hello WORLD HELLOworld helloWorld", []string{"Hello", " WORLD", " HELLOworld", " hello", "World"}},
		{"gpt-4o", "I'm sure THEY'LL say 'RE we're", []string{"I'm", " sure", " THEY'LL", " say", " '", "RE", " we're"}},
		{"gpt-4o", "1234567 3.14 x2", []string{"123", "456", "7", " ", "3", ".", "14", " x", "2"}},
		{"gpt-4o", "中文字符 and カタカナ", []string{"中文字符", " and", " カタカナ"}},
		{"gpt-4o", "foo(); // done!!\n\n  next\t\n", []string{"foo", "();", " //", " done", "!!\n\n", " ", " next", "\t\n"}},
		{"gpt-4o", "path/to/file.go:12 -- ok/\n", []string{"path", "/to", "/file", ".go", ":", "12", " --", " ok", "/\n"}},
		{"gpt-4o", "  trailing  \n  \n x", []string{" ", " trailing", "  \n  \n", " x"}},
		{"gpt-4o", "ÀB Éé café\u0301 naïve", []string{"À", "B", " Éé", " café", "\u0301", " naïve"}},
		{"gpt-4o", "emoji 🦙🦙 ✅!", []string{"emoji", " 🦙🦙", " ✅!"}},
		{"tekken", "Hello WORLD HELLOworld helloWorld", []string{"Hello", " WORLD", " HELLOworld", " hello", "World"}},
		{"tekken", "I'm sure THEY'LL say", []string{"I", "'m", " sure", " THEY", "'LL", " say"}},
		{"tekken", "1234567 3.14", []string{"1", "2", "3", "4", "5", "6", "7", " ", "3", ".", "1", "4"}},
		{"tekken", "foo(); // done!!\n\n  next\t\n", []string{"foo", "();", " //", " done", "!!\n\n", " ", " next", "\t\n"}},
		{"tekken", "a/b/\n c", []string{"a", "/b", "/\n", " c"}},
		{"tekken", "中文 カタカナ café\u0301", []string{"中文", " カタカナ", " café", "\u0301"}},
		{"glm4", "Hello WORLD I'M it's 1234567", []string{"Hello", " WORLD", " I", "'M", " it", "'s", " ", "123", "456", "7"}},
		{"glm4", "中文字符 (x) .\n\nnext  \n end", []string{"中文字符", " (", "x", ")", " .\n\n", "next", "  \n", " end"}},
		{"glm4", "a\tb  ??!\r\n", []string{"a", "\tb", " ", " ??!\r\n"}},
		{"deepseek-v3", "Hello world, it's 1234567!", []string{"Hello", " world", ",", " it", "'s", " ", "123", "456", "7", "!"}},
		{"deepseek-v3", "中文字符カタカナひらがな한국어", []string{"中文字符カタカナひらがな", "한국어"}},
		{"deepseek-v3", "foo.bar(x) .Net #include <x>", []string{"foo", ".bar", "(x", ")", " .", "Net", " #", "include", " <", "x", ">"}},
		{"deepseek-v3", "  a\n\n  b \n", []string{" ", " a", "\n\n", " ", " b", " \n"}},
		{"deepseek-v3", "café\u0301 ñ 3.14159", []string{"café\u0301", " ñ", " ", "3", ".", "141", "59"}},
		{"kimi-k2", "Hello WORLD HELLOworld", []string{"Hello", " WORLD", " HELLOworld"}},
		{"kimi-k2", "I'm sure THEY'LL say 'RE", []string{"I'm", " sure", " THEY'LL", " say", " '", "RE"}},
		{"kimi-k2", "中文字符mixed中English", []string{"中文字符", "mixed", "中", "English"}},
		{"kimi-k2", "1234567 ok", []string{"123", "456", "7", " ok"}},
		{"kimi-k2", "(中) x!!\n\n  y \n", []string{"(", "中", ")", " x", "!!\n\n", " ", " y", " \n"}},
		{"kimi-k2", "café\u0301 naïve", []string{"café", "\u0301", " naïve"}},
		{"minimax-m2", "Hello WORLD I'll 12345 a/b/\n", []string{"Hello", " WORLD", " I'll", " ", "123", "45", " a", "/b", "/\n"}},
		{"seed-coder", "foo(); // done!!\n\n  next\t\n", []string{"foo", "();", " //", " done", "!!", "\n\n", " ", " next", "\t\n"}},
		{"seed-coder", "I'M it's 1234 x", []string{"I", "'M", " it", "'s", " ", "1", "2", "3", "4", " x"}},
		{"bailingmoe", "foo(); // done!!\n\n  next \r\n\t x", []string{"foo", "();", " //", " done", "!!\n\n", " ", " next", " \r\n", "\t", " x"}},
		{"bailingmoe", "I'M it'S 12 WE'LL", []string{"I", "'M", " it", "'S", " ", "1", "2", " WE", "'LL"}},
		{"deepseek-llm", "Hello world!! 你好，世界 123\n", []string{"Hello", " world", "!!", " ", "你好", "，", "世界", " ", "123", "\n"}},
		{"deepseek-llm", "Ωmega ΐ ǅ  \n", []string{"Ω", "mega", " ΐ", " ǅ", "  ", "\n"}},
		{"deepseek-coder", "def f(x):\n    return x**2 # 平方 12", []string{"def", " f", "(", "x", "):", "\n", "   ", " return", " x", "**", "2", " #", " ", "平方", " ", "1", "2"}},
		{"falcon", "x = a+b; y <= 1000000 `q`", []string{"x", " ", "=", " a", "+", "b", ";", " y", " ", "<=", " ", "100", "000", "0", " ", "`", "q", "`"}},
		{"default", "x = a+b; 12345678 (ok)", []string{"x", " ", "=", " a", "+", "b", ";", " ", "123", "456", "78", " ", "(", "ok", ")"}},
		{"starcoder", "v1.23 release 2024", []string{"v", "1", ".", "2", "3", " release", " ", "2", "0", "2", "4"}},
	} {
		p, err := lookupPreTokenizer(tc.pre)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		p.split(tc.text, func(s string) { got = append(got, s) })
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %q (-want +got):\n%s", tc.pre, tc.text, diff)
		}
	}
}
