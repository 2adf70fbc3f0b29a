package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/util/testing/jsonschema"
)

const weatherParams = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]}},"required":["city","unit"]}`
const timeParams = `{"type":"object","properties":{"zone":{"type":"string","maxLength":8}},"required":["zone"]}`

var toolsJSON = `[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":` + weatherParams + `}},
	{"type":"function","function":{"name":"get_time","parameters":` + timeParams + `}}]`

// qwenTemplate is the real Qwen2.5 chat template.
func qwenTemplate(t *testing.T) *model.JinjaTemplate {
	t.Helper()
	src, err := os.ReadFile("../model/testdata/chat_templates/qwen2.5.jinja")
	if err != nil {
		t.Fatal(err)
	}
	qwen, err := model.NewJinjaTemplate(string(src), "", "<|endoftext|>")
	if err != nil {
		t.Fatal(err)
	}
	return qwen
}

func toolEnvs(t *testing.T) map[string]*testEnv {
	qwen := qwenTemplate(t)
	builtin, _ := newCPUEnv(t)
	jinja, _ := newCPUEnv(t, qwen)
	return map[string]*testEnv{"builtin chatml": builtin, "qwen2.5 jinja": jinja}
}

// assembled is a response's calls as a client ends up with them.
type assembled struct {
	name, args, id string
}

// assembleStream accumulates delta.tool_calls by index the way the openai
// Python and npm clients do: id, type and name from the first piece,
// arguments concatenated.
func assembleStream(t *testing.T, events []string) (calls []assembled, content, finish string) {
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var c openai.ChatChunk
		decodeStrict(t, []byte(ev), &c)
		if len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
		if ch.Delta.Content != nil {
			content += *ch.Delta.Content
		}
		for _, tc := range ch.Delta.ToolCalls {
			i := *tc.Index
			for len(calls) <= i {
				calls = append(calls, assembled{})
			}
			if tc.ID != "" {
				calls[i].id = tc.ID
			}
			calls[i].name += tc.Function.Name
			calls[i].args += tc.Function.Arguments
		}
	}
	return calls, content, finish
}

func checkCall(t *testing.T, label string, c assembled, want string) {
	t.Helper()
	params := map[string]string{"get_weather": weatherParams, "get_time": timeParams}
	if want != "" && c.name != want {
		t.Errorf("%s: called %q, want %q", label, c.name, want)
	}
	p, ok := params[c.name]
	if !ok {
		t.Fatalf("%s: unknown function %q", label, c.name)
	}
	if c.id == "" {
		t.Errorf("%s: no call id", label)
	}
	if err := jsonschema.Validate([]byte(p), []byte(c.args)); err != nil {
		t.Errorf("%s: arguments %q: %v", label, c.args, err)
	}
}

// TestToolChoiceEnforced: required and named choices make even the
// random-weight model call a tool with valid arguments, streamed and not.
func TestToolChoiceEnforced(t *testing.T) {
	for label, env := range toolEnvs(t) {
		for _, tc := range []struct{ choice, want string }{
			{`"required"`, ""},
			{`{"type":"function","function":{"name":"get_time"}}`, "get_time"},
		} {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"weather?"}],"tools":%s,"tool_choice":%s,"max_tokens":300,"seed":5,"parallel_tool_calls":false`, toolsJSON, tc.choice)
			r := env.post("/v1/chat/completions", body+"}")
			if r.status != http.StatusOK {
				t.Fatalf("%s %s: %d %s", label, tc.choice, r.status, r.body)
			}
			var resp openai.ChatResponse
			decodeStrict(t, r.body, &resp)
			ch := resp.Choices[0]
			if *ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("%s %s: %s", label, tc.choice, r.body)
			}
			if !strings.Contains(string(r.body), `"content":null`) && ch.Message.Content != "" {
				t.Errorf("%s: content %q beside the call", label, ch.Message.Content)
			}
			call := ch.Message.ToolCalls[0]
			checkCall(t, label+" "+tc.choice, assembled{call.Function.Name, call.Function.Arguments, call.ID}, tc.want)

			calls, _, finish := assembleStream(t, env.streamRequest("/v1/chat/completions", body+`,"stream":true}`))
			if finish != "tool_calls" || len(calls) != 1 {
				t.Fatalf("%s %s streamed: finish %q, %d calls", label, tc.choice, finish, len(calls))
			}
			checkCall(t, label+" streamed "+tc.choice, calls[0], tc.want)
		}
		// auto and none answer (the noise model rarely calls on its own).
		for _, choice := range []string{`"auto"`, `"none"`} {
			r := env.post("/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"tools":%s,"tool_choice":%s,"max_tokens":20}`, toolsJSON, choice))
			if r.status != http.StatusOK {
				t.Errorf("%s %s: %d %s", label, choice, r.status, r.body)
			}
		}
	}
}

