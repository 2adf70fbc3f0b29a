package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// sseEvent is one server-sent event with an event name (the Responses and
// Messages streams name every event).
type sseEvent struct {
	name string
	data map[string]any
	raw  string
}

// namedEvents posts body and reads its named-event stream.
func (e *testEnv) namedEvents(path, body string, header ...string) []sseEvent {
	e.t.Helper()
	resp, cancel := e.openStream(path, body, header...)
	defer cancel()
	var events []sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name == "" {
				e.t.Fatalf("event without a name: %q", cur.raw)
			}
			events = append(events, cur)
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.raw = strings.TrimPrefix(line, "data: ")
			if err := json.Unmarshal([]byte(cur.raw), &cur.data); err != nil {
				e.t.Fatalf("event data %q: %v", cur.raw, err)
			}
			if cur.data["type"] != cur.name {
				e.t.Errorf("event %q carries type %v", cur.name, cur.data["type"])
			}
		default:
			e.t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return events
}

func eventNames(evs []sseEvent) []string {
	var names []string
	for _, ev := range evs {
		if len(names) > 0 && names[len(names)-1] == ev.name && strings.HasSuffix(ev.name, "delta") {
			continue // a run of deltas counts once
		}
		names = append(names, ev.name)
	}
	return names
}

const weatherTool = `{"type":"function","name":"get_weather","description":"Weather of a city",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Berlin"]}},"required":["city"]}}`

// postResponse posts a Responses request and decodes the response and
// its output items (OutputItem only encodes).
func postResponse(t *testing.T, env *testEnv, body string, header ...string) (openai.Response, []map[string]any) {
	t.Helper()
	r := env.post("/v1/responses", body, header...)
	if r.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", body, r.status, r.body)
	}
	var resp openai.Response
	var items struct {
		Output []map[string]any `json:"output"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	if err := json.Unmarshal(r.body, &items); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	return resp, items.Output
}

func TestResponsesText(t *testing.T) {
	env, _ := newCPUEnv(t)
	resp, out := postResponse(t, env, `{"model":"test-model","instructions":"be brief","input":"hi","max_output_tokens":6,"temperature":0}`)
	if resp.Object != "response" || !strings.HasPrefix(resp.ID, "resp_") || resp.Status != "incomplete" ||
		resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "max_output_tokens" ||
		len(out) != 1 || out[0]["type"] != "message" || out[0]["role"] != "assistant" {
		t.Fatalf("response %+v", resp)
	}
	// The instructions are the system message, the input the user's: the
	// same prompt as the chat request.
	chat := chatPromptTokens(t, env, `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":1}`)
	if u := resp.Usage; u == nil || u.InputTokens != chat || u.OutputTokens != 6 || u.TotalTokens != chat+6 {
		t.Errorf("usage %+v; the chat request has %d prompt tokens", resp.Usage, chat)
	}

	evs := env.namedEvents("/v1/responses", `{"input":"hi","max_output_tokens":6,"temperature":0,"stream":true}`)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.incomplete"}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Errorf("event sequence (-want +got):\n%s", diff)
	}
	var text strings.Builder
	for i, ev := range evs {
		if n, _ := ev.data["sequence_number"].(float64); int(n) != i {
			t.Errorf("event %d (%s) has sequence_number %v", i, ev.name, ev.data["sequence_number"])
		}
		if ev.name == "response.output_text.delta" {
			text.WriteString(ev.data["delta"].(string))
		}
	}
	last := evs[len(evs)-1].data["response"].(map[string]any)
	final := last["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
	if final != text.String() || last["usage"].(map[string]any)["output_tokens"].(float64) != 6 {
		t.Errorf("deltas %q, final response %v", text.String(), last)
	}
}

// checkWeatherCall checks a forced get_weather call's item.
func checkWeatherCall(t *testing.T, item map[string]any) string {
	t.Helper()
	var args struct {
		City *string `json:"city"`
	}
	if item["type"] != "function_call" || item["name"] != "get_weather" || !strings.HasPrefix(item["call_id"].(string), "call_") ||
		item["status"] != "completed" || json.Unmarshal([]byte(item["arguments"].(string)), &args) != nil || args.City == nil {
		t.Fatalf("function call item %v", item)
	}
	return item["call_id"].(string)
}

