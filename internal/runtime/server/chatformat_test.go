package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/anthropic"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
)

// llamaCppTemplate is one of llama.cpp's reference chat templates
// (models/templates), parsed by the model package.
func llamaCppTemplate(t *testing.T, name string) *model.JinjaTemplate {
	t.Helper()
	if testing.Short() {
		// The real templates' prompts run to thousands of tokens, which the
		// cpu executor prefills slowly under the race detector (-short):
		// these run in the plain pass.
		t.Skip("a real template's long prompt: not with -short")
	}
	src, err := os.ReadFile(filepath.Join(llamacpp.Source(t), "models", "templates", name))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := model.NewJinjaTemplate(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tmpl
}

// TestForcedCallInModelFormat: over a random-weight model carrying the
// real Qwen3-Coder template, a forced call is written in the model's own
// XML markup (the constrained decoder writes <function=…><parameter=…>)
// and comes back structured in all three APIs: tool_calls in chat
// completions (whole and streamed), a function_call item in Responses and
// a tool_use block in Messages, with arguments valid for the tool's
// schema (the XML's untyped values converted with it).
func TestForcedCallInModelFormat(t *testing.T) {
	env, _ := newCPUEnv(t, llamaCppTemplate(t, "Qwen3-Coder.jinja"))
	if f := env.srv.format.ToolsName(); f != "qwen3_coder" {
		t.Fatalf("detected tool format %q, want qwen3_coder", f)
	}
	const msgs = `"messages":[{"role":"user","content":"weather?"}]`
	body := `{` + msgs + `,"tools":` + toolsJSON + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"max_tokens":200,"seed":3`
	r := env.post("/v1/chat/completions", body+`}`)
	if r.status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	ch := resp.Choices[0]
	if *ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.Content != "" {
		t.Fatalf("chat: %s", r.body)
	}
	call := ch.Message.ToolCalls[0]
	checkCall(t, "chat", assembled{call.Function.Name, call.Function.Arguments, call.ID}, "get_weather")

	calls, content, finish := assembleStream(t, env.streamRequest("/v1/chat/completions", body+`,"stream":true}`))
	if finish != "tool_calls" || len(calls) != 1 || strings.TrimSpace(content) != "" {
		t.Fatalf("chat streamed: finish %q, %d calls, content %q", finish, len(calls), content)
	}
	// (The two replies are not compared: the second reads its prompt's KV
	// from the prefix cache, whose arithmetic may differ in the last bits.)
	checkCall(t, "chat streamed", calls[0], "get_weather")

	r = env.post("/v1/responses", `{"input":"weather?","tools":[{"type":"function","name":"get_weather","parameters":`+weatherParams+`}],`+
		`"tool_choice":{"type":"function","name":"get_weather"},"max_output_tokens":200,"seed":3}`)
	if r.status != http.StatusOK {
		t.Fatalf("responses: %d %s", r.status, r.body)
	}
	var rr struct {
		Output []struct {
			Type, Name, Arguments string
		} `json:"output"`
	}
	if err := json.Unmarshal(r.body, &rr); err != nil {
		t.Fatal(err)
	}
	var fc []assembled
	for _, it := range rr.Output {
		if it.Type == "function_call" {
			fc = append(fc, assembled{it.Name, it.Arguments, "x"})
		}
	}
	if len(fc) != 1 {
		t.Fatalf("responses: want one function_call item: %s", r.body)
	}
	checkCall(t, "responses", fc[0], "get_weather")

	r = env.post("/v1/messages", `{"model":"","max_tokens":200,"messages":[{"role":"user","content":"weather?"}],`+
		`"tools":[{"name":"get_weather","input_schema":`+weatherParams+`}],"tool_choice":{"type":"tool","name":"get_weather"}}`)
	if r.status != http.StatusOK {
		t.Fatalf("messages: %d %s", r.status, r.body)
	}
	var mr anthropic.Response
	if err := json.Unmarshal(r.body, &mr); err != nil {
		t.Fatal(err)
	}
	if len(mr.Content) != 1 || mr.Content[0].Type != "tool_use" || *mr.StopReason != "tool_use" {
		t.Fatalf("messages: want one tool_use block: %s", r.body)
	}
	checkCall(t, "messages", assembled{mr.Content[0].Name, string(mr.Content[0].Input), mr.Content[0].ID}, "get_weather")
}

// TestReasoningInThreeAPIs: Qwen3.5's generation prompt opens <think>, so
// a random-weight model carrying its template answers inside reasoning:
// every API returns that text as reasoning, not content (chat's
// reasoning_content, whole and as deltas; a Responses reasoning item; a
// Messages thinking block), and a forced call still ends the reasoning
// and comes back as a call.
func TestReasoningInThreeAPIs(t *testing.T) {
	env, _ := newCPUEnv(t, llamaCppTemplate(t, "Qwen3.5-4B.jinja"))
	if f := env.srv.format; f.ToolsName() != "qwen3_coder" || f.Reasoning != "think" {
		t.Fatalf("detected %q/%q, want qwen3_coder/think", f.ToolsName(), f.Reasoning)
	}
	const body = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":12,"seed":7,"ignore_eos":true`
	r := env.post("/v1/chat/completions", body+`}`)
	if r.status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	msg := resp.Choices[0].Message
	if msg.ReasoningContent == "" || msg.Reasoning != msg.ReasoningContent || msg.Content != "" {
		t.Fatalf("chat: want the output as reasoning: %s", r.body)
	}
	var streamed, streamedContent string
	for _, ev := range env.streamRequest("/v1/chat/completions", body+`,"stream":true}`) {
		if ev == "[DONE]" {
			continue
		}
		var c openai.ChatChunk
		decodeStrict(t, []byte(ev), &c)
		if len(c.Choices) > 0 {
			streamed += c.Choices[0].Delta.ReasoningContent
			if p := c.Choices[0].Delta.Content; p != nil {
				streamedContent += *p
			}
		}
	}
	if streamed == "" || streamedContent != "" {
		t.Errorf("streamed reasoning %q content %q: want the output as reasoning", streamed, streamedContent)
	}

	r = env.post("/v1/responses", `{"input":"hi","max_output_tokens":12,"seed":7}`)
	if r.status != http.StatusOK {
		t.Fatalf("responses: %d %s", r.status, r.body)
	}
	var rr struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct{ Type, Text string }
		} `json:"output"`
		Usage openai.ResponseUsage `json:"usage"`
	}
	if err := json.Unmarshal(r.body, &rr); err != nil {
		t.Fatal(err)
	}
	if len(rr.Output) == 0 || rr.Output[0].Type != "reasoning" || rr.Output[0].Content[0].Type != "reasoning_text" || rr.Output[0].Content[0].Text == "" {
		t.Fatalf("responses: want a reasoning item first: %s", r.body)
	}
	if u := rr.Usage; u.OutputTokensDetails.ReasoningTokens == 0 || u.OutputTokensDetails.ReasoningTokens > u.OutputTokens {
		t.Errorf("responses: %d reasoning tokens of %d output tokens", u.OutputTokensDetails.ReasoningTokens, u.OutputTokens)
	}

	r = env.post("/v1/messages", `{"model":"","max_tokens":12,"messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("messages: %d %s", r.status, r.body)
	}
	var mr anthropic.Response
	if err := json.Unmarshal(r.body, &mr); err != nil {
		t.Fatal(err)
	}
	if len(mr.Content) == 0 || mr.Content[0].Type != "thinking" || mr.Content[0].Thinking == nil || *mr.Content[0].Thinking == "" {
		t.Fatalf("messages: want a thinking block first: %s", r.body)
	}

	// A forced call: the constrained output opens with <tool_call>, which
	// ends the reasoning the prompt opened.
	r = env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"tools":`+toolsJSON+
		`,"tool_choice":"required","parallel_tool_calls":false,"max_tokens":200,"seed":3}`)
	if r.status != http.StatusOK {
		t.Fatalf("forced: %d %s", r.status, r.body)
	}
	resp = openai.ChatResponse{}
	decodeStrict(t, r.body, &resp)
	if ch := resp.Choices[0]; *ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("forced: %s", r.body)
	} else {
		c := ch.Message.ToolCalls[0]
		checkCall(t, "forced after opened reasoning", assembled{c.Function.Name, c.Function.Arguments, c.ID}, "")
	}

}

