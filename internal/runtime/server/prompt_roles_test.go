package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/anthropic"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// noHistory is a Responses history with nothing stored.
type noHistory struct{}

func (noHistory) Conversation(string) ([]openai.Message, bool) { return nil, false }
func (noHistory) Item(string) (openai.ResponseItem, bool)      { return openai.ResponseItem{}, false }

// TestEveryRoleReachesThePrompt renders, through the real Qwen2.5
// template (which renders no developer role and a system message only
// where it stands), a conversation of every role and content part each
// API accepts, each text a marker, and fails if any marker is missing
// from the prompt: no instruction is dropped silently.
func TestEveryRoleReachesThePrompt(t *testing.T) {
	env := toolEnvs(t)["qwen2.5 jinja"]
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":` + weatherParams + `}}]`
	tests := []struct {
		api, body string
		markers   []string
	}{
		{"chat", `{"messages":[` +
			`{"role":"system","content":"CHAT-SYSTEM"},` +
			`{"role":"developer","content":[{"type":"text","text":"CHAT-DEV-1"},{"type":"text","text":"CHAT-DEV-2"}]},` +
			`{"role":"user","content":[{"type":"text","text":"CHAT-USER-1"},{"type":"text","text":"CHAT-USER-2"}]},` +
			`{"role":"assistant","content":"CHAT-ASSISTANT","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"CHAT-ARG\"}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"CHAT-TOOL"},` +
			`{"role":"system","content":"CHAT-LATE-SYSTEM"},` +
			`{"role":"user","content":"CHAT-USER-3"}],` + tools + `}`,
			[]string{"CHAT-SYSTEM", "CHAT-DEV-1", "CHAT-DEV-2", "CHAT-USER-1", "CHAT-USER-2", "CHAT-ASSISTANT", "get_weather", "CHAT-ARG", "CHAT-TOOL", "CHAT-LATE-SYSTEM", "CHAT-USER-3"}},
		{"responses", `{"instructions":"RESP-INSTRUCTIONS","input":[` +
			`{"type":"message","role":"developer","content":[{"type":"input_text","text":"RESP-DEV-1"},{"type":"input_text","text":"RESP-DEV-2"}]},` +
			`{"role":"system","content":"RESP-SYSTEM"},` +
			`{"role":"user","content":[{"type":"input_text","text":"RESP-USER"}]},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"RESP-ASSISTANT"}]},` +
			`{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"RESP-ARG\"}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"RESP-TOOL"},` +
			`{"role":"user","content":"RESP-USER-2"}],` +
			`"tools":[{"type":"function","name":"get_weather","parameters":` + weatherParams + `}]}`,
			[]string{"RESP-INSTRUCTIONS", "RESP-DEV-1", "RESP-DEV-2", "RESP-SYSTEM", "RESP-USER", "RESP-ASSISTANT", "get_weather", "RESP-ARG", "RESP-TOOL", "RESP-USER-2"}},
		{"messages", `{"max_tokens":8,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=1.0.abc;"},` +
			`{"type":"text","text":"MSG-SYSTEM-1","cache_control":{"type":"ephemeral"}},{"type":"text","text":"MSG-SYSTEM-2"}],"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"MSG-USER-1"},{"type":"text","text":"MSG-USER-2"}]},` +
			`{"role":"system","content":[{"type":"text","text":"MSG-ENV"}]},` +
			`{"role":"assistant","content":[{"type":"text","text":"MSG-ASSISTANT"},{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"MSG-ARG"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"MSG-TOOL"}]},{"type":"text","text":"MSG-USER-3"}]},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"get_weather","input":{"city":"x"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":"MSG-TOOL-ERROR"}]}],` +
			`"tools":[{"name":"get_weather","input_schema":` + weatherParams + `}]}`,
			[]string{"MSG-SYSTEM-1", "MSG-SYSTEM-2", "MSG-USER-1", "MSG-USER-2", "MSG-ENV", "MSG-ASSISTANT", "get_weather", "MSG-ARG", "MSG-TOOL", "MSG-USER-3", "MSG-TOOL-ERROR"}},
	}
	for _, tc := range tests {
		t.Run(tc.api, func(t *testing.T) {
			var chat *openai.ChatRequest
			var apiErr *openai.Error
			switch tc.api {
			case "chat":
				chat, apiErr = openai.ParseChat([]byte(tc.body))
			case "responses":
				var r *openai.ResponsesRequest
				if r, apiErr = openai.ParseResponses([]byte(tc.body)); apiErr == nil {
					var turn *openai.ResponsesTurn
					if turn, apiErr = r.ChatRequest(noHistory{}); apiErr == nil {
						chat = turn.Chat
					}
				}
			case "messages":
				var r *anthropic.Request
				if r, apiErr = anthropic.Parse([]byte(tc.body)); apiErr == nil {
					chat, apiErr = r.ChatRequest()
				}
			}
			if apiErr != nil {
				t.Fatal(apiErr)
			}
			toks, apiErr := env.srv.renderChat(context.Background(), http.Header{}, chat, &job{promptParam: "messages"})
			if apiErr != nil {
				t.Fatal(apiErr)
			}
			prompt := env.srv.cfg.Codec.Decode(toks)
			for _, m := range tc.markers {
				if !strings.Contains(prompt, m) {
					t.Errorf("%s missing from the prompt:\n%s", m, prompt)
				}
			}
			if strings.Contains(prompt, "billing-header") {
				t.Errorf("the billing header reached the prompt:\n%s", prompt)
			}
		})
	}
}