func TestResponsesToolCall(t *testing.T) {
	env, _ := newCPUEnv(t)
	for _, choice := range []string{`"required"`, `{"type":"function","name":"get_weather"}`} {
		resp, out := postResponse(t, env, `{"input":"weather in Paris?","max_output_tokens":200,"parallel_tool_calls":false,"tools":[`+weatherTool+`],"tool_choice":`+choice+`}`)
		if resp.Status != "completed" || len(out) == 0 {
			t.Fatalf("tool_choice %s: %+v", choice, resp)
		}
		checkWeatherCall(t, out[0])
	}

	evs := env.namedEvents("/v1/responses", `{"input":"weather?","max_output_tokens":200,"stream":true,"tools":[`+weatherTool+`],"tool_choice":"required","parallel_tool_calls":false}`)
	want := []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Fatalf("event sequence (-want +got):\n%s", diff)
	}
	var args strings.Builder
	for _, ev := range evs {
		if ev.name == "response.function_call_arguments.delta" {
			args.WriteString(ev.data["delta"].(string))
		}
	}
	done := evs[len(evs)-2].data["item"].(map[string]any)
	checkWeatherCall(t, done)
	if done["arguments"] != args.String() {
		t.Errorf("argument deltas %q, item %v", args.String(), done)
	}

	// The round trip: the call and its output as input items render as the
	// chat request's assistant tool call and tool turn.
	items := `[{"role":"user","content":"weather?"},` +
		`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"sunny"}]`
	resp, _ := postResponse(t, env, `{"input":`+items+`,"max_output_tokens":2,"tools":[`+weatherTool+`]}`)
	chat := chatPromptTokens(t, env, `{"max_tokens":1,"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city",`+
		`"parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Berlin"]}},"required":["city"]}}}],"messages":[{"role":"user","content":"weather?"},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},`+
		`{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`)
	if resp.Usage.InputTokens != chat {
		t.Errorf("round trip: %d input tokens, the chat request %d", resp.Usage.InputTokens, chat)
	}
}

func TestResponsesConversation(t *testing.T) {
	// Cache reads are reported (and checked below) only with the flag.
	env, _ := newCPUEnvWith(t, envOpts{programs: programs.New(programs.Config{Pod: "a"}), promptTokensDetails: true})
	first, out := postResponse(t, env, `{"instructions":"you are terse","input":"weather in Paris?","max_output_tokens":200,"parallel_tool_calls":false,"tools":[`+weatherTool+`],"tool_choice":"required"}`,
		"X-Program-Id", "agent-1")
	callID := checkWeatherCall(t, out[0])

	// The next turn continues the stored one: its prompt extends the
	// first's, whose full KV blocks it finds in the prefix cache.
	second, _ := postResponse(t, env, `{"instructions":"you are terse","previous_response_id":"`+first.ID+`","input":[`+
		`{"type":"function_call_output","call_id":"`+callID+`","output":"sunny"}],"max_output_tokens":4,"tools":[`+weatherTool+`]}`,
		"X-Program-Id", "agent-1")
	if p := first.Usage.InputTokens; second.Usage.InputTokens <= p+first.Usage.OutputTokens/2 ||
		second.Usage.InputTokensDetails.CachedTokens < p/16*16 {
		t.Errorf("second turn usage %+v; the first had %d input tokens", second.Usage, p)
	}
	// Token for token: the second turn's prompt starts with the first's.
	prompt := func(body string) []int32 {
		req, apiErr := openai.ParseResponses([]byte(body))
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		turn, apiErr := req.ChatRequest(env.srv.store.history(""))
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		j, apiErr := env.srv.chatJob(context.Background(), http.Header{}, turn.Chat, "input", "max_output_tokens")
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		return j.prompts[0]
	}
	p1 := prompt(`{"instructions":"you are terse","input":"weather in Paris?","tools":[` + weatherTool + `]}`)
	p2 := prompt(`{"instructions":"you are terse","previous_response_id":"` + first.ID + `","input":[` +
		`{"type":"function_call_output","call_id":"` + callID + `","output":"sunny"}],"tools":[` + weatherTool + `]}`)
	if len(p1) != first.Usage.InputTokens || len(p2) != second.Usage.InputTokens || !slices.Equal(p1, p2[:len(p1)]) {
		t.Errorf("turn 2's prompt (%d tokens) does not extend turn 1's (%d)", len(p2), len(p1))
	}
	if second.PreviousResponseID == nil || *second.PreviousResponseID != first.ID {
		t.Errorf("previous_response_id %v", second.PreviousResponseID)
	}
	// Referring to the first turn's items by id is the same conversation.
	byRef, _ := postResponse(t, env, `{"instructions":"you are terse","input":[{"role":"user","content":"weather in Paris?"},`+
		`{"type":"item_reference","id":"`+out[0]["id"].(string)+`"},{"type":"function_call_output","call_id":"`+callID+`","output":"sunny"}],`+
		`"max_output_tokens":4,"tools":[`+weatherTool+`]}`)
	if byRef.Usage.InputTokens != second.Usage.InputTokens {
		t.Errorf("item_reference: %d input tokens, previous_response_id: %d", byRef.Usage.InputTokens, second.Usage.InputTokens)
	}
	if rep := env.srv.cfg.Programs.Report(); len(rep.Programs) != 1 || rep.Programs[0].ID != "agent-1" || rep.Programs[0].Steps != 2 {
		t.Errorf("program table: %+v", rep.Programs)
	}

	// GET returns the stored response, DELETE removes it.
	r := env.do(http.MethodGet, "/v1/responses/"+first.ID, "")
	var got openai.Response
	if r.status != http.StatusOK || json.Unmarshal(r.body, &got) != nil || got.ID != first.ID || got.Status != "completed" {
		t.Errorf("GET: %d %s", r.status, r.body)
	}
	if r := env.do(http.MethodDelete, "/v1/responses/"+first.ID, ""); r.status != http.StatusOK {
		t.Errorf("DELETE: %d %s", r.status, r.body)
	}
	r = env.post("/v1/responses", `{"previous_response_id":"`+first.ID+`","input":"more","max_output_tokens":2}`)
	wantError(t, r, http.StatusNotFound, "previous_response_id")
	if r := env.do(http.MethodGet, "/v1/responses/"+first.ID, ""); r.status != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d %s", r.status, r.body)
	}

	// store: false keeps nothing.
	unstored, _ := postResponse(t, env, `{"input":"hi","max_output_tokens":2,"store":false}`)
	r = env.post("/v1/responses", `{"previous_response_id":"`+unstored.ID+`","input":"more","max_output_tokens":2}`)
	wantError(t, r, http.StatusNotFound, "previous_response_id")
}