// TestPastReasoningToTemplate: an assistant message's reasoning, under
// either name, is the template's message.reasoning_content.
func TestPastReasoningToTemplate(t *testing.T) {
	msgs := chatMessages([]openai.Message{
		{Role: "assistant", ReasoningContent: "R1"},
		{Role: "assistant", Reasoning: "R2"},
		{Role: "assistant", ReasoningContent: "R3", Reasoning: "other"},
	})
	for i, want := range []string{"R1", "R2", "R3"} {
		if got := msgs[i].ReasoningContent; got != want {
			t.Errorf("message %d: reasoning_content %q, want %q", i, got, want)
		}
	}
}

// describedTools are toolsJSON with a description each (gpt-oss's
// template requires one).
var describedTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":` + weatherParams + `}},
	{"type":"function","function":{"name":"get_time","description":"Time","parameters":` + timeParams + `}}]`

// TestForcedCallHarmony: over a random-weight model carrying gpt-oss's
// real template (llama.cpp's openai-gpt-oss-120b.jinja), a forced call is written as a commentary message to
// functions.NAME (the constrained decoder writes the header; the byte
// vocabulary spells its special tokens in bytes, a real one writes them
// as the tokens) and comes back as a call in chat completions and
// Messages.
func TestForcedCallHarmony(t *testing.T) {
	env, _ := newCPUEnv(t, llamaCppTemplate(t, "openai-gpt-oss-120b.jinja"))
	if f := env.srv.format; f.ToolsName() != "harmony" || f.Reasoning != "harmony" {
		t.Fatalf("detected %q/%q, want harmony/harmony", f.ToolsName(), f.Reasoning)
	}
	r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"tools":`+describedTools+
		`,"tool_choice":{"type":"function","function":{"name":"get_time"}},"max_tokens":200,"seed":3}`)
	if r.status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	ch := resp.Choices[0]
	if *ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.Content != "" {
		t.Fatalf("chat: %s", r.body)
	}
	c := ch.Message.ToolCalls[0]
	checkCall(t, "harmony chat", assembled{c.Function.Name, c.Function.Arguments, c.ID}, "get_time")

	r = env.post("/v1/messages", `{"model":"","max_tokens":200,"messages":[{"role":"user","content":"weather?"}],`+
		`"tools":[{"name":"get_time","description":"Time","input_schema":`+timeParams+`}],"tool_choice":{"type":"any"}}`)
	if r.status != http.StatusOK {
		t.Fatalf("messages: %d %s", r.status, r.body)
	}
	var mr anthropic.Response
	if err := json.Unmarshal(r.body, &mr); err != nil {
		t.Fatal(err)
	}
	if n := len(mr.Content); n == 0 || mr.Content[n-1].Type != "tool_use" {
		t.Fatalf("messages: want a tool_use block: %s", r.body)
	}
	checkCall(t, "harmony messages", assembled{mr.Content[len(mr.Content)-1].Name, string(mr.Content[len(mr.Content)-1].Input), "x"}, "get_time")
}

