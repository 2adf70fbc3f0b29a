package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/util/testing/jsonschema"
	"github.com/kvpilot/kvpilot/internal/util/testing/nodeclients"
)

// TestNodeClients drives /v1/responses and /v1/messages with the clients
// agent frameworks use (OpenAI's `openai`, the Vercel AI SDK's default
// provider, Anthropic's SDK), installed from npm by
// hack/setup-node-clients.sh, against the built-in random-weight model:
// its text is noise, so the scripts check structure, events and the tool
// calls forced by tool_choice. It skips without node, npm or the registry.
func TestNodeClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Node.js clients: not with -short")
	}
	dir := nodeclients.Dir(t)
	// The scripts check that a follow-up turn reads its prefix from the
	// cache: the pod reports cache reads only with the flag.
	env, _ := newCPUEnvWith(t, envOpts{programs: programs.New(programs.Config{Pod: "a"}), promptTokensDetails: true})
	run := func(script string) []byte {
		return nodeclients.Run(t, dir, "testdata/node/"+script, "MODEL="+testModel, "BASE_URL="+env.ts.URL+"/v1",
			"OPENAI_BASE_URL="+env.ts.URL+"/v1", "OPENAI_API_KEY=unused", "ANTHROPIC_BASE_URL="+env.ts.URL)
	}
	steps := map[string]int{}
	for _, p := range env.srv.cfg.Programs.Report().Programs {
		steps[p.ID] = p.Steps
	}

	t.Run("openai", func(t *testing.T) {
		var got struct {
			Text struct {
				Object, Status, OutputText string
				InputTokens, OutputTokens  int
			}
			Call struct {
				Status, Name string
				Args         struct{ City string }
			}
			Follow struct {
				Status                                string
				Previous                              bool
				InputTokens, FirstInputTokens, Cached int
			}
			Stream struct {
				Types []string
				SeqOK bool
				Args  struct{ City string }
				Final bool
			}
		}
		out := run("openai_responses.mjs")
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if got.Text.Object != "response" || got.Text.Status != "incomplete" || got.Text.OutputText != "string" || got.Text.OutputTokens != 8 {
			t.Errorf("text: %+v", got.Text)
		}
		if got.Call.Status != "completed" || got.Call.Name != "get_weather" || (got.Call.Args.City != "Paris" && got.Call.Args.City != "Berlin") {
			t.Errorf("forced call: %+v", got.Call)
		}
		if !got.Follow.Previous || got.Follow.InputTokens <= got.Follow.FirstInputTokens || got.Follow.Cached < got.Follow.FirstInputTokens/16*16 {
			t.Errorf("follow-up turn: %+v", got.Follow)
		}
		wantTypes := []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
		if !slices.Equal(got.Stream.Types, wantTypes) || !got.Stream.SeqOK || got.Stream.Args.City == "" || !got.Stream.Final {
			t.Errorf("stream: %+v", got.Stream)
		}
	})

	t.Run("ai-sdk", func(t *testing.T) {
		type step struct {
			Finish      string
			Calls       [][]string
			Results     []int
			Text        string
			InputTokens int
		}
		var got struct {
			Generate []step
			Stream   struct {
				Parts []string
				Steps []step
			}
			Executed int
		}
		out := run("ai_sdk.mjs")
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		for name, steps := range map[string][]step{"generateText": got.Generate, "streamText": got.Stream.Steps} {
			if len(steps) != 2 || steps[0].Finish != "tool-calls" || len(steps[0].Calls) != 1 || steps[0].Calls[0][0] != "get_weather" ||
				len(steps[0].Results) != 1 || steps[0].Results[0] != 21 || len(steps[1].Calls) != 0 || steps[1].Text != "string" ||
				steps[1].InputTokens <= steps[0].InputTokens {
				t.Errorf("%s steps: %+v", name, steps)
			}
		}
		for _, part := range []string{"start", "start-step", "tool-input-start", "tool-call", "tool-result", "finish-step", "text-delta", "finish"} {
			if !slices.Contains(got.Stream.Parts, part) {
				t.Errorf("streamText parts %v lack %q", got.Stream.Parts, part)
			}
		}
		if got.Executed != 2 {
			t.Errorf("the tool ran %d times, want 2", got.Executed)
		}
	})

	t.Run("anthropic", func(t *testing.T) {
		var got struct {
			Text struct {
				Type, Role, Stop string
				Output           int
				Blocks           []string
			}
			Call   struct{ Stop, Name, City string }
			Follow struct {
				Stop          string
				Input, Cached int
			}
			Stream struct {
				Events                  []string
				Stop, Block, City, JSON string
			}
			Error struct {
				Status int
				Type   string
			}
		}
		out := run("anthropic.mjs")
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if got.Text.Type != "message" || got.Text.Role != "assistant" || got.Text.Stop != "max_tokens" || got.Text.Output != 8 {
			t.Errorf("text: %+v", got.Text)
		}
		if got.Call.Stop != "tool_use" || got.Call.Name != "get_weather" || (got.Call.City != "Paris" && got.Call.City != "Berlin") {
			t.Errorf("forced tool_use: %+v", got.Call)
		}
		if got.Follow.Stop != "max_tokens" || got.Follow.Cached == 0 {
			t.Errorf("tool_result turn: %+v", got.Follow)
		}
		wantEvents := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
		if !slices.Equal(got.Stream.Events, wantEvents) || got.Stream.Stop != "tool_use" || got.Stream.Block != "tool_use" ||
			got.Stream.City == "" || got.Stream.City != got.Stream.JSON {
			t.Errorf("stream: %+v", got.Stream)
		}
		if got.Error.Status != 400 || got.Error.Type != "invalid_request_error" {
			t.Errorf("missing max_tokens: %+v", got.Error)
		}
	})

	// Program ids came from the clients' X-Program-Id headers.
	after := map[string]int{}
	for _, p := range env.srv.cfg.Programs.Report().Programs {
		after[p.ID] = p.Steps
	}
	for id, want := range map[string]int{"node-openai": 4, "node-ai-sdk": 4, "node-anthropic": 4} {
		if after[id]-steps[id] != want && !t.Failed() {
			t.Errorf("program %s: %d steps, want %d (all: %v)", id, after[id]-steps[id], want, after)
		}
	}
}

