package model

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var roundTripTexts = []string{
	"", "hello", "Hello, world!", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n",
	"héllo wörld", "日本語のテキスト", "emoji 👍🏽 and 🇫🇷", "it's we'll I'M", "12345 67.8e9",
	"mixed\u00a0nbsp", "\x00\x01 control bytes",
}

func randomUTF8(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(40) {
		switch rng.IntN(4) {
		case 0:
			b.WriteByte(byte(' ' + rng.IntN(95)))
		case 1:
			b.WriteRune(rune(0xa0 + rng.IntN(0x700)))
		case 2:
			b.WriteRune(rune(0x3040 + rng.IntN(0x60)))
		default:
			b.WriteRune(rune(0x1f600 + rng.IntN(0x40)))
		}
	}
	return b.String()
}

// testBPE is a byte-level vocabulary with a few merges on top of the bytes.
func testBPE(t *testing.T, merges []string, specials ...string) *BPETokenizer {
	t.Helper()
	var tokens []string
	var types []int32
	for b := range 256 {
		tokens = append(tokens, string(byteToRune[b]))
		types = append(types, tokenNormal)
	}
	for _, m := range merges {
		tokens = append(tokens, strings.ReplaceAll(m, " ", ""))
		types = append(types, tokenNormal)
	}
	for _, s := range specials {
		tokens = append(tokens, s)
		types = append(types, tokenControl)
	}
	tok, err := NewBPETokenizer(tokens, types, merges, -1, false, "gpt-2")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func pieces(tok Tokenizer, ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(tok.TokenBytes(id))
	}
	return out
}

func TestUTF8RoundTrip(t *testing.T) {
	spm := testSPM(t)
	for name, tok := range map[string]Tokenizer{
		"byte": NewByteTokenizer(300),
		"bpe":  testBPE(t, []string{"h e", "l l", "he ll", "Ġ w", "o r"}),
		"spm":  spm,
	} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			texts := append([]string(nil), roundTripTexts...)
			for range 200 {
				texts = append(texts, randomUTF8(rng))
			}
			for _, s := range texts {
				ids := tok.Encode(s, false)
				if got := tok.Decode(ids); got != s {
					t.Errorf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
				}
				var streamed []byte
				for _, id := range ids {
					streamed = append(streamed, tok.TokenBytes(id)...)
				}
				if name != "spm" && string(streamed) != s {
					t.Errorf("concatenated TokenBytes of %q = %q", s, streamed)
				}
				for _, id := range ids {
					if id < 0 || int(id) >= tok.VocabSize() {
						t.Fatalf("Encode(%q) gave id %d outside the vocabulary", s, id)
					}
				}
			}
		})
	}
}

func TestByteTokenizer(t *testing.T) {
	tok := NewByteTokenizer(ByteVocabSize)
	got := tok.Encode("hé</s>", true)
	want := []int32{ByteBOS, 'h', 0xc3, 0xa9, ByteEOS}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Encode (-want +got):\n%s", diff)
	}
	if b := tok.TokenBytes(ByteEOS); len(b) != 0 {
		t.Errorf("EOS renders as %q", b)
	}
	if b := tok.TokenBytes(0xa9); string(b) != "\xa9" {
		t.Errorf("byte 0xa9 renders as %q", b)
	}
}

func TestBPEMergesInRankOrder(t *testing.T) {
	for _, tc := range []struct {
		merges []string
		text   string
		want   []string
	}{
		// "b c" outranks "a b": abc → a + bc, though a+b comes first in the text.
		{[]string{"b c", "a b"}, "abc", []string{"a", "bc"}},
		{[]string{"a b", "b c"}, "abc", []string{"ab", "c"}},
		// Merges build on merges, in rank order.
		{[]string{"a b", "ab c", "c d"}, "abcd", []string{"abc", "d"}},
		{[]string{"c d", "a b", "ab c"}, "abcd", []string{"ab", "cd"}},
		// Equal pairs merge left to right.
		{[]string{"a a"}, "aaa", []string{"aa", "a"}},
		{[]string{"a a", "aa aa"}, "aaaaa", []string{"aaaa", "a"}},
		// Merges never cross pre-tokenizer pieces: "b" and " c" are two words.
		{[]string{"b Ġ", "a b"}, "ab c", []string{"ab", " ", "c"}},
		{[]string{"Ġ c", "a b"}, "ab c", []string{"ab", " c"}},
	} {
		tok := testBPE(t, tc.merges)
		got := pieces(tok, tok.Encode(tc.text, false))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("merges %q, %q (-want +got):\n%s", tc.merges, tc.text, diff)
		}
	}
}

func TestBPESpecialTokens(t *testing.T) {
	tok := testBPE(t, []string{"h i"}, "<|im_start|>", "<|im_end|>", "<|im")
	ids := tok.Encode("<|im_start|>hi<|im_end|>\n<|im", false)
	want := []string{"", "hi", "", "\n", ""}
	if diff := cmp.Diff(want, pieces(tok, ids)); diff != "" {
		t.Errorf("pieces (-want +got):\n%s", diff)
	}
	if id, _ := tok.tokenID("<|im_start|>"); ids[0] != id {
		t.Errorf("first token %d, want <|im_start|> (%d)", ids[0], id)
	}
	if id, _ := tok.tokenID("<|im"); ids[4] != id {
		t.Errorf("last token %d, want <|im (%d)", ids[4], id)
	}
}