func TestResponsesRefusals(t *testing.T) {
	env := newEnv(t, envOpts{})
	for _, tc := range []struct{ name, body, param string }{
		{"no input", `{"max_output_tokens":2}`, "input"},
		{"unknown tool type", `{"input":"hi","tools":[{"type":"teleport"}]}`, "tools"},
		{"namespace in a namespace", `{"input":"hi","tools":[{"type":"namespace","name":"a","tools":[{"type":"namespace","name":"b","tools":[]}]}]}`, "tools"},
		{"namespaced name too long", `{"input":"hi","tools":[{"type":"namespace","name":"` + strings.Repeat("n", 40) + `","tools":[{"type":"function","name":"` + strings.Repeat("f", 30) + `"}]}]}`, "tools"},
		{"background", `{"input":"hi","background":true}`, "background"},
		{"truncation auto", `{"input":"hi","truncation":"auto"}`, "truncation"},
		{"reasoning effort", `{"input":"hi","reasoning":{"effort":"extreme"}}`, "reasoning.effort"},
		{"reasoning summary", `{"input":"hi","reasoning":{"summary":"verbose"}}`, "reasoning.summary"},
		{"include unknown", `{"input":"hi","include":["everything"]}`, "include"},
		{"image input", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input"},
		{"unknown item", `{"input":[{"type":"computer_call_output","call_id":"c"}]}`, "input"},
		{"include logprobs", `{"input":"hi","include":["message.output_text.logprobs"]}`, "include"},
		{"max_output_tokens 0", `{"input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{"hosted tool choice", `{"input":"hi","tools":[` + weatherTool + `],"tool_choice":{"type":"web_search"}}`, "tool_choice"},
		{"dropped tool choice", `{"input":"hi","tools":[` + weatherTool + `,{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`, "tool_choice"},
		{"named tool not listed", `{"input":"hi","tools":[` + weatherTool + `],"tool_choice":{"type":"function","name":"nope"}}`, "tool_choice"},
		{"unknown item reference", `{"input":[{"type":"item_reference","id":"msg_nope"}]}`, "input"},
		{"schema keyword the decoder refuses", `{"input":"hi","text":{"format":{"type":"json_schema","name":"x","strict":true,"schema":{"type":"array","uniqueItems":true}}}}`, "text.format.schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := env.post("/v1/responses", tc.body)
			status := http.StatusBadRequest
			if tc.name == "unknown item reference" {
				status = http.StatusNotFound
			}
			wantError(t, r, status, tc.param)
		})
	}
}
