package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chatSPM is a hand-numbered SentencePiece vocabulary for Llama-2/Mistral
// chat prompts; the expected ids below are read off this list.
//
//	0 <unk>   1 <s>    2 </s>   3 ▁
//	4 ▁H      5 ▁He    6 ▁Hel   7 ▁Hell   8 ▁Hello
//	9 ▁w     10 ▁wo   11 ▁wor  12 ▁worl  13 ▁world
//	14 ▁[    15 [     16 IN    17 INS    18 INST   19 ]
//	20 He    21 Hel   22 Hell  23 Hello
//	24 wo    25 wor   26 worl  27 world
//
// The '▁' chains outscore the bare ones, so "▁Hello" merges as ▁H, ▁He, …
// rather than through "He".
func chatSPM(t *testing.T, addSpacePrefix bool) *SPMTokenizer {
	t.Helper()
	tokens := []string{"<unk>", "<s>", "</s>", "▁",
		"▁H", "▁He", "▁Hel", "▁Hell", "▁Hello",
		"▁w", "▁wo", "▁wor", "▁worl", "▁world",
		"▁[", "[", "IN", "INS", "INST", "]",
		"He", "Hel", "Hell", "Hello",
		"wo", "wor", "worl", "world"}
	types := make([]int32, len(tokens))
	scores := make([]float32, len(tokens))
	for i, tok := range tokens {
		types[i], scores[i] = tokenNormal, -5
		if len(tok) > len("▁") && tok[:len("▁")] == "▁" {
			scores[i] = -1
		}
	}
	types[0], types[1], types[2] = tokenUnknown, tokenControl, tokenControl
	tok, err := NewSPMTokenizer(tokens, scores, types, 1, 0, true, addSpacePrefix)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestSPMSpacePrefixAfterSpecialTokens: the text after a special token
// gets the leading '▁' as well as the text at the start, as llama.cpp and
// the reference tokenizers encode Llama-2/Mistral chat prompts.
func TestSPMSpacePrefixAfterSpecialTokens(t *testing.T) {
	tok := chatSPM(t, true)
	for _, tc := range []struct {
		text   string
		addBOS bool
		want   []int32
	}{
		// <s> ▁[ INST ] ▁Hello
		{"<s>[INST] Hello", false, []int32{1, 14, 18, 19, 8}},
		// The same prompt with the BOS added rather than written out.
		{"[INST] Hello", true, []int32{1, 14, 18, 19, 8}},
		// ▁Hello </s> ▁ ▁world: the prefix plus the text's own space.
		{"Hello</s> world", false, []int32{8, 2, 3, 13}},
		// ▁Hello </s> ▁world
		{"Hello</s>world", false, []int32{8, 2, 13}},
		// <s> ▁Hello </s> <s> ▁[ INST ]: specials back to back add nothing.
		{"<s>Hello</s><s>[INST]", false, []int32{1, 8, 2, 1, 14, 18, 19}},
		// Text ending in a special token: no dangling prefix.
		{"Hello</s>", false, []int32{8, 2}},
	} {
		if diff := cmp.Diff(tc.want, tok.Encode(tc.text, tc.addBOS)); diff != "" {
			t.Errorf("Encode(%q, %v) (-want +got):\n%s", tc.text, tc.addBOS, diff)
		}
	}

	// Without add_space_prefix no run of text gets one.
	plain := chatSPM(t, false)
	// Hello </s> world ; [ INST ] ▁Hello
	for text, want := range map[string][]int32{
		"Hello</s>world": {23, 2, 27},
		"[INST] Hello":   {15, 18, 19, 8},
	} {
		if diff := cmp.Diff(want, plain.Encode(text, false)); diff != "" {
			t.Errorf("no prefix: Encode(%q) (-want +got):\n%s", text, diff)
		}
	}
}