// TestCodexInstructionsReachThePrompt: Codex 0.171.0 sends its base
// instructions and permissions as developer messages (19 KB), which the
// Qwen2.5 template renders no role for; they reach the prompt as system
// turns, every token of them (before, its 29.5 KB request rendered
// without them, silently).
func TestCodexInstructionsReachThePrompt(t *testing.T) {
	env := toolEnvs(t)["qwen2.5 jinja"]
	body := codexDefault(t)
	render := func(body map[string]any) (string, int) {
		t.Helper()
		r, apiErr := openai.ParseResponses([]byte(mustJSON(t, body)))
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		turn, apiErr := r.ChatRequest(noHistory{})
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		toks, apiErr := env.srv.renderChat(context.Background(), http.Header{}, turn.Chat, &job{promptParam: "input"})
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		return env.srv.cfg.Codec.Decode(toks), len(toks)
	}
	prompt, n := render(body)
	// emptied is the request with each developer text replaced by "":
	// the same turns, so the difference is the texts' tokens.
	var developer []string
	emptied := map[string]any{}
	for k, v := range body {
		emptied[k] = v
	}
	var input []any
	for _, it := range body["input"].([]any) {
		m := it.(map[string]any)
		if m["role"] != "developer" {
			input = append(input, it)
			continue
		}
		var parts []any
		for _, part := range m["content"].([]any) {
			developer = append(developer, part.(map[string]any)["text"].(string))
			parts = append(parts, map[string]any{"type": "input_text", "text": ""})
		}
		input = append(input, map[string]any{"type": "message", "role": "developer", "content": parts})
	}
	emptied["input"] = input
	if len(developer) < 2 {
		t.Fatalf("the fixture has %d developer texts; want Codex's instructions and permissions", len(developer))
	}
	devTokens := 0
	for _, text := range developer {
		devTokens += len(env.srv.cfg.Codec.Encode(text, false))
		if !strings.Contains(prompt, strings.TrimSpace(text)) {
			t.Errorf("developer text missing from the prompt: %.80q…", text)
		}
	}
	_, without := render(emptied)
	if n-without != devTokens {
		t.Errorf("the developer texts add %d prompt tokens; they are %d tokens", n-without, devTokens)
	}
	t.Logf("prompt %d tokens, %d with the developer texts empty; the texts are %d tokens", n, without, devTokens)
}