func TestToolFieldsRefused(t *testing.T) {
	env, _ := newCPUEnv(t)
	for _, tc := range []struct{ extra, param string }{
		{`"tools":` + toolsJSON + `,"tool_choice":{"type":"function","function":{"name":"nope"}}`, "tool_choice"},
		{`"tools":[{"type":"retrieval"}]`, "tools"},
		{`"tools":` + toolsJSON + `,"tool_choice":"sometimes"`, "tool_choice"},
		{`"tool_choice":"required"`, "tool_choice"},
		{`"functions":[{"name":"f"}],"function_call":{"name":"g"}`, "function_call"},
		{`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"allOf":[{"type":"integer"},{"type":"string"}]}}}}}],"tool_choice":"required"`, "tools"},
	} {
		r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],`+tc.extra+`}`)
		var e openai.ErrorResponse
		_ = json.Unmarshal(r.body, &e)
		if r.status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != tc.param {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.extra, r.status, r.body, tc.param)
		}
	}
}

// TestToolStreamerSplitsContentAndCalls: text and calls come apart the same
// however the output is cut into pieces.
func TestToolStreamerSplitsContentAndCalls(t *testing.T) {
	out := "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"zone\": \"UTC\"}, \"name\": \"get_time\"}\n</tool_call>"
	for _, step := range []int{1, 3, 7, len(out)} {
		ts := openai.NewToolStreamer(openai.ToolFormatHermes)
		var content string
		args := map[int]string{}
		for i := 0; i < len(out); i += step {
			c, ds := ts.Feed([]byte(out[i:min(i+step, len(out))]))
			content += string(c)
			for _, d := range ds {
				args[d.Index] += d.Arguments
			}
		}
		c, ds, called := ts.Finish()
		content += string(c)
		for _, d := range ds {
			args[d.Index] += d.Arguments
		}
		calls := ts.Calls()
		if !called || strings.TrimSpace(content) != "Let me check." || len(calls) != 2 || calls[0].Function.Name != "get_weather" || calls[1].Function.Name != "get_time" ||
			args[0] != `{"city": "Pa}ris", "unit": "c"}` || args[1] != `{"zone": "UTC"}` {
			t.Errorf("step %d: content %q calls %+v args %v", step, content, calls, args)
		}
	}
	for format, text := range map[string]string{
		openai.ToolFormatLlama3JSON: `{"name": "get_time", "parameters": {"zone": "UTC"}}`,
		openai.ToolFormatMistral:    `[TOOL_CALLS] [{"name": "get_time", "arguments": {"zone": "UTC"}}]`,
	} {
		ts := openai.NewToolStreamer(format)
		ts.Feed([]byte(text))
		_, _, called := ts.Finish()
		if calls := ts.Calls(); !called || len(calls) != 1 || calls[0].Function.Name != "get_time" || calls[0].Function.Arguments != `{"zone": "UTC"}` {
			t.Errorf("%s: %+v", format, calls)
		}
	}
	ts := openai.NewToolStreamer(openai.ToolFormatLlama3JSON)
	c, _ := ts.Feed([]byte("Hello {world}"))
	c2, _, called := ts.Finish()
	if called || string(c)+string(c2) != "Hello {world}" {
		t.Errorf("plain text read as a call: %q", string(c)+string(c2))
	}
}

// TestToolCallsPerChoice: with n = 2 and logprobs, each choice is read for
// calls on its own: both call the named tool, streamed (delta.tool_calls
// under each choice's index, beside its logprobs) and not.
func TestToolCallsPerChoice(t *testing.T) {
	env := toolEnvs(t)["qwen2.5 jinja"]
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"time?"}],"tools":%s,"tool_choice":{"type":"function","function":{"name":"get_time"}},"max_tokens":300,"seed":3,"n":2,"logprobs":true`, toolsJSON)
	r := env.post("/v1/chat/completions", body+"}")
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	if len(resp.Choices) != 2 {
		t.Fatalf("%d choices, want 2: %s", len(resp.Choices), r.body)
	}
	for i, ch := range resp.Choices {
		if ch.Index != i || *ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Logprobs == nil {
			t.Fatalf("choice %d: %s", i, r.body)
		}
		call := ch.Message.ToolCalls[0]
		checkCall(t, fmt.Sprintf("choice %d", i), assembled{call.Function.Name, call.Function.Arguments, call.ID}, "get_time")
	}

	// Split the stream by choice index, then assemble each.
	byChoice := map[int][]string{}
	logprobs := map[int]int{}
	for _, ev := range env.streamRequest("/v1/chat/completions", body+`,"stream":true}`) {
		if ev == "[DONE]" {
			continue
		}
		var c openai.ChatChunk
		decodeStrict(t, []byte(ev), &c)
		for _, ch := range c.Choices {
			one := c
			one.Choices = []openai.ChatChunkChoice{ch}
			b, err := json.Marshal(one)
			if err != nil {
				t.Fatal(err)
			}
			byChoice[ch.Index] = append(byChoice[ch.Index], string(b))
			if ch.Logprobs != nil {
				logprobs[ch.Index] += len(ch.Logprobs.Content)
			}
		}
	}
	for i := range 2 {
		calls, _, finish := assembleStream(t, byChoice[i])
		if finish != "tool_calls" || len(calls) != 1 {
			t.Fatalf("streamed choice %d: finish %q, %d calls", i, finish, len(calls))
		}
		checkCall(t, fmt.Sprintf("streamed choice %d", i), calls[0], "get_time")
		if logprobs[i] == 0 {
			t.Errorf("streamed choice %d: no logprobs", i)
		}
	}
}

