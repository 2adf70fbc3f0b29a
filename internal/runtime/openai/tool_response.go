package openai

import (
	"encoding/json"
	"strconv"
)

// MarshalJSON writes content null for a message that only calls tools, as
// OpenAI does.
func (m ChatMessage) MarshalJSON() ([]byte, error) {
	type plain ChatMessage
	if m.Content == "" && (len(m.ToolCalls) > 0 || m.FunctionCall != nil) {
		return json.Marshal(struct {
			plain
			Content *string `json:"content"`
		}{plain: plain(m)})
	}
	return json.Marshal(plain(m))
}

// UnmarshalJSON accepts content null.
func (m *ChatMessage) UnmarshalJSON(b []byte) error {
	type plain ChatMessage
	var p struct {
		plain
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*m = ChatMessage(p.plain)
	if p.Content != nil {
		m.Content = *p.Content
	}
	return nil
}

// ToolCallChunk is a streaming event of choice index carrying tool-call
// pieces in delta.tool_calls (or, legacy, delta.function_call).
func (e *ChunkEncoder) ToolCallChunk(index int, deltas []ToolCallDelta, legacy bool) []byte {
	b := append(e.buf[:0], e.head...)
	b = append(b, `[{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"delta":{`...)
	if legacy {
		// One call only: the name, then argument fragments.
		b = append(b, `"function_call":{`...)
		first := true
		for _, d := range deltas {
			if d.First {
				b = append(b, `"name":`...)
				b = AppendJSONString(b, d.Name)
				first = false
			}
		}
		if !first {
			b = append(b, ',')
		}
		b = append(b, `"arguments":`...)
		var args []byte
		for _, d := range deltas {
			args = append(args, d.Arguments...)
		}
		b = AppendJSONBytes(b, args)
		b = append(b, '}')
	} else {
		b = append(b, `"tool_calls":[`...)
		for i, d := range deltas {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(d.Index), 10)
			if d.First {
				b = append(b, `,"id":`...)
				b = AppendJSONString(b, d.ID)
				b = append(b, `,"type":"function","function":{"name":`...)
				b = AppendJSONString(b, d.Name)
				b = append(b, `,"arguments":`...)
			} else {
				b = append(b, `,"function":{"arguments":`...)
			}
			b = AppendJSONString(b, d.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
	return e.end(b)
}