// specialBytes is a decoder of the 256 byte tokens and two special tokens
// (256 "<|channel|>", 257 "<|end|>"), whose text TokenBytes leaves out.
type specialBytes struct{}

func (specialBytes) TokenBytes(id int32) []byte {
	if id < 256 {
		return []byte{byte(id)}
	}
	return nil
}

func (specialBytes) SpecialText(id int32) []byte {
	switch id {
	case 256:
		return []byte("<|channel|>")
	case 257:
		return []byte("<|end|>")
	}
	return nil
}

// TestSpecialVocabulary: a forced harmony call may write the special
// tokens of its markup as the tokens themselves, and no other special
// token, while other grammars see no special token at all.
func TestSpecialVocabulary(t *testing.T) {
	gs := newGrammars(258, specialBytes{})
	compile := func(ctx context.Context) (*grammar.Grammar, []string, error) {
		return grammar.CompileHeaderToolCalls(ctx, grammar.HeaderToolCallFormat{Open: "<|channel|>commentary to=functions.", NameEnd: "<|end|>"},
			[]grammar.ToolSpec{{Name: "f"}}, false)
	}
	allowed := func(g *grammar.Grammar, specials []string, tok int) bool {
		m := gs.matcher(g, []int32{0}, specials)
		return m.Mask(100)[tok/64]&(1<<(tok%64)) != 0
	}
	with, err := gs.getWith(context.Background(), "with", []string{"<|channel|>"}, compile)
	if err != nil {
		t.Fatal(err)
	}
	if !allowed(with.g, []string{"<|channel|>"}, 256) || !allowed(with.g, []string{"<|channel|>"}, '<') {
		t.Error("the markup's special token (or its bytes) is not allowed at the start")
	}
	without, err := gs.get(context.Background(), "without", compile)
	if err != nil {
		t.Fatal(err)
	}
	if allowed(without.g, nil, 256) || allowed(without.g, nil, 257) {
		t.Error("a special token is allowed in a grammar that names none")
	}
}

// plainBytes decodes the 256 byte tokens.
type plainBytes struct{}

func (plainBytes) TokenBytes(id int32) []byte { return []byte{byte(id)} }

