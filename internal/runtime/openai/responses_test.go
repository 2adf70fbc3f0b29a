package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// history is a ResponseHistory for tests.
type history struct {
	convs map[string][]Message
	items map[string]ResponseItem
}

func (h history) Conversation(id string) ([]Message, bool) { m, ok := h.convs[id]; return m, ok }
func (h history) Item(id string) (ResponseItem, bool)      { it, ok := h.items[id]; return it, ok }

func TestResponsesChatRequest(t *testing.T) {
	h := history{
		convs: map[string][]Message{"resp_1": {{Role: "user", Content: Content{Text: "q1"}}, {Role: "assistant", Content: Content{Text: "a1"}}}},
		items: map[string]ResponseItem{"fc_1": {Type: ItemFunctionCall, CallID: "call_9", Name: "f", Arguments: `{"x":1}`},
			"fc_ns": {Type: ItemFunctionCall, CallID: "call_8", Namespace: "ns", Name: "f", Arguments: `{}`}},
	}
	call := func(id, name, args string) ToolCall {
		return ToolCall{ID: id, Type: "function", Function: ToolCallFunction{Name: name, Arguments: args}}
	}
	tests := []struct {
		name, body string
		want       []Message
		input      int // how many of want are the request's own input
	}{
		{"tool_choice auto without tools", `{"input":"hi","tool_choice":"auto"}`, []Message{{Role: "user", Content: Content{Text: "hi"}}}, 1},
		{"string input with instructions", `{"input":"hi","instructions":"sys"}`,
			[]Message{{Role: "system", Content: Content{Text: "sys"}}, {Role: "user", Content: Content{Text: "hi"}}}, 1},
		{"text parts joined with newlines", `{"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`,
			[]Message{{Role: "user", Content: Content{Text: "a\nb"}}}, 1},
		{"calls join the assistant message before them", `{"input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"let me see"}]},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"g","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"r1"},{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"r2"}]}]}`,
			[]Message{{Role: "assistant", Content: Content{Text: "let me see"}, ToolCalls: []ToolCall{call("c1", "f", "{}"), call("c2", "g", "{}")}},
				{Role: "tool", ToolCallID: "c1", Content: Content{Text: "r1"}}, {Role: "tool", ToolCallID: "c2", Content: Content{Text: "r2"}}}, 3},
		{"previous response and an item reference", `{"previous_response_id":"resp_1","instructions":"sys","input":[{"type":"item_reference","id":"fc_1"},` +
			`{"type":"function_call_output","call_id":"call_9","output":"ok"}]}`,
			[]Message{{Role: "system", Content: Content{Text: "sys"}}, {Role: "user", Content: Content{Text: "q1"}}, {Role: "assistant", Content: Content{Text: "a1"}},
				{Role: "assistant", ToolCalls: []ToolCall{call("call_9", "f", `{"x":1}`)}}, {Role: "tool", ToolCallID: "call_9", Content: Content{Text: "ok"}}}, 2},
		{"a namespaced call renders under its flat name", `{"input":[{"type":"function_call","call_id":"c1","namespace":"multi_agent_v1","name":"spawn_agent","arguments":"{}"},` +
			`{"type":"item_reference","id":"fc_ns"},{"type":"function_call_output","call_id":"c1","output":"r1"},{"type":"function_call_output","call_id":"call_8","output":"r2"}]}`,
			[]Message{{Role: "assistant", ToolCalls: []ToolCall{call("c1", "multi_agent_v1__spawn_agent", "{}"), call("call_8", "ns__f", "{}")}},
				{Role: "tool", ToolCallID: "c1", Content: Content{Text: "r1"}}, {Role: "tool", ToolCallID: "call_8", Content: Content{Text: "r2"}}}, 3},
		{"developer messages flow as they are", `{"input":[{"role":"developer","content":[{"type":"input_text","text":"rules"}]},{"role":"user","content":"hi"}]}`,
			[]Message{{Role: "developer", Content: Content{Text: "rules"}}, {Role: "user", Content: Content{Text: "hi"}}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseResponses([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			turn, err := r.ChatRequest(h)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := turn.Chat.ToolFields.Resolve(); err != nil {
				t.Errorf("tool fields: %v", err)
			}
			if diff := cmp.Diff(tt.want, turn.Chat.Messages, cmpopts.IgnoreUnexported(Content{})); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want[len(tt.want)-tt.input:], turn.Input, cmpopts.IgnoreUnexported(Content{})); diff != "" {
				t.Errorf("own input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResponsesFieldsTranslated(t *testing.T) {
	r, err := ParseResponses([]byte(`{"model":"m","input":"x","max_output_tokens":7,"temperature":0.5,"top_p":0.9,"stream":true,` +
		`"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false,` +
		`"text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true}},"program_id":"p","cache_salt":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	turn, err := r.ChatRequest(history{})
	if err != nil {
		t.Fatal(err)
	}
	c := turn.Chat
	plan, apiErr := c.ToolFields.Resolve()
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	oc, apiErr := c.Constraint()
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	var tool map[string]any
	_ = json.Unmarshal(c.Tools[0].Raw, &tool)
	got := map[string]any{"max": *c.MaxTokens, "temp": *c.Temperature, "top_p": *c.TopP, "stream": c.Stream, "choice": plan.Choice,
		"named": plan.Named, "parallel": plan.Parallel, "constraint": oc.Kind, "program": c.BodyProgram().ID, "tool": tool["function"].(map[string]any)["name"], "salt": c.Salt()}
	want := map[string]any{"max": 7, "temp": 0.5, "top_p": 0.9, "stream": true, "choice": ToolChoiceNamed, "named": "f", "parallel": false,
		"constraint": ConstraintJSONSchema, "program": "p", "tool": "f", "salt": "s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestResponsesTools: what the model sees of each kind of tool, what is
// dropped, and how the model's calls map back.
func TestResponsesTools(t *testing.T) {
	r, err := ParseResponses([]byte(`{"input":"x","tools":[{"type":"function","name":"plain","parameters":{"type":"object"}},` +
		`{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[{"type":"function","name":"spawn_agent","description":"Spawn."},` +
		`{"type":"function","name":"wait"},{"type":"custom","name":"raw"}]},` +
		`{"type":"web_search","external_web_access":false},{"type":"custom","name":"apply_patch"},{"type":"mcp","server_label":"s"}],` +
		`"tool_choice":{"type":"function","namespace":"multi_agent_v1","name":"wait"}}`))
	if err != nil {
		t.Fatal(err)
	}
	turn, err := r.ChatRequest(history{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []FunctionDef
	for _, tool := range turn.Chat.Tools {
		seen = append(seen, *tool.Function)
	}
	want := []FunctionDef{{Name: "plain", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "multi_agent_v1__spawn_agent", Description: "Sub-agents.\n\nSpawn."}, {Name: "multi_agent_v1__wait", Description: "Sub-agents."}}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("tools the model sees (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"custom:multi_agent_v1__raw", "web_search", "custom:apply_patch", "mcp"}, turn.Dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if got := string(turn.Chat.ToolChoice); got != `{"function":{"name":"multi_agent_v1__wait"},"type":"function"}` {
		t.Errorf("tool_choice %s", got)
	}
	for name, want := range map[string]QualifiedName{"plain": {Name: "plain"}, "multi_agent_v1__wait": {Namespace: "multi_agent_v1", Name: "wait"},
		"unlisted__x": {Name: "unlisted__x"}} {
		if got := r.Qualified(name); got != want {
			t.Errorf("Qualified(%q) = %+v, want %+v", name, got, want)
		}
	}
	// A stored output renders the call under the name the model wrote.
	out := []OutputItem{{Type: ItemFunctionCall, CallID: "c", Namespace: "multi_agent_v1", Name: "wait", Arguments: "{}"}}
	if got := AssistantMessage(out).ToolCalls[0].Function.Name; got != "multi_agent_v1__wait" {
		t.Errorf("stored call renders as %q", got)
	}
	if got := out[0].AsInput(); got.Namespace != "multi_agent_v1" || got.Name != "wait" {
		t.Errorf("item reference %+v", got)
	}
	b, _ := json.Marshal(out[0])
	if !strings.Contains(string(b), `"namespace":"multi_agent_v1","name":"wait"`) {
		t.Errorf("function_call item %s", b)
	}
}

func TestResponsesReasoningAndInclude(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		kwargs     map[string]string // reasoning_effort and others, as JSON
		param      string            // a 400 naming it
	}{
		{"codex default", `"reasoning":{"summary":"auto"},"include":["reasoning.encrypted_content"]`, nil, ""},
		{"effort to the template", `"reasoning":{"effort":"xhigh","summary":null}`, map[string]string{"reasoning_effort": `"xhigh"`}, ""},
		{"the client's own kwarg wins", `"reasoning":{"effort":"high"},"chat_template_kwargs":{"reasoning_effort":"low","x":1}`,
			map[string]string{"reasoning_effort": `"low"`, "x": "1"}, ""},
		{"effort none", `"reasoning":{"effort":"none"}`, map[string]string{"reasoning_effort": `"none"`, "enable_thinking": "false"}, ""},
		{"effort none, the client's switch wins", `"reasoning":{"effort":"none"},"chat_template_kwargs":{"enable_thinking":true}`,
			map[string]string{"reasoning_effort": `"none"`, "enable_thinking": "true"}, ""},
		{"unknown effort", `"reasoning":{"effort":"max"}`, nil, "reasoning.effort"},
		{"unknown summary", `"reasoning":{"summary":"brief"}`, nil, "reasoning.summary"},
		{"include of a dropped tool's item", `"include":["web_search_call.action.sources","file_search_call.results"]`, nil, ""},
		{"include logprobs", `"include":["message.output_text.logprobs"]`, nil, "include"},
		{"include unknown", `"include":["all"]`, nil, "include"},
		{"reserved kwarg", `"chat_template_kwargs":{"messages":[]}`, nil, "chat_template_kwargs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseResponses([]byte(`{"input":"x",` + tc.body + `}`))
			if tc.param != "" {
				if err == nil || err.Param != tc.param {
					t.Fatalf("got %v; want a 400 naming %s", err, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			turn, err := r.ChatRequest(history{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for k, v := range turn.Chat.ChatTemplateKwargs {
				got[k] = string(v)
			}
			if diff := cmp.Diff(tc.kwargs, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("chat_template_kwargs (-want +got):\n%s", diff)
			}
			if shape := NewResponseShape("resp_1", 0, "m", r).Response(); r.Reasoning != nil && shape.Reasoning != *r.Reasoning {
				t.Errorf("reasoning echoed as %+v", shape.Reasoning)
			}
		})
	}
}

// FuzzParseResponses: no body crashes the parser or the translation;
// failures are 400 (404 for an unknown reference) with a JSON body; an
// accepted request becomes a chat request with messages in the roles the
// chat path takes.
func FuzzParseResponses(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"input":"hi"}`, `{"input":[]}`, `{"input":[{"role":"user","content":"x"}],"instructions":"s"}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}]}`,
		`{"input":[{"type":"item_reference","id":"fc_1"}],"previous_response_id":"resp_1"}`, `{"input":"x","previous_response_id":"nope"}`,
		`{"input":"x","tools":[{"type":"function","name":"f","parameters":{}}],"tool_choice":{"type":"function","name":"f"}}`,
		`{"input":"x","text":{"format":{"type":"json_schema","schema":{"type":"object"}}},"max_output_tokens":"3"}`,
		`{"input":[{"role":"wizard","content":[{"type":"input_image"}]}]}`, `{"input":"x","tools":[{"type":"function","parameters":"x"}]}`,
		`{"input":"x","reasoning":{"effort":null},"include":["reasoning.encrypted_content"],"store":false,"truncation":"disabled"}`,
		`{"input":"x","reasoning":{"effort":"low","summary":"auto"},"prompt_cache_key":"k","client_metadata":{"a":"b"}}`,
		`{"input":"x","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]},{"type":"web_search"}],"tool_choice":{"type":"function","namespace":"n","name":"f"}}`,
	} {
		f.Add([]byte(s))
	}
	h := history{convs: map[string][]Message{"resp_1": {{Role: "user", Content: Content{Text: "q"}}}},
		items: map[string]ResponseItem{"fc_1": {Type: ItemFunctionCall, CallID: "c", Name: "f", Arguments: "{}"}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkErr := func(err *Error, statuses ...int) {
			for _, s := range statuses {
				if err.Status == s && json.Valid(err.JSON()) {
					return
				}
			}
			t.Fatalf("error %v: want one of %v with a JSON body", err, statuses)
		}
		r, err := ParseResponses(body)
		if err != nil {
			checkErr(err, http.StatusBadRequest)
			return
		}
		turn, err := r.ChatRequest(h)
		if err != nil {
			checkErr(err, http.StatusBadRequest, http.StatusNotFound)
			return
		}
		if len(turn.Chat.Messages) == 0 {
			t.Fatalf("%s: no messages", body)
		}
		for i, m := range turn.Chat.Messages {
			if checkRole(i, m.Role) != nil {
				t.Fatalf("%s: message %d has role %q", body, i, m.Role)
			}
		}
		if c := turn.Chat; c.MaxTokens != nil && *c.MaxTokens < 1 {
			t.Fatalf("accepted max_output_tokens %d", *c.MaxTokens)
		}
	})
}

// eventTypes reads the event names of a named-event stream and checks
// that each event's data is JSON carrying its type.
func eventTypes(t *testing.T, stream []byte) []string {
	t.Helper()
	var names []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(stream), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\ndata: ")
		name = strings.TrimPrefix(name, "event: ")
		var v struct {
			Type string `json:"type"`
		}
		if !ok || json.Unmarshal([]byte(data), &v) != nil || v.Type != name {
			t.Fatalf("event %q", ev)
		}
		names = append(names, name)
	}
	return names
}

func TestResponseShapeEvents(t *testing.T) {
	s := NewResponseShape("resp_1", 0, "m", &ResponsesRequest{})
	b := s.Start(nil, 3)
	b = s.Text(b, []byte("let me check"))
	b = s.Call(b, ToolCallDelta{Index: 0, ID: "call_1", Name: "f", First: true})
	b = s.Call(b, ToolCallDelta{Index: 0, Arguments: `{"a":`})
	b = s.Call(b, ToolCallDelta{Index: 0, Arguments: `1}`})
	b = s.Call(b, ToolCallDelta{Index: 1, ID: "call_2", Name: "g", First: true, Arguments: `{}`})
	b = s.Finish(b, &Turn{Finish: "stop", PromptTokens: 3, CompletionTokens: 9})
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed"}
	if diff := cmp.Diff(want, eventTypes(t, b)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	r := s.Response()
	if r.Status != "completed" || len(r.Output) != 3 || r.Output[1].Arguments != `{"a":1}` || r.Output[2].Arguments != `{}` ||
		r.Output[0].Content[0].Text != "let me check" || r.Usage.TotalTokens != 12 {
		t.Errorf("final response %+v", r)
	}

	s = NewResponseShape("resp_2", 0, "m", &ResponsesRequest{})
	b = s.Fail(s.Start(nil, 3), Internal("boom"))
	if got := eventTypes(t, b); got[len(got)-1] != "response.failed" || s.Response().Error == nil {
		t.Errorf("failed stream: %v, %+v", got, s.Response())
	}
}

// TestResponsesToolOutputAnswersACall: a function_call_output must answer
// a call made earlier in the conversation, this input's or the stored
// chain's (previous_response_id, item_reference), as chat requires; one
// that answers none is a 400 naming input[i].call_id.
func TestResponsesToolOutputAnswersACall(t *testing.T) {
	calls := func(id string) []Message {
		return []Message{{Role: "user", Content: Content{Text: "q"}},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: id, Type: "function", Function: ToolCallFunction{Name: "f", Arguments: "{}"}}}}}
	}
	h := history{
		convs: map[string][]Message{"resp_call": calls("call_1"), "resp_text": {{Role: "user", Content: Content{Text: "q"}}}},
		items: map[string]ResponseItem{"fc_1": {Type: ItemFunctionCall, CallID: "call_2", Name: "f", Arguments: "{}"}},
	}
	for _, tc := range []struct {
		name, body, param string // param "": accepted
	}{
		{"answers no call", `{"input":[{"role":"user","content":"q"},{"type":"function_call_output","call_id":"nope","output":"r"}]}`, "input[1].call_id"},
		{"answers a later call", `{"input":[{"type":"function_call_output","call_id":"c","output":"r"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`, "input[0].call_id"},
		{"answers this input's call", `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"}]}`, ""},
		{"answers the stored chain's call", `{"previous_response_id":"resp_call","input":[{"type":"function_call_output","call_id":"call_1","output":"r"}]}`, ""},
		{"the stored chain has no such call", `{"previous_response_id":"resp_text","input":[{"type":"function_call_output","call_id":"call_1","output":"r"}]}`, "input[0].call_id"},
		{"answers a referenced call", `{"input":[{"type":"item_reference","id":"fc_1"},{"type":"function_call_output","call_id":"call_2","output":"r"}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseResponses([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.ChatRequest(h)
			switch {
			case tc.param == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.param != "" && (err == nil || err.Status != http.StatusBadRequest || err.Param != tc.param || !strings.Contains(err.Message, tc.param)):
				t.Errorf("got %v; want a 400 naming %s", err, tc.param)
			}
		})
	}
}

// TestCutCallIsIncomplete: a reply the output limit cut ends its last
// item as incomplete (a call's arguments then are a prefix no client can
// run), streamed and whole; items before it, and every item of a reply
// that ended by itself, are completed.
func TestCutCallIsIncomplete(t *testing.T) {
	calls := []ToolCall{{ID: "call_a", Function: ToolCallFunction{Name: "f", Arguments: `{}`}}, {ID: "call_b", Function: ToolCallFunction{Name: "f", Arguments: `{"x": "ab`}}}
	for _, finish := range []string{"stop", "length"} {
		turn := &Turn{Finish: finish, Calls: calls}
		want := []string{"completed", "completed"}
		if finish == "length" {
			want[1] = "incomplete"
		}
		whole := NewResponseShape("resp_1", 0, "m", &ResponsesRequest{}).Body(turn).(*Response)
		s := NewResponseShape("resp_1", 0, "m", &ResponsesRequest{})
		for i, c := range calls {
			s.Call(nil, ToolCallDelta{Index: i, First: true, ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		s.Finish(nil, turn)
		for name, out := range map[string][]OutputItem{"whole": whole.Output, "streamed": s.Response().Output} {
			var got []string
			for _, it := range out {
				got = append(got, it.Status)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("finish %s, %s: item statuses (-want +got):\n%s", finish, name, diff)
			}
		}
	}
}

// TestResponsesReasoningInput: a reasoning item sent back (as this server
// returns it, or with only a summary) opens the assistant turn it led to,
// whose message and calls join it, and becomes its reasoning_content; one
// with encrypted content alone adds nothing.
func TestResponsesReasoningInput(t *testing.T) {
	r, err := ParseResponses([]byte(`{"input":[{"role":"user","content":"q"},` +
		`{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"R1"}]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A1"}]},` +
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"o"},` +
		`{"type":"reasoning","summary":[{"type":"summary_text","text":"R2"}],"encrypted_content":"x"},` +
		`{"type":"reasoning","summary":[],"encrypted_content":"opaque"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A2"}]},` +
		`{"role":"user","content":"q2"}],"tools":[{"type":"function","name":"f","parameters":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	turn, err := r.ChatRequest(history{})
	if err != nil {
		t.Fatal(err)
	}
	type msg struct{ Role, Content, Reasoning string }
	var got []msg
	for _, m := range turn.Chat.Messages {
		got = append(got, msg{m.Role, m.Content.Text, m.ReasoningContent})
	}
	want := []msg{{"user", "q", ""}, {"assistant", "A1", "R1"}, {"tool", "o", ""}, {"assistant", "A2", "R2"}, {"user", "q2", ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if n := len(turn.Chat.Messages[1].ToolCalls); n != 1 {
		t.Errorf("the call joined %d calls to the reasoning's turn, want 1", n)
	}
}

// TestResponseShapeReasoning: reasoning streams as its own output item
// (reasoning_text deltas) before the message, whole responses put it
// first, and the item as input again is its text.
func TestResponseShapeReasoning(t *testing.T) {
	s := NewResponseShape("resp_1", 0, "m", &ResponsesRequest{})
	b := s.Start(nil, 3)
	b = s.Reasoning(b, []byte("thin"))
	b = s.Reasoning(b, []byte("king"))
	b = s.Text(b, []byte("answer"))
	b = s.Finish(b, &Turn{Finish: "stop", Reasoning: "thinking", Content: "answer", PromptTokens: 3, CompletionTokens: 9, ReasoningTokens: 2})
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
		"response.reasoning_text.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	if diff := cmp.Diff(want, eventTypes(t, b)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// openai's ResponseStream adds a reasoning delta to the part at its
	// content_index, and fails without one.
	if !strings.Contains(string(b), `"type":"response.reasoning_text.delta","sequence_number":3,"item_id":"`) ||
		!strings.Contains(string(b), `"output_index":0,"content_index":0,"delta":"thin"}`) {
		t.Errorf("a reasoning delta names no content_index: %s", b)
	}
	r := s.Response()
	if len(r.Output) != 2 || r.Output[0].Type != ItemReasoning || r.Output[0].ReasoningText != "thinking" || r.Usage.OutputTokensDetails.ReasoningTokens != 2 {
		t.Errorf("final response %+v", r)
	}
	whole := NewResponseShape("resp_2", 0, "m", &ResponsesRequest{}).Body(&Turn{Finish: "stop", Reasoning: "R", Content: "A"}).(*Response)
	item, _ := json.Marshal(whole.Output[0])
	if want := `"type":"reasoning","id":"` + whole.Output[0].ID + `","summary":[],"content":[{"type":"reasoning_text","text":"R"}],"status":"completed"}`; !strings.HasSuffix(string(item), want) {
		t.Errorf("reasoning item %s", item)
	}
	if in := whole.Output[0].AsInput(); in.Type != ItemReasoning || in.Content.Text != "R" {
		t.Errorf("as input %+v", in)
	}
	if m := AssistantMessage(whole.Output); m.ReasoningContent != "R" || m.Content.Text != "A" {
		t.Errorf("assistant message %+v", m)
	}
}
