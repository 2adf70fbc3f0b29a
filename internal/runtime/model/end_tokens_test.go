package model

import (
	"slices"
	"testing"
)

// TestEndOfTurnTokens: the output format's end tokens join the family's
// (gpt-oss ends a turn at <|call|> or <|return|>, never at <|end|>, which
// ends one message of it).
func TestEndOfTurnTokens(t *testing.T) {
	const harmony = "{{- '<|start|>assistant<|channel|>final<|message|>' }}{{ '<|end|>' }}"
	end, notEnd := endOfTurnTokens(ChatTemplateFor(harmony, nil), harmony)
	if !slices.Contains(end, "<|call|>") || !slices.Contains(end, "<|return|>") || !slices.Equal(notEnd, []string{"<|end|>"}) {
		t.Errorf("harmony: end %q, not end %q; want <|call|> and <|return|>, not <|end|>", end, notEnd)
	}
	const qwen = "{{ '<|im_start|>assistant\\n' }}<tool_call>"
	end, notEnd = endOfTurnTokens(ChatTemplateFor(qwen, nil), qwen)
	if !slices.Equal(end, []string{"<|im_end|>", "<|endoftext|>"}) || notEnd != nil {
		t.Errorf("chatml: end %q, not end %q", end, notEnd)
	}
}
