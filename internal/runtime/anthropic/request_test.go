package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

func TestChatRequest(t *testing.T) {
	call := func(id, name, args string) openai.ToolCall {
		return openai.ToolCall{ID: id, Type: "function", Function: openai.ToolCallFunction{Name: name, Arguments: args}}
	}
	msg := func(role, text string) openai.Message {
		return openai.Message{Role: role, Content: openai.Content{Text: text}}
	}
	tests := []struct {
		name, body string
		want       []openai.Message
	}{
		{"tool_choice auto without tools", `{"max_tokens":1,"tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"hi"}]}`,
			[]openai.Message{msg("user", "hi")}},
		{"system string", `{"max_tokens":1,"system":"sys","messages":[{"role":"user","content":"hi"}]}`,
			[]openai.Message{msg("system", "sys"), msg("user", "hi")}},
		{"system blocks and text blocks joined with newlines", `{"max_tokens":1,"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"c"},{"type":"text","text":"d","cache_control":{"type":"ephemeral"}}]}]}`,
			[]openai.Message{msg("system", "a\nb"), msg("user", "c\nd")}},
		{"tool use and results", `{"max_tokens":1,"messages":[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"t1","name":"f","input":{"x":1}},{"type":"tool_use","id":"t2","name":"g","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r1"},{"type":"tool_result","tool_use_id":"t2","is_error":true,` +
			`"content":[{"type":"text","text":"boom"}]},{"type":"text","text":"and now?"}]}]}`,
			[]openai.Message{msg("user", "go"), {Role: "assistant", Content: openai.Content{Text: "calling"}, ToolCalls: []openai.ToolCall{call("t1", "f", `{"x":1}`), call("t2", "g", "{}")}},
				{Role: "tool", ToolCallID: "t1", Content: openai.Content{Text: "r1"}}, {Role: "tool", ToolCallID: "t2", Content: openai.Content{Text: "Error: boom"}},
				msg("user", "and now?")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			c, err := r.ChatRequest()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.Messages); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if _, err := c.ToolFields.Resolve(); err != nil {
				t.Errorf("tool fields: %v", err)
			}
		})
	}
}

// TestCacheSalt: cache_salt is the chat request's, checked as chat checks
// it.
func TestCacheSalt(t *testing.T) {
	r, err := Parse([]byte(`{"max_tokens":1,"cache_salt":"s","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c, apiErr := r.ChatRequest()
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	if c.Salt() != "s" {
		t.Errorf("salt %q; want s", c.Salt())
	}
	r, err = Parse([]byte(`{"max_tokens":1,"cache_salt":"","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ChatRequest(); err == nil || err.Param != "cache_salt" {
		t.Errorf("empty cache_salt: %v; want a 400 naming cache_salt", err)
	}
}

func TestToolChoice(t *testing.T) {
	tools := `"tools":[{"name":"f","input_schema":{"type":"object"}}]`
	for _, tc := range []struct{ choice, want string }{
		{`{"type":"auto"}`, openai.ToolChoiceAuto},
		{`{"type":"any"}`, openai.ToolChoiceRequired},
		{`{"type":"tool","name":"f"}`, openai.ToolChoiceNamed},
		{`{"type":"none"}`, openai.ToolChoiceNone},
	} {
		r, err := Parse([]byte(`{"max_tokens":1,"messages":[{"role":"user","content":"x"}],` + tools + `,"tool_choice":` + tc.choice + `}`))
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.ChatRequest()
		if err != nil {
			t.Fatal(err)
		}
		plan, err := c.ToolFields.Resolve()
		if err != nil || plan.Choice != tc.want {
			t.Errorf("tool_choice %s: plan %+v, %v; want %s", tc.choice, plan, err, tc.want)
		}
	}
}

func TestStopReason(t *testing.T) {
	for _, tc := range []struct {
		turn       openai.Turn
		reason     string
		stopString string
	}{
		{openai.Turn{Finish: "stop"}, "end_turn", ""},
		{openai.Turn{Finish: "length"}, "max_tokens", ""},
		{openai.Turn{Finish: "stop", StopMatched: "END"}, "stop_sequence", "END"},
		{openai.Turn{Finish: "stop", Calls: []openai.ToolCall{{ID: "c"}}}, "tool_use", ""},
	} {
		r, seq := stopReason(&tc.turn)
		got := ""
		if seq != nil {
			got = *seq
		}
		if *r != tc.reason || got != tc.stopString {
			t.Errorf("%+v: %s %q; want %s %q", tc.turn, *r, got, tc.reason, tc.stopString)
		}
	}
}

// FuzzParse: no body crashes the parser or the translation; failures are
// 400s; an accepted request becomes a chat request with messages in the
// chat roles, max_tokens at least 1 and calls with names.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":"1","messages":[]}`, `{"max_tokens":5,"system":[{"type":"image"}],"messages":[{"role":"user","content":"x"}]}`,
		`{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":null}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image"}]}]}]}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool"}}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"stop_sequences":[""],"temperature":2,"top_k":0,"thinking":{"type":"enabled"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body)
		if err == nil {
			var c *openai.ChatRequest
			if c, err = r.ChatRequest(); err == nil {
				if len(c.Messages) == 0 || c.MaxTokens == nil || *c.MaxTokens < 1 {
					t.Fatalf("%s: accepted as %+v", body, c)
				}
				for i, m := range c.Messages {
					switch m.Role {
					case "system", "user", "assistant", "tool":
					default:
						t.Fatalf("%s: message %d role %q", body, i, m.Role)
					}
					for _, tc := range m.ToolCalls {
						if tc.Function.Name == "" || !json.Valid([]byte(tc.Function.Arguments)) {
							t.Fatalf("%s: call %+v", body, tc)
						}
					}
				}
				return
			}
		}
		if err.Status != http.StatusBadRequest || !json.Valid(err.JSON()) {
			t.Fatalf("%s: error %v", body, err)
		}
	})
}

func TestMessageShapeEvents(t *testing.T) {
	s := NewMessageShape("msg_1", "m")
	b := s.Start(nil, 3)
	b = s.Text(b, []byte("let me check"))
	b = s.Call(b, openai.ToolCallDelta{Index: 0, ID: "call_1", Name: "f", First: true, Arguments: `{"a":`})
	b = s.Call(b, openai.ToolCallDelta{Index: 0, Arguments: `1}`})
	b = s.Finish(b, &openai.Turn{Finish: "stop", Calls: []openai.ToolCall{{ID: "call_1"}}, PromptTokens: 3, CachedTokens: 2})
	b = s.Fail(b, openai.Internal("boom"))
	var names []string
	var last map[string]any
	for _, ev := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		name, data, _ := strings.Cut(ev, "\ndata: ")
		names = append(names, strings.TrimPrefix(name, "event: "))
		last = nil
		if err := json.Unmarshal([]byte(data), &last); err != nil || last["type"] != names[len(names)-1] {
			t.Fatalf("event %q", ev)
		}
	}
	want := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop", "error"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if e := last["error"].(map[string]any); e["type"] != "api_error" || e["message"] != "boom" {
		t.Errorf("error event %v", last)
	}
}
