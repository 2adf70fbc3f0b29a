package server

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// codexDefault is Codex 0.171.0's first request of a session, as captured
// (ids replaced by fixed fake ones), with the model renamed to the one
// served here.
func codexDefault(t *testing.T) map[string]any {
	t.Helper()
	var fx struct {
		Body map[string]any `json:"body"`
	}
	b, err := os.ReadFile("testdata/clients/codex-0.171.0-1.json")
	if err == nil {
		err = json.Unmarshal(b, &fx)
	}
	if err != nil {
		t.Fatal(err)
	}
	fx.Body["model"] = testModel
	return fx.Body
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Codex's default request (reasoning, include, store false, a namespace,
// web_search, prompt_cache_key, client_metadata, developer messages) is
// answered with a whole stream, as its program.
func TestResponsesCodexDefaultRequest(t *testing.T) {
	// The prompt is over the tiny model's context: the simulated engine
	// runs it, and stops at its first " the", as a model stops at its end
	// of turn.
	env := newEnv(t, envOpts{programs: programs.New(programs.Config{Pod: "a"}), stop: []string{" the"}, maxModelLen: 65536, numBlocks: 4096})
	body := codexDefault(t)
	session := body["prompt_cache_key"].(string)
	resp, cancel := env.openStream("/v1/responses", mustJSON(t, body),
		"session-id", session, "thread-id", session, "x-client-request-id", session, "originator", "codex_exec")
	cancel()
	if got := resp.Header.Get(HeaderToolsDropped); got != "web_search" {
		t.Errorf("%s: %q, want web_search", HeaderToolsDropped, got)
	}
	evs := env.namedEvents("/v1/responses", mustJSON(t, body), "session-id", session)
	names := eventNames(evs)
	if len(names) < 3 || names[0] != "response.created" || names[len(names)-1] != "response.completed" {
		t.Fatalf("events %v", names)
	}
	final := evs[len(evs)-1].data["response"].(map[string]any)
	if final["store"] != false || final["reasoning"].(map[string]any)["summary"] != "auto" || len(final["tools"].([]any)) != 9 {
		t.Errorf("final response: store %v, reasoning %v, %d tools", final["store"], final["reasoning"], len(final["tools"].([]any)))
	}
	for _, it := range final["output"].([]any) {
		if typ := it.(map[string]any)["type"]; typ == "reasoning" {
			t.Errorf("a reasoning item from a model that does not reason: %v", it)
		}
	}
	// Its program is its session: prompt_cache_key, as the session-id
	// header says too.
	if rep := env.srv.cfg.Programs.Report(); len(rep.Programs) != 1 || rep.Programs[0].ID != session {
		t.Errorf("program table: %+v; want the one program %q", rep.Programs, session)
	}
}

// The namespace and function of Codex's multi_agent_v1 tools, with a short
// schema so that a forced call is quick.
const spawnNamespace = `{"type":"namespace","name":"multi_agent_v1","description":"Tools for sub-agents.","tools":[` +
	`{"type":"function","name":"spawn_agent","description":"Spawn an agent","strict":false,` +
	`"parameters":{"type":"object","properties":{"task":{"type":"string","enum":["build","test"]}},"required":["task"]}}]}`

func TestResponsesNamespacedToolCall(t *testing.T) {
	env, _ := newCPUEnv(t)
	check := func(t *testing.T, item map[string]any) {
		t.Helper()
		var args struct {
			Task *string `json:"task"`
		}
		if item["type"] != "function_call" || item["namespace"] != "multi_agent_v1" || item["name"] != "spawn_agent" ||
			json.Unmarshal([]byte(item["arguments"].(string)), &args) != nil || args.Task == nil {
			t.Fatalf("function call item %v", item)
		}
	}
	for _, choice := range []string{`{"type":"function","name":"spawn_agent","namespace":"multi_agent_v1"}`,
		`{"type":"function","name":"multi_agent_v1__spawn_agent"}`} {
		_, out := postResponse(t, env, `{"input":"spawn one","max_output_tokens":100,"parallel_tool_calls":false,"tools":[`+spawnNamespace+`,`+weatherTool+`],"tool_choice":`+choice+`}`)
		check(t, out[0])
	}
	evs := env.namedEvents("/v1/responses", `{"input":"spawn one","max_output_tokens":100,"stream":true,"parallel_tool_calls":false,"tools":[`+spawnNamespace+`],`+
		`"tool_choice":{"type":"function","name":"spawn_agent","namespace":"multi_agent_v1"}}`)
	var added, done map[string]any
	for _, ev := range evs {
		if ev.name == "response.output_item.added" {
			added = ev.data["item"].(map[string]any)
		}
		if ev.name == "response.output_item.done" {
			done = ev.data["item"].(map[string]any)
		}
	}
	check(t, done)
	if added["namespace"] != "multi_agent_v1" || added["name"] != "spawn_agent" {
		t.Errorf("output_item.added %v", added)
	}

	// Sent back, the call renders as the model wrote it: under the flat
	// name, in the namespace's flattened tool.
	items := `[{"role":"user","content":"spawn one"},` +
		`{"type":"function_call","call_id":"call_1","namespace":"multi_agent_v1","name":"spawn_agent","arguments":"{\"task\":\"build\"}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"spawned"}]`
	resp, _ := postResponse(t, env, `{"input":`+items+`,"max_output_tokens":2,"tools":[`+spawnNamespace+`]}`)
	chat := chatPromptTokens(t, env, `{"max_tokens":1,"tools":[{"type":"function","function":{"name":"multi_agent_v1__spawn_agent",`+
		`"description":"Tools for sub-agents.\n\nSpawn an agent","strict":false,`+
		`"parameters":{"type":"object","properties":{"task":{"type":"string","enum":["build","test"]}},"required":["task"]}}}],"messages":[{"role":"user","content":"spawn one"},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":"{\"task\":\"build\"}"}}]},`+
		`{"role":"tool","tool_call_id":"call_1","content":"spawned"}]}`)
	if resp.Usage.InputTokens != chat {
		t.Errorf("round trip: %d input tokens, the chat request %d", resp.Usage.InputTokens, chat)
	}

	// A stored call renders the same way: continuing the response that
	// made it is the conversation sent back item by item.
	tools := `"tools":[` + spawnNamespace + `]`
	first, out := postResponse(t, env, `{"input":"spawn one","max_output_tokens":100,"parallel_tool_calls":false,`+tools+`,`+
		`"tool_choice":{"type":"function","name":"spawn_agent","namespace":"multi_agent_v1"}}`)
	check(t, out[0])
	callID, args := out[0]["call_id"].(string), out[0]["arguments"].(string)
	output := `{"type":"function_call_output","call_id":"` + callID + `","output":"spawned"}`
	stored, _ := postResponse(t, env, `{"previous_response_id":"`+first.ID+`","input":[`+output+`],"max_output_tokens":2,`+tools+`}`)
	sent, _ := postResponse(t, env, `{"input":[{"role":"user","content":"spawn one"},{"type":"function_call","call_id":"`+callID+
		`","namespace":"multi_agent_v1","name":"spawn_agent","arguments":`+mustJSON(t, args)+`},`+output+`],"max_output_tokens":2,`+tools+`}`)
	if stored.Usage.InputTokens != sent.Usage.InputTokens {
		t.Errorf("previous_response_id: %d input tokens; the same items sent back: %d", stored.Usage.InputTokens, sent.Usage.InputTokens)
	}
}

func TestResponsesBuiltinToolsDropped(t *testing.T) {
	env, _ := newCPUEnv(t)
	for _, tc := range []struct{ tools, want string }{
		{`[{"type":"web_search","external_web_access":false}]`, "web_search"},
		{`[` + weatherTool + `,{"type":"custom","name":"apply_patch","format":{"type":"grammar"}},{"type":"mcp","server_label":"x"}]`, "custom:apply_patch, mcp"},
	} {
		r := env.post("/v1/responses", `{"input":"hi","max_output_tokens":2,"tool_choice":"auto","tools":`+tc.tools+`}`)
		if r.status != http.StatusOK || r.header.Get(HeaderToolsDropped) != tc.want {
			t.Errorf("tools %s: status %d, %s %q; want %q", tc.tools, r.status, HeaderToolsDropped, r.header.Get(HeaderToolsDropped), tc.want)
		}
		var resp struct {
			Tools []map[string]any `json:"tools"`
		}
		if err := json.Unmarshal(r.body, &resp); err != nil {
			t.Fatal(err)
		}
		// The response lists the tools as sent, the dropped ones too.
		var sent []map[string]any
		_ = json.Unmarshal([]byte(tc.tools), &sent)
		if diff := cmp.Diff(sent, resp.Tools); diff != "" {
			t.Errorf("tools echoed (-sent +got):\n%s", diff)
		}
	}
	if r := env.post("/v1/responses", `{"input":"hi","max_output_tokens":2,"tools":[`+weatherTool+`]}`); r.header.Get(HeaderToolsDropped) != "" {
		t.Errorf("nothing dropped, yet %s %q", HeaderToolsDropped, r.header.Get(HeaderToolsDropped))
	}
}

// effortTemplate reads reasoning_effort as gpt-oss templates do.
const effortTemplate = `{%- if reasoning_effort is defined %}<|im_start|>system
Reasoning: {{ reasoning_effort }}<|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}<|im_start|>assistant
`

func TestResponsesReasoningEffortReachesTemplate(t *testing.T) {
	tmpl, err := model.NewJinjaTemplate(effortTemplate, "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	env, _ := newCPUEnv(t, tmpl)
	input := func(body string) int {
		t.Helper()
		resp, _ := postResponse(t, env, `{"input":"hi","max_output_tokens":1,`+body+`}`)
		return resp.Usage.InputTokens
	}
	chat := func(kwargs string) int {
		return chatPromptTokens(t, env, `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1`+kwargs+`}`)
	}
	got := map[string]int{
		"no reasoning":          input(`"reasoning":{"summary":"auto"}`),
		"effort high":           input(`"reasoning":{"effort":"high","summary":null}`),
		"the client's own wins": input(`"reasoning":{"effort":"high"},"chat_template_kwargs":{"reasoning_effort":"low"}`),
	}
	want := map[string]int{
		"no reasoning":          chat(``),
		"effort high":           chat(`,"chat_template_kwargs":{"reasoning_effort":"high"}`),
		"the client's own wins": chat(`,"chat_template_kwargs":{"reasoning_effort":"low"}`),
	}
	if diff := cmp.Diff(want, got); diff != "" || want["no reasoning"] == want["effort high"] {
		t.Errorf("input tokens (-chat +responses):\n%s", diff)
	}
}

// Agent clients are programs by default: prompt_cache_key (Responses and
// chat), Codex's session-id header, Claude Code's
// x-claude-code-session-id; X-Session-ID and the body's program_id still
// come first.
func TestAgentSessionsArePrograms(t *testing.T) {
	env, _ := newCPUEnvWith(t, envOpts{programs: programs.New(programs.Config{Pod: "a"})})
	chat := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1`
	for _, tc := range []struct {
		path, body string
		header     []string
	}{
		{"/v1/responses", `{"input":"hi","max_output_tokens":1,"prompt_cache_key":"responses-key"}`, []string{"session-id", "ignored-1"}},
		{"/v1/chat/completions", chat + `,"prompt_cache_key":"chat-key"}`, nil},
		{"/v1/chat/completions", chat + `}`, []string{"session-id", "codex-session"}},
		{"/v1/messages", `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, []string{"x-claude-code-session-id", "claude-session"}},
		{"/v1/chat/completions", chat + `,"prompt_cache_key":"ignored-2"}`, []string{"X-Session-ID", "thunder-session"}},
		{"/v1/responses", `{"input":"hi","max_output_tokens":1,"program_id":"body-id","prompt_cache_key":"ignored-3"}`, nil},
	} {
		if r := env.post(tc.path, tc.body, tc.header...); r.status != http.StatusOK {
			t.Fatalf("%s %s: status %d: %s", tc.path, tc.body, r.status, r.body)
		}
	}
	var ids []string
	for _, p := range env.srv.cfg.Programs.Report().Programs {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	want := []string{"body-id", "chat-key", "claude-session", "codex-session", "responses-key", "thunder-session"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("programs (-want +got):\n%s", diff)
	}

	// A key too long for a program id is refused naming it.
	r := env.post("/v1/responses", `{"input":"hi","max_output_tokens":1,"prompt_cache_key":"`+strings.Repeat("k", programs.MaxIDLen+1)+`"}`)
	wantError(t, r, http.StatusBadRequest, "prompt_cache_key")
}
