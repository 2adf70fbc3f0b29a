package openai

import (
	"strconv"
	"unicode/utf8"
)

// Done is the event that ends every stream.
var Done = []byte("data: [DONE]\n\n")

// ChunkEncoder renders the server-sent events of one streaming response into
// a reused buffer, so the per-token path allocates nothing. Each method
// returns a complete event ("data: {…}\n\n") valid until the next call.
type ChunkEncoder struct {
	head  []byte // data: {"id":…,"object":…,"created":…,"model":…,"choices":
	chat  bool
	usage bool
	buf   []byte
}

// NewChunkEncoder prepares the events of one response. chat selects the
// chat.completion.chunk shape (delta) over text_completion (text);
// includeUsage makes every chunk carry "usage":null and enables Usage.
func NewChunkEncoder(id, model string, created int64, chat, includeUsage bool) *ChunkEncoder {
	obj := ObjectCompletion
	if chat {
		obj = ObjectChatChunk
	}
	h := make([]byte, 0, 96+len(id)+len(model))
	h = append(h, `data: {"id":`...)
	h = AppendJSONString(h, id)
	h = append(h, `,"object":"`...)
	h = append(h, obj...)
	h = append(h, `","created":`...)
	h = strconv.AppendInt(h, created, 10)
	h = append(h, `,"model":`...)
	h = AppendJSONString(h, model)
	h = append(h, `,"choices":`...)
	return &ChunkEncoder{head: h, chat: chat, usage: includeUsage, buf: make([]byte, 0, 512)}
}

// Role is the first chunk of a chat stream: the assistant role, no content.
func (e *ChunkEncoder) Role() []byte { return e.RoleOf(0) }

// Chunk is a content event of choice 0: text (possibly empty) and, on the
// last one, the finish reason ("" is null).
func (e *ChunkEncoder) Chunk(text []byte, finishReason string) []byte {
	return e.Choice(&ChoiceEvent{Text: text, FinishReason: finishReason})
}

// ChoiceEvent is one choice's part of a streaming chunk.
type ChoiceEvent struct {
	Index int
	Text  []byte
	// Reasoning is reasoning text (chat only): delta.reasoning_content and
	// delta.reasoning.
	Reasoning []byte
	// FinishReason is "" (null) but on the choice's last event.
	FinishReason string
	// Logprobs is the choice's "logprobs" value as JSON (nil: null).
	Logprobs []byte
	// StopReason is the "stop_reason" value as JSON (nil: left out).
	StopReason []byte
	// TokenIDs, when set, are sent as "token_ids" (return_token_ids).
	TokenIDs    []int32
	HasTokenIDs bool
}

// Role is the first chunk of a chat stream for choice index (Role is
// index 0).
func (e *ChunkEncoder) RoleOf(index int) []byte {
	b := append(e.buf[:0], e.head...)
	b = append(b, `[{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
	return e.end(b)
}

// Choice renders a content event.
func (e *ChunkEncoder) Choice(c *ChoiceEvent) []byte {
	b := append(e.buf[:0], e.head...)
	b = append(b, `[{"index":`...)
	b = strconv.AppendInt(b, int64(c.Index), 10)
	if e.chat {
		b = append(b, `,"delta":{`...)
		if len(c.Reasoning) > 0 {
			b = append(b, `"reasoning_content":`...)
			b = AppendJSONBytes(b, c.Reasoning)
			b = append(b, `,"reasoning":`...)
			b = AppendJSONBytes(b, c.Reasoning)
		}
		if len(c.Text) > 0 || (c.FinishReason == "" && len(c.Reasoning) == 0) {
			if len(c.Reasoning) > 0 {
				b = append(b, ',')
			}
			b = append(b, `"content":`...)
			b = AppendJSONBytes(b, c.Text)
		}
		b = append(b, '}')
	} else {
		b = append(b, `,"text":`...)
		b = AppendJSONBytes(b, c.Text)
	}
	b = append(b, `,"logprobs":`...)
	if c.Logprobs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, c.Logprobs...)
	}
	b = append(b, `,"finish_reason":`...)
	if c.FinishReason == "" {
		b = append(b, "null"...)
	} else {
		b = AppendJSONString(b, c.FinishReason)
	}
	if c.StopReason != nil {
		b = append(b, `,"stop_reason":`...)
		b = append(b, c.StopReason...)
	}
	if c.HasTokenIDs {
		b = append(b, `,"token_ids":[`...)
		for i, id := range c.TokenIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		b = append(b, ']')
	}
	b = append(b, "}]"...)
	return e.end(b)
}

// Usage is the last chunk when include_usage is set: no choices, the usage.
func (e *ChunkEncoder) Usage(u Usage) []byte {
	b := append(e.buf[:0], e.head...)
	b = append(b, `[],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	if u.PromptTokensDetails != nil {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CachedTokens), 10)
		b = append(b, '}')
	}
	b = append(b, "}}\n\n"...)
	e.buf = b
	return b
}

// Error is an in-stream error event (the status line was already sent), as
// vLLM sends one: data: {"error":{…}}. Done follows it.
func (e *ChunkEncoder) Error(err *Error) []byte {
	b := append(e.buf[:0], "data: "...)
	b = append(b, err.JSON()...)
	b = append(b, "\n\n"...)
	e.buf = b
	return b
}

func (e *ChunkEncoder) end(b []byte) []byte {
	if e.usage {
		b = append(b, `,"usage":null`...)
	}
	b = append(b, "}\n\n"...)
	e.buf = b
	return b
}

// AppendEvent appends a named server-sent event, "event: <name>" and one
// data line (data must hold no newline: JSON as encoding/json writes it),
// as the Responses and Anthropic streams name theirs.
func AppendEvent(b []byte, name string, data []byte) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string (see AppendJSONBytes).
func AppendJSONString(dst []byte, s string) []byte {
	return AppendJSONBytes(dst, []byte(s))
}

// AppendJSONBytes appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json writes it; U+2028 and U+2029 are escaped so the output is
// also valid JavaScript.
func AppendJSONBytes(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
