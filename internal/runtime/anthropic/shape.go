package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// Response is a Messages API reply.
type Response struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []ContentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        Usage          `json:"usage"`
}

// ContentBlock is a reply's thinking, text or tool_use block.
type ContentBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// Thinking and Signature make a thinking block. The signature is
	// empty: this server's reasoning is the model's own text, returned
	// as it was written, with nothing to verify.
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
}

// Usage is a reply's token accounting: InputTokens are the prompt tokens
// not read from the prefix cache, CacheReadInputTokens those that were, as
// far as the server reports cache reads (openai.Turn.CachedTokens; when it
// does not, 0 and every prompt token is an input token).
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// MessageShape renders one reply in the Messages API's shape: whole
// (Body) or as its event stream (Start, Text, Call, Finish, Fail). It
// serves one request.
type MessageShape struct {
	id, model string
	// index is the open content block's, -1 when none is open; next is
	// the index of the next block.
	index, next int
	open        string // the open block's type

	// OmitThinking: thinking.display is omitted, so thinking blocks
	// come without their text.
	OmitThinking bool
}

// NewMessageShape prepares the reply with the given id.
func NewMessageShape(id, model string) *MessageShape {
	return &MessageShape{id: id, model: model, index: -1}
}

func event(b []byte, typ string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil { // cannot happen: strings, numbers and the types above
		data = []byte(`{"type":"error","error":{"type":"api_error","message":"internal error"}}`)
	}
	return openai.AppendEvent(b, typ, data)
}

// Start implements the server's turnWriter: message_start (the prompt
// tokens as input_tokens until message_delta tells the cache reads) and
// a ping.
func (s *MessageShape) Start(b []byte, promptTokens int) []byte {
	msg := Response{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []ContentBlock{},
		Usage: Usage{InputTokens: promptTokens}}
	b = event(b, "message_start", map[string]any{"type": "message_start", "message": msg})
	return event(b, "ping", map[string]any{"type": "ping"})
}

// Text opens a text block on the first text and sends text_delta.
func (s *MessageShape) Text(b, delta []byte) []byte {
	if s.open != "text" {
		b = s.closeBlock(b)
		empty := ""
		b = s.openBlock(b, "text", ContentBlock{Type: "text", Text: &empty})
	}
	return s.delta(b, "text_delta", "text", delta)
}

// Reasoning opens a thinking block on the first reasoning and sends
// thinking_delta (none when the display is omitted).
func (s *MessageShape) Reasoning(b, delta []byte) []byte {
	if s.open != "thinking" {
		b = s.closeBlock(b)
		empty := ""
		b = s.openBlock(b, "thinking", ContentBlock{Type: "thinking", Thinking: &empty, Signature: &empty})
	}
	if s.OmitThinking {
		return b
	}
	return s.delta(b, "thinking_delta", "thinking", delta)
}

// delta appends a content_block_delta event of the open block, written
// by hand so that the token path allocates nothing.
func (s *MessageShape) delta(b []byte, kind, field string, text []byte) []byte {
	b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	b = strconv.AppendInt(b, int64(s.index), 10)
	b = append(b, `,"delta":{"type":"`...)
	b = append(b, kind...)
	b = append(b, `","`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = openai.AppendJSONBytes(b, text)
	return append(b, "}}\n\n"...)
}

// Call opens a tool_use block on a call's first piece and sends its
// argument fragments as input_json_delta.
func (s *MessageShape) Call(b []byte, d openai.ToolCallDelta) []byte {
	if d.First {
		b = s.closeBlock(b)
		b = s.openBlock(b, "tool_use", ContentBlock{Type: "tool_use", ID: d.ID, Name: d.Name, Input: json.RawMessage(`{}`)})
	}
	if d.Arguments == "" || s.open != "tool_use" {
		return b
	}
	return s.delta(b, "input_json_delta", "partial_json", []byte(d.Arguments))
}

func (s *MessageShape) openBlock(b []byte, typ string, block ContentBlock) []byte {
	s.index, s.open = s.next, typ
	s.next++
	return event(b, "content_block_start", map[string]any{"type": "content_block_start", "index": s.index, "content_block": block})
}

func (s *MessageShape) closeBlock(b []byte) []byte {
	if s.index < 0 {
		return b
	}
	b = event(b, "content_block_stop", map[string]any{"type": "content_block_stop", "index": s.index})
	s.index, s.open = -1, ""
	return b
}

// Finish closes the open block and ends the stream: message_delta with
// the stop reason and the usage, then message_stop.
func (s *MessageShape) Finish(b []byte, t *openai.Turn) []byte {
	b = s.closeBlock(b)
	reason, seq := stopReason(t)
	b = event(b, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": usage(t)})
	return event(b, "message_stop", map[string]any{"type": "message_stop"})
}

// Fail ends the stream with an error event.
func (s *MessageShape) Fail(b []byte, err *openai.Error) []byte {
	return event(b, "error", ErrorBody(err))
}

// Body is the whole reply: a thinking block (when the model reasoned), a
// text block (when there is text) and a tool_use block per call.
func (s *MessageShape) Body(t *openai.Turn) any {
	resp := Response{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []ContentBlock{}, Usage: usage(t)}
	if t.Reasoning != "" {
		thinking, sig := t.Reasoning, ""
		if s.OmitThinking {
			thinking = ""
		}
		resp.Content = append(resp.Content, ContentBlock{Type: "thinking", Thinking: &thinking, Signature: &sig})
	}
	if t.Content != "" {
		text := t.Content
		resp.Content = append(resp.Content, ContentBlock{Type: "text", Text: &text})
	}
	for _, c := range t.Calls {
		resp.Content = append(resp.Content, ContentBlock{Type: "tool_use", ID: c.ID, Name: c.Function.Name, Input: toolInput(c.Function.Arguments)})
	}
	resp.StopReason, resp.StopSequence = stopReason(t)
	return resp
}

// toolInput is a call's arguments as the input object Anthropic's
// clients expect; arguments that are not a JSON object (which the tool
// call reader does not produce) become the empty object.
func toolInput(args string) json.RawMessage {
	a := bytes.TrimSpace([]byte(args))
	if len(a) > 0 && a[0] == '{' && json.Valid(a) {
		return a
	}
	return json.RawMessage(`{}`)
}

// stopReason maps the finish: max_tokens (the limit cut the reply),
// tool_use (it called tools), stop_sequence (with the sequence), end_turn.
func stopReason(t *openai.Turn) (reason, seq *string) {
	r := "end_turn"
	switch {
	case t.Finish == "length":
		r = "max_tokens"
	case len(t.Calls) > 0:
		r = "tool_use"
	case t.StopMatched != "":
		r = "stop_sequence"
		m := t.StopMatched
		seq = &m
	}
	return &r, seq
}

func usage(t *openai.Turn) Usage {
	return Usage{InputTokens: t.PromptTokens - t.CachedTokens, OutputTokens: t.CompletionTokens,
		CacheReadInputTokens: t.CachedTokens}
}

// ErrorBody is err in Anthropic's error shape:
// {"type": "error", "error": {"type", "message"}}.
func ErrorBody(err *openai.Error) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": errorType(err.Status), "message": err.Message}}
}

// errorType is Anthropic's error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	return "api_error"
}
