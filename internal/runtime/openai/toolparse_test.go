package openai

import (
	"bytes"
	"testing"
)

// TestToolStreamerKeepsMarkupOut: a call the output limit cut before its
// name is the template's markup, never content (the reply then has
// neither text nor a call), however the output is cut into pieces; a
// bare JSON answer that is no call stays content.
func TestToolStreamerKeepsMarkupOut(t *testing.T) {
	for _, tc := range []struct {
		format, out, content string
	}{
		{ToolFormatHermes, "<tool_call>\n{\"name\":", ""},
		{ToolFormatHermes, "Let me look.\n<tool_call>\n{\"na", "Let me look."},
		{ToolFormatHermes, "<tool_call>", ""},
		{ToolFormatMistral, "[TOOL_CALLS] [{\"name\":", ""},
		{ToolFormatLlama3JSON, "<|python_tag|>{\"name\":", ""},
		{ToolFormatLlama3JSON, "{\"answer\": 42}", "{\"answer\": 42}"},
		{ToolFormatMistral, "[1, 2, 3]", "[1, 2, 3]"},
	} {
		for _, step := range []int{1, 4, len(tc.out)} {
			ts := NewToolStreamer(tc.format)
			var content []byte
			for i := 0; i < len(tc.out); i += step {
				c, ds := ts.Feed([]byte(tc.out[i:min(i+step, len(tc.out))]))
				content = append(content, c...)
				if len(ds) > 0 {
					t.Errorf("%s %q step %d: call pieces %+v", tc.format, tc.out, step, ds)
				}
			}
			c, ds, called := ts.Finish()
			content = append(content, c...)
			// Blanks before a marker stream before the marker is known.
			if called || len(ds) > 0 || string(bytes.TrimSpace(content)) != tc.content {
				t.Errorf("%s %q step %d: content %q, called %v; want content %q and no call", tc.format, tc.out, step, content, called, tc.content)
			}
		}
	}
}