// TestNodeClientsPerFormat: the official `openai` and `@anthropic-ai/sdk`
// clients read a forced tool call from pods whose random-weight models
// carry real chat templates of each representative output format (the
// constrained decoder writes the call in the format's own markup, the
// pod's parser reads it back): tool_calls in chat completions, a
// function_call item in Responses and a tool_use block in Messages, whole
// and through the SDKs' stream helpers, with arguments valid for the
// schema. Qwen3.5's template opens <think> in its generation prompt, so
// that pod's plain answer is reasoning: reasoning_content, a reasoning
// item and a thinking block, whole and streamed, and no content. One node
// process goes through all the pods.
func TestNodeClientsPerFormat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Node.js clients: not with -short")
	}
	dir := nodeclients.Dir(t)
	type pod struct {
		Label     string `json:"label"`
		URL       string `json:"url"`
		Reasoning bool   `json:"reasoning"`
	}
	formats := []struct{ label, template, format, reasoning string }{
		{"qwen3-coder", "Qwen3-Coder.jinja", "qwen3_coder", ""},
		{"qwen3.5", "Qwen3.5-4B.jinja", "qwen3_coder", "think"},
		{"gpt-oss", "openai-gpt-oss-120b.jinja", "harmony", "harmony"},
		{"glm-4.6", "GLM-4.6.jinja", "glm45", "think"},
		{"qwen2.5", "Qwen-Qwen2.5-7B-Instruct.jinja", "hermes", ""},
		{"mistral-nemo", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral", ""},
		{"lfm2", "LFM2-8B-A1B.jinja", "lfm2", ""},
	}
	var pods []pod
	for _, f := range formats {
		env, _ := newCPUEnv(t, llamaCppTemplate(t, f.template))
		if got := env.srv.format; got.ToolsName() != f.format || got.Reasoning != f.reasoning {
			t.Fatalf("%s: detected %q/%q, want %q/%q", f.template, got.ToolsName(), got.Reasoning, f.format, f.reasoning)
		}
		pods = append(pods, pod{Label: f.label, URL: env.ts.URL, Reasoning: f.label == "qwen3.5"})
	}
	podsJSON, err := json.Marshal(pods)
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		N                     int
		Name, Args, ID        string
		Content, Status, Stop string
	}
	type text struct{ Type, Text, Reasoning, Content string }
	var got map[string]struct {
		Chat, ChatStream, Responses, ResponsesStream, Messages, MessagesStream call
		Reasoning                                                              *struct {
			Chat, ChatStream, Responses, ResponsesStream, Messages, MessagesStream text
		}
	}
	out := nodeclients.Run(t, dir, "testdata/node/formats.mjs", "MODEL="+testModel, "PODS="+string(podsJSON))
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	for _, p := range pods {
		r, ok := got[p.Label]
		if !ok {
			t.Errorf("%s: no result", p.Label)
			continue
		}
		for api, c := range map[string]call{"chat": r.Chat, "chat streamed": r.ChatStream, "responses": r.Responses,
			"responses streamed": r.ResponsesStream, "messages": r.Messages, "messages streamed": r.MessagesStream} {
			label := p.Label + " " + api
			if c.N != 1 || strings.TrimSpace(c.Content) != "" {
				t.Errorf("%s: %d calls, content %q; want one call and no content", label, c.N, c.Content)
				continue
			}
			if c.Name != "get_weather" || c.ID == "" {
				t.Errorf("%s: called %q (id %q), want get_weather", label, c.Name, c.ID)
			}
			// The script's schema: city, one of Paris and Berlin.
			const params = `{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Berlin"]}},"required":["city"]}`
			if err := jsonschema.Validate([]byte(params), []byte(c.Args)); err != nil {
				t.Errorf("%s: arguments %q: %v", label, c.Args, err)
			}
		}
		if r.Responses.Status != "completed" || r.ResponsesStream.Status != "completed" || r.Messages.Stop != "tool_use" || r.MessagesStream.Stop != "tool_use" {
			t.Errorf("%s: responses status %q/%q, messages stop %q/%q", p.Label, r.Responses.Status, r.ResponsesStream.Status, r.Messages.Stop, r.MessagesStream.Stop)
		}
		if !p.Reasoning {
			continue
		}
		if r.Reasoning == nil {
			t.Errorf("%s: no reasoning results", p.Label)
			continue
		}
		rs := r.Reasoning
		for api, x := range map[string]text{"chat": rs.Chat, "chat streamed": rs.ChatStream} {
			if x.Reasoning == "" || x.Content != "" {
				t.Errorf("%s %s: reasoning %q, content %q; want the answer as reasoning", p.Label, api, x.Reasoning, x.Content)
			}
		}
		for api, x := range map[string]text{"responses": rs.Responses, "responses streamed": rs.ResponsesStream} {
			if x.Type != "reasoning" || x.Text == "" {
				t.Errorf("%s %s: first item %q %q; want a reasoning item", p.Label, api, x.Type, x.Text)
			}
		}
		for api, x := range map[string]text{"messages": rs.Messages, "messages streamed": rs.MessagesStream} {
			if x.Type != "thinking" || x.Text == "" {
				t.Errorf("%s %s: first block %q %q; want a thinking block", p.Label, api, x.Type, x.Text)
			}
		}
	}
}