// TestTokenizeRendersToolTurns: /tokenize renders an assistant's
// tool_calls and the tool's answer through the template, exactly as a chat
// request's prompt, and a template refusal is a 400 naming messages.
func TestTokenizeRendersToolTurns(t *testing.T) {
	env := toolEnvs(t)["qwen2.5 jinja"]
	msgs := `[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\",\"unit\":\"c\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`
	r := env.post("/tokenize", `{"messages":`+msgs+`,"return_token_strs":true}`)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var resp openai.TokenizeResponse
	decodeStrict(t, r.body, &resp)
	text := strings.Join(resp.TokenStrs, "")
	for _, want := range []string{"<tool_call>", `"name": "get_weather"`, "Oslo", "<tool_response>", "sunny", "<|im_start|>assistant"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered prompt lacks %q:\n%s", want, text)
		}
	}
	// continue_final_message on an empty final message: the template
	// cannot leave it open.
	r = env.post("/tokenize", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""}],"continue_final_message":true,"add_generation_prompt":false}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"param":"messages"`) {
		t.Errorf("continue_final_message on an empty message: %d %s", r.status, r.body)
	}
}

// TestToolArgumentsKeepMarkupOut: arguments that are not an object (what
// a model may write for a tool without parameters) end where their value
// ends: the closing marker and the next call stay out of them, however
// the output is cut into pieces.
func TestToolArgumentsKeepMarkupOut(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want []string
	}{
		{"<tool_call>\n{\"name\": \"f\", \"arguments\": 510773748}\n</tool_call>", []string{"510773748"}},
		{"<tool_call>\n{\"name\": \"f\", \"arguments\": 1}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>", []string{"1", "{}"}},
		// An object cut short by the closing marker: the next call is
		// read on its own.
		{"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {\"b\": 2}}\n</tool_call>", []string{`{"a": [1` + "\n", `{"b": 2}`}},
	} {
		for _, step := range []int{1, 5, len(tc.out)} {
			ts := openai.NewToolStreamer(openai.ToolFormatHermes)
			streamed := map[int]string{}
			for i := 0; i < len(tc.out); i += step {
				_, ds := ts.Feed([]byte(tc.out[i:min(i+step, len(tc.out))]))
				for _, d := range ds {
					streamed[d.Index] += d.Arguments
				}
			}
			_, ds, _ := ts.Finish()
			for _, d := range ds {
				streamed[d.Index] += d.Arguments
			}
			calls := ts.Calls()
			var got []string
			for i, c := range calls {
				got = append(got, c.Function.Arguments)
				if streamed[i] != c.Function.Arguments {
					t.Errorf("step %d %q: call %d streamed %q, whole %q", step, tc.out, i, streamed[i], c.Function.Arguments)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("step %d %q: arguments (-want +got):\n%s", step, tc.out, diff)
			}
		}
	}
}

// TestEmptyParametersMeanAnObject: a tool with parameters {} or none,
// forced by name or by required (parallel), is called with a JSON object
// as arguments, and under required each call is its own.
func TestEmptyParametersMeanAnObject(t *testing.T) {
	env := toolEnvs(t)["qwen2.5 jinja"]
	tools := `[{"type":"function","function":{"name":"ping","parameters":{}}},{"type":"function","function":{"name":"pong"}}]`
	for _, choice := range []string{`{"type":"function","function":{"name":"ping"}}`, `{"type":"function","function":{"name":"pong"}}`, `"required"`} {
		for seed := range 6 {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"go"}],"tools":%s,"tool_choice":%s,"max_tokens":200,"seed":%d}`, tools, choice, seed)
			r := env.post("/v1/chat/completions", body)
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d %s", choice, r.status, r.body)
			}
			var resp openai.ChatResponse
			decodeStrict(t, r.body, &resp)
			for _, call := range resp.Choices[0].Message.ToolCalls {
				var args map[string]any
				if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil || strings.Contains(call.Function.Arguments, "tool_call") {
					t.Errorf("%s seed %d: %s arguments %q are not a JSON object: %v", choice, seed, call.Function.Name, call.Function.Arguments, err)
				}
			}
			if *resp.Choices[0].FinishReason == "tool_calls" && len(resp.Choices[0].Message.ToolCalls) == 0 {
				t.Errorf("%s seed %d: finish tool_calls without calls", choice, seed)
			}
		}
	}
}