// TestThinkingBudgetConstraint: reasoning gets budget tokens, then the
// closing tokens are forced one by one, then the answer is free; output
// that does not open reasoning, or closes it in time, is never held.
func TestThinkingBudgetConstraint(t *testing.T) {
	closing := []int32{'<', '/', 't', 'h', 'i', 'n', 'k', '>'}
	feed := func(tb *thinkingBudget, s string) {
		for i := range len(s) {
			if !tb.Advance(int32(s[i])) {
				t.Fatalf("%q: byte %d refused", s, i)
			}
		}
	}
	tb := newThinkingBudget(3, closing, plainBytes{}, 256, true)
	feed(tb, "abc")
	if tb.Advance('d') {
		t.Fatal("a fourth reasoning token was allowed")
	}
	feed(tb, "</think>")
	feed(tb, "answer of any length")

	// The closing tag counts: "ab</think>" is 10 tokens.
	tb = newThinkingBudget(10, closing, plainBytes{}, 256, false)
	feed(tb, " <think>ab</think>then anything at all")
	tb = newThinkingBudget(9, closing, plainBytes{}, 256, false)
	feed(tb, " <think>ab</think")
	if tb.Advance('>') {
		t.Fatal("a tenth reasoning token was allowed")
	}

	tb = newThinkingBudget(3, closing, plainBytes{}, 256, false)
	feed(tb, "no reasoning here, long enough")
}