func TestPretokenizers(t *testing.T) {
	for _, tc := range []struct {
		pre, text string
		want      []string
	}{
		{"gpt-2", "Hello world", []string{"Hello", " world"}},
		{"gpt-2", "it's   3 dogs!!\n\nok ", []string{"it", "'s", "  ", " 3", " dogs", "!!", "\n", "\n", "ok", " "}},
		{"gpt-2", "a\n b", []string{"a", "\n", " b"}},
		{"gpt-2", "x  \ty", []string{"x", "  ", "\t", "y"}},
		{"gpt-2", "ümlaut 123456", []string{"ümlaut", " 123456"}},
		{"llama-bpe", "Hello world", []string{"Hello", " world"}},
		{"llama-bpe", "IT'S 1234567", []string{"IT", "'S", " ", "123", "456", "7"}},
		{"llama-bpe", "(x) .\n\nnext  \n end", []string{"(x", ")", " .\n\n", "next", "  \n", " end"}},
		{"llama-bpe", "a\tb  ", []string{"a", "\tb", "  "}},
		{"qwen2", "12 ab", []string{"1", "2", " ab"}},
	} {
		var got []string
		preTokenizers[tc.pre].split(tc.text, func(s string) { got = append(got, s) })
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %q (-want +got):\n%s", tc.pre, tc.text, diff)
		}
	}
}

func TestPretokenizersCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, pre := range slices.Sorted(maps.Keys(preTokenizers)) {
		p := preTokenizers[pre]
		for range 300 {
			s := randomUTF8(rng) + strings.Repeat(" \n", rng.IntN(3))
			var b strings.Builder
			p.split(s, func(p string) {
				if p == "" {
					t.Fatalf("%s: empty piece in %q", pre, s)
				}
				b.WriteString(p)
			})
			if b.String() != s || !utf8.ValidString(s) {
				t.Fatalf("%s: pieces of %q join to %q", pre, s, b.String())
			}
		}
	}
}

// testSPM is a small SentencePiece vocabulary: specials, byte tokens and a
// few scored pieces.
func testSPM(t *testing.T) *SPMTokenizer {
	t.Helper()
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{tokenUnknown, tokenControl, tokenControl}
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, tokenByte)
	}
	scored := map[string]float32{
		"▁": -1, "h": -2, "e": -2, "l": -2, "o": -2, "w": -2, "r": -2, "d": -2,
		"he": -3, "ll": -2.5, "llo": -4, "hello": -5, "▁hello": -1.5, "▁w": -3, "or": -3, "▁wor": -4, "ld": -3, "▁world": -2,
		"lo": -10,
	}
	scores := make([]float32, len(tokens))
	for tok, s := range scored {
		tokens = append(tokens, tok)
		types = append(types, tokenNormal)
		scores = append(scores, s)
	}
	tok, err := NewSPMTokenizer(tokens, scores, types, 1, 0, true, true)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSPM(t *testing.T) {
	tok := testSPM(t)
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"hello world", []string{" hello", " world"}},
		// "ll" (-2.5) merges before "lo" (-10); then "llo", "he", "hello".
		{"hello", []string{" hello"}},
		// Byte fallback: 'é' and 'x' are not pieces.
		{"hé", []string{" ", "h", "\xc3", "\xa9"}},
		{"x", []string{" ", "x"}},
		{"<s>hello", []string{"", " hello"}}, // a special token starts a new run of text
	} {
		got := pieces(tok, tok.Encode(tc.text, false))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.text, diff)
		}
	}
	ids := tok.Encode("x", true)
	if ids[0] != 1 {
		t.Errorf("Encode with BOS starts with %d", ids[0])
	}
	if id, _ := tok.tokenID("<0x78>"); ids[2] != id {
		t.Errorf("'x' encoded as %d, want byte token <0x78> (%d)", ids[2], id)
	}
	if got := tok.Decode(tok.Encode("hé world", true)); got != "hé world" {
		t.Errorf("Decode = %q", got)
	}
}

func TestChatTemplates(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: " Hi! "}}
	if got, want := (ChatML{}).Apply(msgs, true),
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi! <|im_end|>\n<|im_start|>assistant\n"; got != want {
		t.Errorf("ChatML:\n got %q\nwant %q", got, want)
	}
	if got, want := (Llama3{}).Apply(msgs, false),
		"<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"; got != want {
		t.Errorf("Llama3:\n got %q\nwant %q", got, want)
	}
	llamaVocab := testBPE(t, nil, "<|start_header_id|>")
	for _, tc := range []struct {
		source string
		tok    Tokenizer
		want   string
	}{
		{chatMLSource, llamaVocab, "chatml"},
		{llama3Source, NewByteTokenizer(300), "llama3"},
		{"{{ weird }}", llamaVocab, "llama3"},
		{"", NewByteTokenizer(300), "chatml"},
	} {
		if got := ChatTemplateFor(tc.source, tc.tok).Name(); got != tc.want {
			t.Errorf("ChatTemplateFor(%.30q) = %s, want %s", tc.source, got, tc.want)
		}
	}
}
