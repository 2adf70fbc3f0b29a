package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/anthropic"
	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/util/testing/jsonschema"
	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
	"github.com/kvpilot/kvpilot/internal/util/testing/runtimeproc"
)

// This file runs the runtime binary on a GGUF of every architecture the
// registry serves (issue 31: "a runtime process serving each architecture
// answers a chat completion, a stream and a forced tool call over HTTP").

// archCase is one architecture's pod: a tiny random-weight model written
// by kvpilot-model with the architecture's features switched on, carrying
// the chat template of a model of that architecture from llama.cpp's
// models/templates, so the pod detects that model's tool-call format.
type archCase struct {
	arch string
	// template is the file in llama.cpp's models/templates.
	template string
	// callMarkup is what the model writes, in its own format, for a
	// forced call of get_weather: the pod must have detected the format
	// from the template (the default ChatML renders and parses Hermes'
	// <tool_call>).
	callMarkup string
	// context is --context, which /v1/models must report.
	context int
	// flags are kvpilot-model write's geometry flags.
	flags []string
}

// archCases has one row per registered architecture;
// TestArchitectureCasesCoverRegistry holds it to the registry.
var archCases = []archCase{
	{arch: "llama", template: "meta-llama-Llama-3.1-8B-Instruct.jinja", callMarkup: `{"name": "get_weather"`, context: 4096,
		flags: []string{"--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "96", "--dtype", "f16", "--rope-freqs", "--rope-theta", "500000"}},
	{arch: "qwen2", template: "Qwen-Qwen2.5-7B-Instruct.jinja", callMarkup: "<tool_call>", context: 4096,
		flags: []string{"--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "96", "--dtype", "q8_0", "--qkv-bias", "--tied"}},
	{arch: "qwen3", template: "Qwen-Qwen3-0.6B.jinja", callMarkup: "<tool_call>", context: 4096,
		flags: []string{"--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ffn", "96", "--dtype", "f16", "--tied"}},
	{arch: "qwen3moe", template: "Qwen3-Coder.jinja", callMarkup: "<function=get_weather>", context: 4096,
		flags: []string{"--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "96", "--dtype", "q8_0", "--experts", "8", "--experts-used", "2", "--expert-ffn", "32"}},
	{arch: "glm4moe", template: "GLM-4.6.jinja", callMarkup: "<tool_call>get_weather", context: 4096,
		flags: []string{"--layers", "3", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--rope-dims", "16", "--ffn", "96", "--dtype", "f16", "--qkv-bias",
			"--experts", "8", "--experts-used", "2", "--expert-ffn", "32", "--shared-experts", "1", "--dense-layers", "1", "--expert-weights-norm", "--expert-weights-scale", "2.5"}},
	{arch: "mistral3", template: "mistralai-Ministral-3-14B-Reasoning-2512.jinja", callMarkup: "[TOOL_CALLS]get_weather[ARGS]", context: 8192,
		flags: []string{"--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "96", "--dtype", "f16", "--rope-scaling", "yarn", "--rope-scaling-factor", "16",
			"--rope-orig-ctx", "512", "--yarn-beta-fast", "32", "--yarn-beta-slow", "1", "--yarn-log-mul", "1", "--attn-temp-scale", "0.1"}},
	// A window of 32 tokens, far shorter than the Harmony prompts; MXFP4
	// experts as gpt-oss is released; YaRN.
	{arch: "gpt-oss", template: "openai-gpt-oss-120b.jinja", callMarkup: "to=functions.get_weather", context: 8192,
		flags: []string{"--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ffn", "64", "--dtype", "f16", "--experts", "4", "--experts-used", "2",
			"--expert-ffn", "32", "--expert-dtype", "mxfp4", "--sliding-window", "32", "--rope-theta", "150000", "--rope-scaling", "yarn", "--rope-scaling-factor", "32", "--rope-orig-ctx", "256"}},
	// GLM-4.7-Flash's shape: multi-head latent attention.
	{arch: "deepseek2", template: "GLM-4.7-Flash.jinja", callMarkup: "<tool_call>get_weather", context: 4096,
		flags: []string{"--layers", "2", "--dim", "64", "--heads", "4", "--ffn", "96", "--dtype", "f16", "--q-lora-rank", "32", "--kv-lora-rank", "32", "--rope-dims", "16",
			"--key-length-mla", "48", "--value-length-mla", "32", "--experts", "4", "--experts-used", "2", "--expert-ffn", "32", "--shared-experts", "1", "--dense-layers", "1",
			"--expert-gating", "sigmoid", "--expert-selection-bias", "--expert-weights-norm", "--expert-weights-scale", "1.8"}},
	{arch: "qwen35", template: "Qwen3.5-4B.jinja", callMarkup: "<function=get_weather>", context: 4096,
		flags: []string{"--layers", "4", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ffn", "64", "--dtype", "f16",
			"--ssm-key-heads", "1", "--ssm-value-heads", "4", "--ssm-state-size", "16"}},
	{arch: "qwen35moe", template: "Qwen3.5-4B.jinja", callMarkup: "<function=get_weather>", context: 4096,
		flags: []string{"--layers", "4", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ffn", "64", "--dtype", "f16",
			"--experts", "8", "--experts-used", "2", "--expert-ffn", "32", "--ssm-key-heads", "1", "--ssm-value-heads", "4", "--ssm-state-size", "16"}},
	{arch: "qwen3next", template: "Qwen-Qwen3-0.6B.jinja", callMarkup: "<tool_call>", context: 4096,
		flags: []string{"--layers", "4", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ffn", "64", "--dtype", "f16",
			"--experts", "8", "--experts-used", "2", "--expert-ffn", "32", "--ssm-key-heads", "1", "--ssm-value-heads", "4", "--ssm-state-size", "16"}},
}

// TestArchitectureCasesCoverRegistry: every architecture this build
// registers has a row in archCases, and every row names a registered one,
// so a new architecture is served over HTTP before it counts as served.
func TestArchitectureCasesCoverRegistry(t *testing.T) {
	var rows []string
	for _, c := range archCases {
		rows = append(rows, c.arch)
	}
	slices.Sort(rows)
	if reg := arch.Names(); !slices.Equal(rows, reg) {
		t.Errorf("archCases cover %v; the registry has %v", rows, reg)
	}
}

// weatherSchema is the forced tool's parameters: short bounded values, so
// a random model's constrained call ends within a few dozen tokens.
const weatherSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`

// TestArchitecturesOverHTTP (issue 31): a runtime process on the ggml
// executor serving a GGUF of each architecture answers over HTTP a chat
// completion, the same completion streamed (the same text under greedy
// decoding, ending in [DONE]), a forced tool call in chat completions,
// whole and streamed, and in the Messages API (one call, in the model's
// own markup, arguments valid for the schema), and reports the architecture and context length
// in /v1/models.
func TestArchitecturesOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the runtime binary")
	}
	lib := testGGMLLib(t)
	templates := filepath.Join(llamacpp.Source(t), "models", "templates")
	// The fixtures are written by the command users run; both binaries are
	// built before the parallel subtests start.
	writer := runtimeproc.Build(t, "github.com/kvpilot/kvpilot/cmd/kvpilot-model", "kvpilot-model")
	runtimeproc.Binary(t)
	for _, c := range archCases {
		t.Run(c.arch, func(t *testing.T) {
			t.Parallel()
			gguf := filepath.Join(t.TempDir(), c.arch+".gguf")
			args := append([]string{"write", "--out", gguf, "--arch", c.arch, "--context", fmt.Sprint(c.context), "--chat-template", filepath.Join(templates, c.template)}, c.flags...)
			if out, err := exec.Command(writer, args...).CombinedOutput(); err != nil {
				t.Fatalf("kvpilot-model %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			p := startModelPod(t, c.arch, lib, gguf)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			name := checkModelList(t, p, c)
			checkChatAndStream(ctx, t, p)
			call := checkForcedCall(ctx, t, p, c)
			checkForcedCallStream(ctx, t, p, call)
			checkForcedMessagesCall(ctx, t, p, name)
			if strings.Contains(p.Log(), "level=ERROR") {
				t.Errorf("the pod logged errors")
			}
		})
	}
}

// startModelPod serves gguf on the ggml executor, one CPU thread and a
// small KV cache, at the model's own context length.
func startModelPod(t *testing.T, name, lib, gguf string) *pod {
	t.Helper()
	p := runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options: runtimeproc.Options{
			Name: name,
			Args: []string{"--executor", "ggml", "--device", "cpu", "--ggml-lib", lib, "--cpu-threads", "1", "--model", gguf, "--kv-cache-memory", "16Mi"},
			Env:  cleanEnv(),
		},
		ControlToken: testControlToken,
		ReadyTimeout: startTimeout,
	})
	return &pod{Pod: p, t: t}
}

// checkModelList: GET /v1/models lists the one model, with the file's
// architecture and context length; it returns the model's id.
func checkModelList(t *testing.T, p *pod, c archCase) string {
	t.Helper()
	resp, err := http.Get("http://" + p.API + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list openai.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/models: %d %v", resp.StatusCode, err)
	}
	if len(list.Data) != 1 {
		t.Fatalf("/v1/models: %+v; want one model", list.Data)
	}
	if m := list.Data[0]; m.Architecture != c.arch || m.MaxModelLen != c.context {
		t.Errorf("/v1/models: architecture %q, max_model_len %d; want %q, %d", m.Architecture, m.MaxModelLen, c.arch, c.context)
	}
	return list.Data[0].ID
}

// greedyChat is a chat request decoded greedily: the whole answer and the
// stream must carry the same tokens.
const greedyChat = `"messages":[{"role":"user","content":"What is the weather like?"}],"max_tokens":12,"temperature":0,"seed":7`

// checkChatAndStream: a chat completion returns one choice and its usage;
// streamed, the same request's chunks end in [DONE] and carry the same
// text, reasoning, finish reason and usage.
func checkChatAndStream(ctx context.Context, t *testing.T, p *pod) {
	t.Helper()
	r := postTo(ctx, p.API, "/v1/chat/completions", "", `{`+greedyChat+`}`)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("chat: %d %v %s", r.status, r.err, r.body)
	}
	var whole openai.ChatResponse
	if err := json.Unmarshal([]byte(r.body), &whole); err != nil {
		t.Fatalf("chat: %v: %s", err, r.body)
	}
	if len(whole.Choices) != 1 || whole.Choices[0].FinishReason == nil || whole.Usage == nil {
		t.Fatalf("chat: %s; want one finished choice and usage", r.body)
	}
	u := whole.Usage
	if u.PromptTokens == 0 || u.CompletionTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("chat usage %+v", *u)
	}

	r = postTo(ctx, p.API, "/v1/chat/completions", "", `{`+greedyChat+`,"stream":true,"stream_options":{"include_usage":true}}`)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("chat stream: %d %v %s", r.status, r.err, r.body)
	}
	chunks, done := sseData(t, r.body)
	if !done {
		t.Fatalf("chat stream does not end in [DONE]: %q", tail(r.body))
	}
	var text, reasoning, finish string
	var usage *openai.Usage
	for _, d := range chunks {
		var ch openai.ChatChunk
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				text += *c.Delta.Content
			}
			reasoning += c.Delta.ReasoningContent
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
	}
	m := whole.Choices[0].Message
	if text != m.Content || reasoning != m.ReasoningContent || finish != *whole.Choices[0].FinishReason {
		t.Errorf("streamed %q (reasoning %q, %s); whole %q (reasoning %q, %s)", text, reasoning, finish, m.Content, m.ReasoningContent, *whole.Choices[0].FinishReason)
	}
	if usage == nil || *usage != *u {
		t.Errorf("streamed usage %+v; whole %+v", usage, *u)
	}
}

// sseData returns the data of each server-sent event before [DONE], and
// whether [DONE] ended the stream.
func sseData(t *testing.T, body string) (data []string, done bool) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if done {
			t.Errorf("an event after [DONE]: %q", d)
		}
		if d == "[DONE]" {
			done = true
			continue
		}
		data = append(data, d)
	}
	return data, done
}

// weatherTool is the forced tool in chat completions' shape.
const weatherTool = `"tools":[{"type":"function","function":{"name":"get_weather","description":"The forecast for a city","parameters":` + weatherSchema + `}}]`

// forcedChat is a chat request that forces a call of get_weather.
const forcedChat = `"messages":[{"role":"user","content":"Weather in Paris for 3 days?"}],` + weatherTool +
	`,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"max_tokens":300,"temperature":0,"seed":7`

// checkForcedCall: tool_choice naming get_weather gets exactly one call of
// it, written in the model's own markup (the token ids returned are the
// byte vocabulary's bytes), with arguments valid for the schema. It
// returns the call.
func checkForcedCall(ctx context.Context, t *testing.T, p *pod, c archCase) openai.ToolCall {
	t.Helper()
	r := postTo(ctx, p.API, "/v1/chat/completions", "", `{`+forcedChat+`,"return_token_ids":true}`)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("forced call: %d %v %s", r.status, r.err, r.body)
	}
	var resp openai.ChatResponse
	if err := json.Unmarshal([]byte(r.body), &resp); err != nil || len(resp.Choices) != 1 {
		t.Fatalf("forced call: %v: %s", err, r.body)
	}
	ch := resp.Choices[0]
	if calls := ch.Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].ID == "" {
		t.Fatalf("forced call: %s; want one call of get_weather", r.body)
	}
	if err := jsonschema.Validate([]byte(weatherSchema), []byte(ch.Message.ToolCalls[0].Function.Arguments)); err != nil {
		t.Errorf("forced call's arguments %s: %v", ch.Message.ToolCalls[0].Function.Arguments, err)
	}
	if ch.FinishReason == nil || *ch.FinishReason != "tool_calls" {
		t.Errorf("forced call finished %v; want tool_calls", ch.FinishReason)
	}
	raw := byteText(ch.TokenIDs)
	t.Logf("forced call written as %q", raw)
	if !strings.Contains(raw, c.callMarkup) {
		t.Errorf("the model wrote %q; want %q, the call markup of %s's format", raw, c.callMarkup, c.template)
	}
	return ch.Message.ToolCalls[0]
}

// checkForcedCallStream: the forced call streamed comes as delta.tool_calls
// of one call (index 0, its id and name first) whose argument pieces make
// the whole answer's arguments, then finish_reason tool_calls and [DONE].
func checkForcedCallStream(ctx context.Context, t *testing.T, p *pod, whole openai.ToolCall) {
	t.Helper()
	r := postTo(ctx, p.API, "/v1/chat/completions", "", `{`+forcedChat+`,"stream":true}`)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("forced call streamed: %d %v %s", r.status, r.err, r.body)
	}
	chunks, done := sseData(t, r.body)
	if !done {
		t.Fatalf("forced call stream does not end in [DONE]: %q", tail(r.body))
	}
	var got openai.ToolCall
	var finish string
	for _, d := range chunks {
		var ch openai.ChatChunk
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if tc.Index == nil || *tc.Index != 0 {
					t.Fatalf("forced call streamed: a delta of call %v; want call 0 only: %s", tc.Index, d)
				}
				got.ID += tc.ID
				got.Function.Name += tc.Function.Name
				got.Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	var a, b any
	errA, errB := json.Unmarshal([]byte(got.Function.Arguments), &a), json.Unmarshal([]byte(whole.Function.Arguments), &b)
	if got.ID == "" || got.Function.Name != whole.Function.Name || errA != nil || errB != nil || !reflect.DeepEqual(a, b) || finish != "tool_calls" {
		t.Errorf("forced call streamed: id %q, %s(%s), finish %q; whole %s(%s)", got.ID, got.Function.Name, got.Function.Arguments, finish, whole.Function.Name, whole.Function.Arguments)
	}
}

// byteText is the text of token ids of the byte vocabulary (ids below 256
// are bytes; the others, BOS and EOS, are left out).
func byteText(ids []int32) string {
	var b []byte
	for _, id := range ids {
		if id >= 0 && id < 256 {
			b = append(b, byte(id))
		}
	}
	return string(b)
}

// checkForcedMessagesCall: in the Messages API, tool_choice {type: tool}
// gets exactly one tool_use block of the tool, its input valid for the
// schema.
func checkForcedMessagesCall(ctx context.Context, t *testing.T, p *pod, model string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":300,"temperature":0,"messages":[{"role":"user","content":"Weather in Paris for 3 days?"}],`+
		`"tools":[{"name":"get_weather","description":"The forecast for a city","input_schema":%s}],"tool_choice":{"type":"tool","name":"get_weather"}}`, model, weatherSchema)
	r := postTo(ctx, p.API, "/v1/messages", "", body)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("messages forced call: %d %v %s", r.status, r.err, r.body)
	}
	var resp anthropic.Response
	if err := json.Unmarshal([]byte(r.body), &resp); err != nil {
		t.Fatalf("messages forced call: %v: %s", err, r.body)
	}
	var uses []anthropic.ContentBlock
	for _, b := range resp.Content {
		if b.Type == "tool_use" {
			uses = append(uses, b)
		}
	}
	if len(uses) != 1 || uses[0].Name != "get_weather" || resp.StopReason == nil || *resp.StopReason != "tool_use" {
		t.Fatalf("messages forced call: %s; want one tool_use of get_weather, stop_reason tool_use", r.body)
	}
	if err := jsonschema.Validate([]byte(weatherSchema), uses[0].Input); err != nil {
		t.Errorf("messages forced call's input %s: %v", uses[0].Input, err)
	}
}
