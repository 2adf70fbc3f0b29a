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
		{"a system turn before the first answer joins the system prompt", `{"max_tokens":1,"system":"s","messages":[{"role":"user","content":"hi"},` +
			`{"role":"system","content":[{"type":"text","text":"env","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"go"}]}`,
			[]openai.Message{msg("system", "s\n\nenv"), msg("user", "hi"), msg("user", "go")}},
		{"without a system prompt it becomes one", `{"max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"system","content":"env"}]}`,
			[]openai.Message{msg("system", "env"), msg("user", "hi")}},
		{"a system turn after an answer stays at its place", `{"max_tokens":1,"system":"s","messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":"a"},{"role":"system","content":"later"},{"role":"user","content":"go"}]}`,
			[]openai.Message{msg("system", "s"), msg("user", "hi"), msg("assistant", "a"), msg("system", "later"), msg("user", "go")}},
		{"Claude Code's billing header block is left out", `{"max_tokens":1,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332.58d; cc_entrypoint=cli;"},` +
			`{"type":"text","text":"You are Claude Code."}],"messages":[{"role":"user","content":"hi"}]}`,
			[]openai.Message{msg("system", "You are Claude Code."), msg("user", "hi")}},
		{"the billing header's text elsewhere is kept", `{"max_tokens":1,"system":[{"type":"text","text":"a"},{"type":"text","text":"x-anthropic-billing-header: b"}],` +
			`"messages":[{"role":"user","content":"x-anthropic-billing-header: c"}]}`,
			[]openai.Message{msg("system", "a\nx-anthropic-billing-header: b"), msg("user", "x-anthropic-billing-header: c")}},
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

