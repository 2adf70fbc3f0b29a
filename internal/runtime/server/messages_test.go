package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/anthropic"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

const anthropicWeatherTool = `{"name":"get_weather","description":"Weather of a city",` +
	`"input_schema":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Berlin"]}},"required":["city"]}}`

func postMessage(t *testing.T, env *testEnv, body string, header ...string) anthropic.Response {
	t.Helper()
	r := env.post("/v1/messages", body, header...)
	if r.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", body, r.status, r.body)
	}
	var resp anthropic.Response
	decodeStrict(t, r.body, &resp)
	return resp
}

func TestMessagesText(t *testing.T) {
	env, _ := newCPUEnv(t)
	resp := postMessage(t, env, `{"model":"test-model","system":[{"type":"text","text":"be"},{"type":"text","text":"brief","cache_control":{"type":"ephemeral"}}],`+
		`"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":6,"temperature":0,"metadata":{"user_id":"u1"}}`)
	if resp.Type != "message" || resp.Role != "assistant" || !strings.HasPrefix(resp.ID, "msg_") || len(resp.Content) > 1 ||
		*resp.StopReason != "max_tokens" || resp.StopSequence != nil || resp.Usage.OutputTokens != 6 {
		t.Fatalf("reply %+v", resp)
	}
	chat := chatPromptTokens(t, env, `{"messages":[{"role":"system","content":"be\nbrief"},{"role":"user","content":"hi"}],"max_tokens":1}`)
	if u := resp.Usage; u.InputTokens+u.CacheReadInputTokens != chat {
		t.Errorf("usage %+v; the chat request has %d prompt tokens", u, chat)
	}

	evs := env.namedEvents("/v1/messages", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0,"stream":true}`)
	want := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Errorf("event sequence (-want +got):\n%s", diff)
	}
	md := evs[len(evs)-2].data
	if md["delta"].(map[string]any)["stop_reason"] != "max_tokens" || md["usage"].(map[string]any)["output_tokens"].(float64) != 6 {
		t.Errorf("message_delta %v", md)
	}
}

func TestMessagesToolUse(t *testing.T) {
	env, _ := newCPUEnvWith(t, envOpts{programs: programs.New(programs.Config{Pod: "a"})})
	for _, choice := range []string{`{"type":"any","disable_parallel_tool_use":true}`, `{"type":"tool","name":"get_weather","disable_parallel_tool_use":true}`} {
		resp := postMessage(t, env, `{"messages":[{"role":"user","content":"weather in Paris?"}],"max_tokens":200,"tools":[`+anthropicWeatherTool+`],"tool_choice":`+choice+`}`,
			"X-Program-Id", "claude-1")
		var in struct{ City string }
		if len(resp.Content) != 1 || resp.Content[0].Type != "tool_use" || resp.Content[0].Name != "get_weather" ||
			json.Unmarshal(resp.Content[0].Input, &in) != nil || (in.City != "Paris" && in.City != "Berlin") || *resp.StopReason != "tool_use" {
			t.Fatalf("tool_choice %s: %+v", choice, resp)
		}
	}
	if rep := env.srv.cfg.Programs.Report(); len(rep.Programs) != 1 || rep.Programs[0].ID != "claude-1" || rep.Programs[0].Steps != 2 {
		t.Errorf("program table: %+v", rep.Programs)
	}

	evs := env.namedEvents("/v1/messages", `{"messages":[{"role":"user","content":"weather?"}],"max_tokens":200,"stream":true,`+
		`"tools":[`+anthropicWeatherTool+`],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`)
	want := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Fatalf("event sequence (-want +got):\n%s", diff)
	}
	var partial strings.Builder
	for _, ev := range evs {
		if ev.name == "content_block_delta" {
			d := ev.data["delta"].(map[string]any)
			if d["type"] != "input_json_delta" {
				t.Fatalf("delta %v", d)
			}
			partial.WriteString(d["partial_json"].(string))
		}
	}
	var in struct{ City string }
	if block := evs[2].data["content_block"].(map[string]any); block["type"] != "tool_use" || block["name"] != "get_weather" ||
		json.Unmarshal([]byte(partial.String()), &in) != nil || in.City == "" {
		t.Errorf("tool_use block %v, input %q", block, partial.String())
	}
	if r := evs[len(evs)-2].data["delta"].(map[string]any)["stop_reason"]; r != "tool_use" {
		t.Errorf("stop_reason %v", r)
	}

	// The round trip renders as the chat request's tool call and tool turn.
	resp := postMessage(t, env, `{"max_tokens":2,"tools":[`+anthropicWeatherTool+`],"messages":[{"role":"user","content":"weather?"},`+
		`{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"sunny"}]}]}]}`)
	chat := chatPromptTokens(t, env, `{"max_tokens":1,"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city",`+
		`"parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Berlin"]}},"required":["city"]}}}],"messages":[{"role":"user","content":"weather?"},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},`+
		`{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`)
	if u := resp.Usage; u.InputTokens+u.CacheReadInputTokens != chat {
		t.Errorf("round trip usage %+v; the chat request has %d prompt tokens", u, chat)
	}
	r := env.post("/v1/messages/count_tokens", `{"tools":[`+anthropicWeatherTool+`],"messages":[{"role":"user","content":"weather?"},`+
		`{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"sunny"}]}]}]}`)
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &count) != nil || count.InputTokens != chat {
		t.Errorf("count_tokens: %d %s; the chat request has %d prompt tokens", r.status, r.body, chat)
	}
}

func TestMessagesErrors(t *testing.T) {
	env := newEnv(t, envOpts{keys: []string{"k1"}})
	auth := []string{"Authorization", "Bearer k1"}
	for _, tc := range []struct {
		name, body string
		status     int
		typ        string
	}{
		{"max_tokens required", `{"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest, "invalid_request_error"},
		{"temperature over 1", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"temperature":1.5}`, http.StatusBadRequest, "invalid_request_error"},
		{"image block", `{"messages":[{"role":"user","content":[{"type":"image","source":{}}]}],"max_tokens":2}`, http.StatusBadRequest, "invalid_request_error"},
		{"server tool", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, http.StatusBadRequest, "invalid_request_error"},
		{"thinking without a budget", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"thinking":{"type":"enabled"}}`, http.StatusBadRequest, "invalid_request_error"},
		{"unknown tool named", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":[` + anthropicWeatherTool + `],"tool_choice":{"type":"tool","name":"nope"}}`, http.StatusBadRequest, "invalid_request_error"},
		{"over the context", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`, http.StatusBadRequest, "invalid_request_error"},
		{"text block without text", `{"messages":[{"role":"user","content":[{"type":"text"}]}],"max_tokens":2}`, http.StatusBadRequest, "invalid_request_error"},
		{"null content", `{"messages":[{"role":"user","content":null}],"max_tokens":2}`, http.StatusBadRequest, "invalid_request_error"},
		{"system a number", `{"system":5,"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, http.StatusBadRequest, "invalid_request_error"},
		{"unknown model", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, http.StatusNotFound, "not_found_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := env.post("/v1/messages", tc.body, auth...)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil || r.status != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" {
				t.Errorf("status %d, body %s; want %d %s in Anthropic's shape", r.status, r.body, tc.status, tc.typ)
			}
		})
	}
	// With a key configured, the bearer key works as on the other routes.
	if r := env.post("/v1/messages", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, auth...); r.status != http.StatusOK {
		t.Errorf("with the key: %d %s", r.status, r.body)
	}
}