// TestReasoningStreams: streamed, the reasoning the prompt opened comes
// as Responses reasoning_text deltas (the completed response holding the
// same text in its reasoning item) and as Messages thinking_delta events
// in a thinking block.
func TestReasoningStreams(t *testing.T) {
	env, _ := newCPUEnv(t, llamaCppTemplate(t, "Qwen3.5-4B.jinja"))
	var deltas, final string
	for _, sev := range env.namedEvents("/v1/responses", `{"input":"hi","max_output_tokens":12,"seed":7,"stream":true}`) {
		ev := sev.raw
		var e struct {
			Type     string `json:"type"`
			Delta    string `json:"delta"`
			Response struct {
				Output []struct {
					Type    string `json:"type"`
					Content []struct{ Text string }
				} `json:"output"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
		switch e.Type {
		case "response.reasoning_text.delta":
			deltas += e.Delta
		case "response.output_text.delta":
			t.Errorf("answer text %q streamed: the output is all reasoning", e.Delta)
		case "response.completed", "response.incomplete":
			if o := e.Response.Output; len(o) > 0 && o[0].Type == "reasoning" {
				final = o[0].Content[0].Text
			}
		}
	}
	if deltas == "" || deltas != final {
		t.Errorf("responses: reasoning deltas %q, final reasoning item %q", deltas, final)
	}

	deltas = ""
	blockTypes := []string{}
	for _, sev := range env.namedEvents("/v1/messages", `{"model":"","max_tokens":12,"stream":true,"messages":[{"role":"user","content":"hi"}]}`) {
		ev := sev.raw
		var e struct {
			Type         string `json:"type"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
			Delta struct {
				Type     string `json:"type"`
				Thinking string `json:"thinking"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
		if e.Type == "content_block_start" {
			blockTypes = append(blockTypes, e.ContentBlock.Type)
		}
		if e.Delta.Type == "thinking_delta" {
			deltas += e.Delta.Thinking
		}
	}
	if len(blockTypes) != 1 || blockTypes[0] != "thinking" || deltas == "" {
		t.Errorf("messages: blocks %v, thinking %q", blockTypes, deltas)
	}
}

// TestThinkingOffForAThinkingModel: a model whose template has a thinking
// switch (Qwen3.5's) does not think when the request turns thinking off:
// chat's reasoning_effort none, Responses' reasoning.effort none and
// Anthropic's thinking disabled reach the template as enable_thinking
// false, its prompt closes the reasoning block, and the whole reply is
// the answer.
func TestThinkingOffForAThinkingModel(t *testing.T) {
	env, _ := newCPUEnv(t, llamaCppTemplate(t, "Qwen3.5-4B.jinja"))
	r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":12,"seed":7,"ignore_eos":true,"reasoning_effort":"none"}`)
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	if m := resp.Choices[0].Message; m.ReasoningContent != "" || m.Content == "" {
		t.Errorf("chat: %s", r.body)
	}
	r = env.post("/v1/responses", `{"input":"hi","max_output_tokens":12,"seed":7,"reasoning":{"effort":"none"}}`)
	if strings.Contains(string(r.body), `"type":"reasoning"`) || !strings.Contains(string(r.body), `"type":"output_text"`) {
		t.Errorf("responses: %s", r.body)
	}
	r = env.post("/v1/messages", `{"model":"","max_tokens":12,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`)
	var mr anthropic.Response
	if err := json.Unmarshal(r.body, &mr); err != nil {
		t.Fatal(err)
	}
	for _, b := range mr.Content {
		if b.Type == "thinking" {
			t.Errorf("messages: a thinking block with thinking disabled: %s", r.body)
		}
	}
}

// TestPastReasoningInPrompt: reasoning sent back in each API's own shape
// (chat's reasoning_content, a Responses reasoning item, a Messages
// thinking block) is rendered by the template where it renders past
// reasoning: Qwen3.5's, for the turns after the last user message (a
// tool-call loop).
func TestPastReasoningInPrompt(t *testing.T) {
	env, _ := newCPUEnv(t, llamaCppTemplate(t, "Qwen3.5-4B.jinja"))
	render := func(chat *openai.ChatRequest) string {
		t.Helper()
		toks, apiErr := env.srv.renderChat(context.Background(), http.Header{}, chat, &job{promptParam: "messages"})
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		return env.srv.cfg.Codec.Decode(toks)
	}
	tool := `{"type":"function","function":{"name":"get_time","parameters":` + timeParams + `}}`
	chat, apiErr := openai.ParseChat([]byte(`{"messages":[{"role":"user","content":"time?"},` +
		`{"role":"assistant","content":"","reasoning_content":"CHAT-REASONING","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_time","arguments":"{\"zone\":\"utc\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"noon"}],"tools":[` + tool + `]}`))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	if p := render(chat); !strings.Contains(p, "CHAT-REASONING") {
		t.Errorf("chat: past reasoning not in the prompt:\n%s", p)
	}

	resp, apiErr := openai.ParseResponses([]byte(`{"input":[{"role":"user","content":"time?"},` +
		`{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"RESP-REASONING"}]},` +
		`{"type":"function_call","call_id":"c1","name":"get_time","arguments":"{\"zone\":\"utc\"}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"noon"}],"tools":[{"type":"function","name":"get_time","parameters":` + timeParams + `}]}`))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	turn, apiErr := resp.ChatRequest(noHistory{})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	if p := render(turn.Chat); !strings.Contains(p, "RESP-REASONING") {
		t.Errorf("responses: past reasoning not in the prompt:\n%s", p)
	}

	msg, apiErr := anthropic.Parse([]byte(`{"model":"","max_tokens":8,"tools":[{"name":"get_time","input_schema":` + timeParams + `}],"messages":[{"role":"user","content":"time?"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"MSG-REASONING","signature":""},{"type":"tool_use","id":"c1","name":"get_time","input":{"zone":"utc"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"noon"}]}]}`))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	mchat, apiErr := msg.ChatRequest()
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	if p := render(mchat); !strings.Contains(p, "MSG-REASONING") {
		t.Errorf("messages: past reasoning not in the prompt:\n%s", p)
	}
}

// TestForcedCallPythonic: over a random-weight model carrying LFM2's real
// template, a forced call is written as LFM2's pythonic list between its
// markers (the constrained decoder writes
// <|tool_call_start|>[get_weather(city="…", unit="c")]<|tool_call_end|>)
// and comes back as a structured call, whole and streamed, with arguments
// valid for the tool's schema.
func TestForcedCallPythonic(t *testing.T) {
	env, _ := newCPUEnv(t, llamaCppTemplate(t, "LFM2-8B-A1B.jinja"))
	if f := env.srv.format.ToolsName(); f != "lfm2" {
		t.Fatalf("detected tool format %q, want lfm2", f)
	}
	const msgs = `"messages":[{"role":"user","content":"weather?"}]`
	body := `{` + msgs + `,"tools":` + toolsJSON + `,"tool_choice":"required","max_tokens":200,"seed":5`
	r := env.post("/v1/chat/completions", body+`}`)
	if r.status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	ch := resp.Choices[0]
	if *ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) == 0 || ch.Message.Content != "" {
		t.Fatalf("chat: %s", r.body)
	}
	for _, call := range ch.Message.ToolCalls {
		checkCall(t, "chat", assembled{call.Function.Name, call.Function.Arguments, call.ID}, "")
	}
	calls, content, finish := assembleStream(t, env.streamRequest("/v1/chat/completions", body+`,"stream":true}`))
	if finish != "tool_calls" || len(calls) == 0 || strings.TrimSpace(content) != "" {
		t.Fatalf("chat streamed: finish %q, %d calls, content %q", finish, len(calls), content)
	}
	for _, c := range calls {
		checkCall(t, "chat streamed", c, "")
	}
}
