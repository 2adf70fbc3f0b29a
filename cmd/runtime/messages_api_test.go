package main_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/anthropic"
)

// refused requires a 400 in Anthropic's shape whose message names field.
func (p *pod) refused(t *testing.T, path, body, field string) {
	t.Helper()
	status, b := p.post(t, path, body)
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || status != http.StatusBadRequest || e.Type != "error" ||
		e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, field) {
		t.Errorf("POST %s %.200q: %d %s; want a 400 naming %s", path, body, status, b, field)
	}
}

// TestMessagesEndToEnd runs the Messages API of the runtime binary: what
// a request means is what the pod does (prefill, structured output) or a
// 400 naming the field, as chat answers the same.
func TestMessagesEndToEnd(t *testing.T) {
	p := startPod(t)

	t.Run("prefill is continued", func(t *testing.T) {
		const msgs = `[{"role":"user","content":"x"},{"role":"assistant","content":"The answer is"}]`
		var count struct {
			InputTokens int `json:"input_tokens"`
		}
		p.postJSON(t, "/v1/messages/count_tokens", `{"messages":`+msgs+`}`, &count)
		var tok struct {
			Count     int      `json:"count"`
			TokenStrs []string `json:"token_strs"`
		}
		p.postJSON(t, "/tokenize", `{"messages":`+msgs+`,"continue_final_message":true,"add_generation_prompt":false,"return_token_strs":true}`, &tok)
		if prompt := strings.Join(tok.TokenStrs, ""); count.InputTokens != tok.Count || !strings.HasSuffix(prompt, "assistant\nThe answer is") {
			t.Errorf("count_tokens %d; the prompt continuing the assistant's text has %d tokens:\n%s", count.InputTokens, tok.Count, prompt)
		}
		// Greedy: the reply is the continuation chat's continue_final_message
		// generates, and nothing else.
		var msg anthropic.Response
		p.postJSON(t, "/v1/messages", `{"max_tokens":8,"temperature":0,"messages":`+msgs+`}`, &msg)
		var chat struct {
			Choices []struct {
				Message struct{ Content string }
			}
		}
		p.postJSON(t, "/v1/chat/completions", `{"max_tokens":8,"temperature":0,"continue_final_message":true,"add_generation_prompt":false,"messages":`+msgs+`}`, &chat)
		if len(msg.Content) != 1 || *msg.Content[0].Text != chat.Choices[0].Message.Content || msg.Usage.InputTokens != tok.Count {
			t.Errorf("reply %+v (%d input tokens); chat continues with %q from %d", msg.Content, msg.Usage.InputTokens, chat.Choices[0].Message.Content, tok.Count)
		}
	})

	t.Run("output format is enforced", func(t *testing.T) {
		const format = `{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}`
		for _, format := range []string{`"output_format":` + format, `"output_config":{"format":` + format + `}`} {
			var msg anthropic.Response
			p.postJSON(t, "/v1/messages", `{"max_tokens":60,"temperature":0,"messages":[{"role":"user","content":"hi"}],`+format+`}`, &msg)
			var out map[string]json.Number
			dec := json.NewDecoder(strings.NewReader(*msg.Content[0].Text))
			dec.UseNumber()
			if err := dec.Decode(&out); err != nil || len(out) != 1 || *msg.StopReason != "end_turn" {
				t.Errorf("%s: reply %q (%s): %v", format, *msg.Content[0].Text, *msg.StopReason, err)
			} else if _, err := out["a"].Int64(); err != nil {
				t.Errorf("%s: a = %q", format, out["a"])
			}
		}
		p.refused(t, "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_format":{"type":"json_schema","schema":{"type":"array","uniqueItems":true}}}`,
			"output_format.schema")
		p.refused(t, "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}`, "context_management.edits[0].type")
	})

	t.Run("invalid UTF-8", func(t *testing.T) {
		for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
			p.refused(t, path, "{\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", "messages[0].content")
			p.refused(t, path, "{\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"program_id\":\"a\xffb\"}", "program_id")
		}
	})

	t.Run("tool_result answers a call", func(t *testing.T) {
		p.refused(t, "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope","content":"r"}]}]}`,
			"messages[1].content[0].tool_use_id")
		p.refused(t, "/v1/messages", `{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1,2]}]},{"role":"user","content":"q"}]}`,
			"messages[0].content[0].input")
		stops, _ := json.Marshal(make([]string, 300))
		p.refused(t, "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"q"}],"stop_sequences":`+strings.ReplaceAll(string(stops), `""`, `"s"`)+`}`,
			"stop_sequences")
	})

	t.Run("a forced call cut by max_tokens is no text", func(t *testing.T) {
		body := `{"max_tokens":20,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"any"},` +
			`"tools":[{"name":"get_w","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
		var msg anthropic.Response
		p.postJSON(t, "/v1/messages", body+`}`, &msg)
		if len(msg.Content) != 0 || *msg.StopReason != "max_tokens" {
			t.Errorf("reply %+v, stop_reason %s; want no content, max_tokens", msg.Content, *msg.StopReason)
		}
		status, stream := p.post(t, "/v1/messages", body+`,"stream":true}`)
		if status != http.StatusOK || bytes.Contains(stream, []byte("content_block_start")) || !bytes.Contains(stream, []byte(`"stop_reason":"max_tokens"`)) {
			t.Errorf("stream: %d %s", status, stream)
		}
	})
}