// TestThinkingAndEffort: thinking and output_config.effort are honoured
// (no thinking blocks: the served formats do not reason), and reach the
// template as its switches.
func TestThinkingAndEffort(t *testing.T) {
	msgs := `"max_tokens":32000,"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ body, want string }{
		{`{` + msgs + `}`, `null`},
		{`{` + msgs + `,"thinking":{"type":"enabled","budget_tokens":31999}}`, `null`},
		{`{` + msgs + `,"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"}}`, `{"reasoning_effort":"high"}`},
		{`{` + msgs + `,"thinking":{"type":"disabled"},"output_config":{"effort":"max"}}`, `{"enable_thinking":false,"reasoning_effort":"high"}`},
		{`{` + msgs + `,"output_config":{"effort":"low"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}}`, `{"reasoning_effort":"low"}`},
	} {
		r, err := Parse([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		c, err := r.ChatRequest()
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		got, _ := json.Marshal(c.ChatTemplateKwargs)
		if string(got) != tc.want {
			t.Errorf("%s: chat_template_kwargs %s; want %s", tc.body, got, tc.want)
		}
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

// translate parses body and translates it into a chat request.
func translate(body string) (*openai.ChatRequest, *openai.Error) {
	r, err := Parse([]byte(body))
	if err != nil {
		return nil, err
	}
	return r.ChatRequest()
}

// TestPrefill: a final assistant message is continued, as chat's
// continue_final_message continues it; an empty one prefills nothing;
// trailing whitespace and tool_use blocks there are refused, as
// Anthropic refuses them.
func TestPrefill(t *testing.T) {
	c, err := translate(`{"max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"text","text":"The answer is"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if last := c.Messages[len(c.Messages)-1]; !c.ContinueFinalMessage || c.GenerationPrompt() || last.Role != "assistant" || last.Content.Text != "The answer is" {
		t.Errorf("prefill: continue %v, generation prompt %v, last message %+v", c.ContinueFinalMessage, c.GenerationPrompt(), last)
	}
	c, err = translate(`{"max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":""}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if c.ContinueFinalMessage || !c.GenerationPrompt() || len(c.Messages) != 1 {
		t.Errorf("empty prefill: continue %v, generation prompt %v, messages %+v", c.ContinueFinalMessage, c.GenerationPrompt(), c.Messages)
	}
	c, err = translate(`{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`)
	if err != nil || c.ContinueFinalMessage || !c.GenerationPrompt() {
		t.Errorf("user turn last: %+v, %v", c, err)
	}
	for body, param := range map[string]string{
		`{"max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"The answer is "}]}`:                                     "messages[1].content",
		`{"max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`: "messages[1].content[0]",
		`{"max_tokens":1,"messages":[{"role":"assistant","content":[]}]}`:                                                                                 "messages",
	} {
		if _, err := translate(body); err == nil || err.Param != param || !strings.Contains(err.Message, param) {
			t.Errorf("%s: %v; want a 400 naming %s", body, err, param)
		}
	}
}

// TestOutputFormat: output_format and output_config.format become chat's
// strict JSON-schema constraint, errors naming the Anthropic field;
// fields that would change the reply and are not supported are refused.
func TestOutputFormat(t *testing.T) {
	const msgs = `"max_tokens":1,"messages":[{"role":"user","content":"x"}]`
	const schema = `{"type":"object","properties":{"a":{"type":"integer"}}}`
	for body, param := range map[string]string{
		`{` + msgs + `,"output_format":{"type":"json_schema","schema":` + schema + `}}`:                            "output_format.schema",
		`{` + msgs + `,"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}}`:                 "output_config.format.schema",
		`{` + msgs + `,"output_config":{"effort":"high","format":{"type":"json_schema","schema":` + schema + `}}}`: "output_config.format.schema",
	} {
		c, err := translate(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		oc, err := c.Constraint()
		if err != nil || oc == nil || oc.Kind != openai.ConstraintJSONSchema || oc.Param != param || oc.Lenient || string(oc.Schema) != schema {
			t.Errorf("%s: constraint %+v, %v; want the strict schema named %s", body, oc, err, param)
		}
	}
	tools := `,"tools":[{"name":"f","input_schema":{"type":"object"}}]`
	for body, param := range map[string]string{
		`{` + msgs + `,"output_format":{"type":"json_schema","schema":{}},"output_config":{"format":{"type":"json_schema","schema":{}}}}`:                   "output_config.format",
		`{` + msgs + `,"output_format":{"type":"json_object"}}`:                                                                                             "output_format.type",
		`{` + msgs + `,"output_config":{"format":{"type":"json_schema"}}}`:                                                                                  "output_config.format.schema",
		`{` + msgs + `,"output_format":{"type":"json_schema","schema":"{}"}}`:                                                                               "output_format.schema",
		`{` + msgs + `,"output_config":{"effort":"extreme"}}`:                                                                                               "output_config.effort",
		`{` + msgs + `,"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}`:                                                               "context_management.edits[0].type",
		`{` + msgs + `,"thinking":{"type":"enabled"}}`:                                                                                                      "thinking.budget_tokens",
		`{` + msgs + `,"thinking":{"type":"enabled","budget_tokens":1023}}`:                                                                                 "thinking.budget_tokens",
		`{` + msgs + `,"thinking":{"type":"adaptive","budget_tokens":2048}}`:                                                                                "thinking.budget_tokens",
		`{` + msgs + `,"thinking":{"type":"on"}}`:                                                                                                           "thinking.type",
		`{` + msgs + `,"thinking":{"type":"adaptive","display":"full"}}`:                                                                                    "thinking.display",
		`{"max_tokens":1,"messages":[{"role":"system","content":[{"type":"image"}]},{"role":"user","content":"x"}]}`:                                        "messages[0].content[0].type",
		`{` + msgs + `,"tools":[{"name":"f","input_schema":{"type":"object"},"strict":true}]}`:                                                              "tools[0].strict",
		`{` + msgs + tools + `,"tool_choice":{"type":"any"},"output_format":{"type":"json_schema","schema":{}}}`:                                            "output_format",
		`{"max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"{"}],"output_format":{"type":"json_schema","schema":{}}}`: "output_format",
	} {
		if _, err := translate(body); err == nil || err.Status != http.StatusBadRequest || err.Param != param || !strings.Contains(err.Message, param) {
			t.Errorf("%s: %v; want a 400 naming %s", body, err, param)
		}
	}
}

// TestInvalidUTF8: the body is read as chat's is: invalid UTF-8 in a
// string is a 400 naming the field, on both endpoints.
func TestInvalidUTF8(t *testing.T) {
	for body, param := range map[string]string{
		"{\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}":                    "messages[0].content",
		"{\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"program_id\":\"a\xffb\"}": "program_id",
		"{\"max_tokens\":3,\"system\":\"s\xc3\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}":      "system",
	} {
		for name, parse := range map[string]func([]byte) (*Request, *openai.Error){"messages": Parse, "count_tokens": ParseCountTokens} {
			if _, err := parse([]byte(body)); err == nil || err.Status != http.StatusBadRequest || err.Param != param || !strings.Contains(err.Message, param) {
				t.Errorf("%s %q: %v; want a 400 naming %s", name, body, err, param)
			}
		}
	}
}

// TestToolResultAnswersACall: a tool_result must answer a tool_use of an
// earlier assistant turn, as chat's tool messages must.
func TestToolResultAnswersACall(t *testing.T) {
	const use = `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]}`
	if _, err := translate(`{"max_tokens":1,"messages":[{"role":"user","content":"q"},` + use + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`); err != nil {
		t.Errorf("a result answering a call: %v", err)
	}
	for body, param := range map[string]string{
		`{"max_tokens":1,"messages":[{"role":"user","content":"q"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope","content":"r"}]}]}`: "messages[1].content[0].tool_use_id",
		`{"max_tokens":1,"messages":[{"role":"user","content":"q"},` + use + `,{"role":"user","content":[{"type":"text","text":"a"},` +
			`{"type":"tool_result","tool_use_id":"t1","content":"r"},{"type":"tool_result","tool_use_id":"t2","content":"r"}]}]}`: "messages[2].content[2].tool_use_id",
	} {
		if _, err := translate(body); err == nil || err.Status != http.StatusBadRequest || err.Param != param || !strings.Contains(err.Message, param) {
			t.Errorf("%s: %v; want a 400 naming %s", body, err, param)
		}
	}
}

// TestFieldNames: chat's checks that this API shares are named in its
// own terms (its error shape has no param: the message names the field).
func TestFieldNames(t *testing.T) {
	stops := make([]string, openai.MaxStopStrings+1)
	for i := range stops {
		stops[i] = "s"
	}
	many, _ := json.Marshal(stops)
	for body, param := range map[string]string{
		`{"max_tokens":1,"messages":[{"role":"user","content":"x"}],"stop_sequences":` + string(many) + `}`:                                                  "stop_sequences",
		`{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1,2]}]},{"role":"user","content":"x"}]}`: "messages[0].content[0].input",
		`{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"str"}]},{"role":"user","content":"x"}]}`: "messages[0].content[0].input",
		`{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":null}]},{"role":"user","content":"x"}]}`:  "messages[0].content[0].input",
		`{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f"}]},{"role":"user","content":"x"}]}`:               "messages[0].content[0].input",
	} {
		_, err := translate(body)
		if err == nil || err.Status != http.StatusBadRequest || err.Param != param || !strings.HasPrefix(err.Message, param) {
			t.Errorf("%.120s: %v; want a 400 whose message starts with %s", body, err, param)
		}
	}
}

// TestContentShapes: content blocks are read as Anthropic defines them:
// a text block needs a string text (an empty one is kept, as before), a
// message needs its content, and system is a string or a list of text
// blocks; each refusal names the field.
func TestContentShapes(t *testing.T) {
	const user = `{"role":"user","content":"x"}`
	for body, param := range map[string]string{
		`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"text"}]}]}`:                                                       "messages[0].content[0].text",
		`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":null}]}]}`:                                           "messages[0].content[0].text",
		`{"max_tokens":1,"messages":[` + user + `,{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":5}]}]}`: "messages[1].content[1].text",
		`{"max_tokens":1,"messages":[{"role":"system","content":[{"type":"text"}]},` + user + `]}`:                                        "messages[0].content[0].text",
		`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text"}]}]}]}`:  "messages[0].content[0].content[0].text",
		`{"max_tokens":1,"messages":[{"role":"user","content":null}]}`:                                                                    "messages[0].content",
		`{"max_tokens":1,"messages":[` + user + `,{"role":"assistant"}]}`:                                                                 "messages[1].content",
		`{"max_tokens":1,"messages":[{"role":"user","content":5}]}`:                                                                       "messages[0].content",
		`{"max_tokens":1,"system":[{"type":"text"}],"messages":[` + user + `]}`:                                                           "system[0].text",
		`{"max_tokens":1,"system":5,"messages":[` + user + `]}`:                                                                           "system",
		`{"max_tokens":1,"system":{"type":"text","text":"s"},"messages":[` + user + `]}`:                                                  "system",
		`{"max_tokens":1,"system":true,"messages":[` + user + `]}`:                                                                        "system",
	} {
		if _, err := Parse([]byte(body)); err == nil || err.Status != http.StatusBadRequest || err.Param != param || !strings.Contains(err.Message, param) {
			t.Errorf("%s: %v; want a 400 naming %s", body, err, param)
		}
	}
	for _, body := range []string{
		`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"x"}]}]}`,
		`{"max_tokens":1,"system":"","messages":[{"role":"user","content":""}]}`,
		`{"max_tokens":1,"system":null,"messages":[` + user + `]}`,
		`{"max_tokens":1,"system":[{"type":"text","text":"s"}],"messages":[` + user + `]}`,
	} {
		if _, err := Parse([]byte(body)); err != nil {
			t.Errorf("%s: %v; want it accepted", body, err)
		}
	}
}

// TestThinkingBlocks: a reply's reasoning is a thinking block before its
// text, whole and streamed (thinking_delta), without its text when the
// display is omitted; thinking blocks sent back become the assistant
// turn's reasoning_content (a redacted one adds nothing), and are refused
// in a user turn.
func TestThinkingBlocks(t *testing.T) {
	turn := &openai.Turn{Finish: "stop", Reasoning: "R", Content: "A"}
	body, _ := json.Marshal(NewMessageShape("m", "x").Body(turn))
	if !strings.Contains(string(body), `"content":[{"type":"thinking","thinking":"R","signature":""},{"type":"text","text":"A"}]`) {
		t.Errorf("body %s", body)
	}
	omit := NewMessageShape("m", "x")
	omit.OmitThinking = true
	body, _ = json.Marshal(omit.Body(turn))
	if !strings.Contains(string(body), `{"type":"thinking","thinking":"","signature":""}`) {
		t.Errorf("omitted: body %s", body)
	}
	s := NewMessageShape("m", "x")
	b := s.Reasoning(nil, []byte("thin"))
	b = s.Reasoning(b, []byte("king"))
	b = s.Text(b, []byte("A"))
	want := `"content_block":{"type":"thinking","thinking":"","signature":""}`
	if ev := string(b); !strings.Contains(ev, want) || !strings.Contains(ev, `"delta":{"type":"thinking_delta","thinking":"thin"}`) ||
		!strings.Contains(ev, `"delta":{"type":"thinking_delta","thinking":"king"}`) || strings.Index(ev, "thinking_delta") > strings.Index(ev, "text_delta") {
		t.Errorf("events %s", ev)
	}

	c, err := translate(`{"max_tokens":8,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":"R1","signature":"s"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"A"}]},` +
		`{"role":"user","content":"q2"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Messages[1]; m.Role != "assistant" || m.ReasoningContent != "R1" || m.Content.Text != "A" {
		t.Errorf("assistant message %+v", m)
	}
	if _, err := translate(`{"max_tokens":8,"messages":[{"role":"user","content":[{"type":"thinking","thinking":"R"}]}]}`); err == nil {
		t.Error("a thinking block in a user turn was accepted")
	}
	// clear_thinking_20251015 keeps the thinking of the last turns only.
	conv := `"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"R1"},{"type":"text","text":"A1"}]},` +
		`{"role":"user","content":"q2"},{"role":"assistant","content":[{"type":"thinking","thinking":"R2"},{"type":"text","text":"A2"}]},{"role":"user","content":"q3"}]`
	for keep, want := range map[string][2]string{
		`"all"`: {"R1", "R2"}, `null`: {"", "R2"}, `{"type":"thinking_turns","value":0}`: {"", ""}, `{"type":"thinking_turns","value":2}`: {"R1", "R2"},
	} {
		c, err := translate(`{"max_tokens":8,` + conv + `,"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":` + keep + `}]}}`)
		if err != nil {
			t.Fatalf("keep %s: %v", keep, err)
		}
		if got := [2]string{c.Messages[1].ReasoningContent, c.Messages[3].ReasoningContent}; got != want {
			t.Errorf("keep %s: reasoning %q, want %q", keep, got, want)
		}
	}
	if _, err := translate(`{"max_tokens":8,` + conv + `,"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":{"type":"turns"}}]}}`); err == nil || err.Param != "context_management.edits[0].keep" {
		t.Errorf("bad keep: %v", err)
	}
}

// TestThinkingBudget: budget_tokens of enabled thinking caps the chat
// request's reasoning; adaptive and disabled set no cap.
func TestThinkingBudget(t *testing.T) {
	for body, want := range map[string]int{
		`"thinking":{"type":"enabled","budget_tokens":2048}`: 2048,
		`"thinking":{"type":"adaptive"}`:                     0,
		`"thinking":{"type":"disabled"}`:                     0,
	} {
		c, err := translate(`{"max_tokens":4096,"messages":[{"role":"user","content":"q"}],` + body + `}`)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if c.ThinkingBudget != want {
			t.Errorf("%s: budget %d, want %d", body, c.ThinkingBudget, want)
		}
	}
}
