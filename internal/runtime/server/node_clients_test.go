package server

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/programs"
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
