package openai

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAppendJSONBytesMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " backslash \`, "nl\n cr\r tab\t", "\x00\x01\x1f\x7f", "héllo wörld ✓ 🚀",
		"bad \xff\xfe utf8", "split \xe2\x82", "line\u2028sep\u2029", "<html>&amp;",
	} {
		got := AppendJSONBytes(nil, []byte(s))
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s is not a JSON string: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q: decodes to %q, encoding/json's to %q", s, back, wantBack)
		}
	}
}

func dataJSON(t *testing.T, event []byte, v any) {
	t.Helper()
	s := string(event)
	if !strings.HasPrefix(s, "data: ") || !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("not an SSE data event: %q", s)
	}
	dec := json.NewDecoder(strings.NewReader(strings.TrimSuffix(strings.TrimPrefix(s, "data: "), "\n\n")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("event %q: %v", s, err)
	}
}

func TestChunkEncoderCompletion(t *testing.T) {
	e := NewChunkEncoder("cmpl-1", `m"odel`, 42, false, true)
	var c CompletionResponse
	dataJSON(t, e.Chunk([]byte("hi\n"), ""), &c)
	want := CompletionResponse{ID: "cmpl-1", Object: ObjectCompletion, Created: 42, Model: `m"odel`,
		Choices: []CompletionChoice{{Text: "hi\n"}}}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	c = CompletionResponse{}
	dataJSON(t, e.Chunk(nil, "length"), &c)
	if fr := c.Choices[0].FinishReason; fr == nil || *fr != "length" {
		t.Errorf("finish_reason %v, want length", fr)
	}
	c = CompletionResponse{}
	dataJSON(t, e.Usage(Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, PromptTokensDetails: &PromptTokensDetails{CachedTokens: 2}}), &c)
	if d := cmp.Diff(&Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, PromptTokensDetails: &PromptTokensDetails{CachedTokens: 2}}, c.Usage); d != "" || len(c.Choices) != 0 {
		t.Errorf("usage chunk: choices %v, usage (-want +got):\n%s", c.Choices, d)
	}
}

func TestChunkEncoderChat(t *testing.T) {
	e := NewChunkEncoder("chatcmpl-1", "m", 1, true, false)
	var c ChatChunk
	dataJSON(t, e.Role(), &c)
	if c.Object != ObjectChatChunk || c.Choices[0].Delta.Role != "assistant" {
		t.Errorf("role chunk %+v", c)
	}
	c = ChatChunk{}
	dataJSON(t, e.Chunk([]byte("x"), ""), &c)
	if got := c.Choices[0].Delta.Content; got == nil || *got != "x" || c.Choices[0].FinishReason != nil {
		t.Errorf("content chunk %+v", c)
	}
	c = ChatChunk{}
	ev := e.Chunk(nil, "stop")
	dataJSON(t, ev, &c)
	if c.Choices[0].Delta.Content != nil || *c.Choices[0].FinishReason != "stop" {
		t.Errorf("finish chunk %s", ev)
	}
	if bytes.Contains(ev, []byte("usage")) {
		t.Errorf("usage field without include_usage: %s", ev)
	}
}

func TestChunkEncoderAllocatesNothing(t *testing.T) {
	e := NewChunkEncoder("cmpl-1", "m", 1, true, true)
	text := []byte(" token")
	e.Chunk(text, "")
	if n := testing.AllocsPerRun(100, func() { e.Chunk(text, "") }); n != 0 {
		t.Errorf("Chunk allocates %v times per event", n)
	}
}

func BenchmarkChunkEncoder(b *testing.B) {
	e := NewChunkEncoder("chatcmpl-0123456789abcdef", "llama-3.1-8b", 1700000000, true, true)
	text := []byte(" cache")
	b.ReportAllocs()
	for b.Loop() {
		e.Chunk(text, "")
	}
}
