package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/codec"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/cpu"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// newCPUEnv serves the built-in tiny model on the cpu executor.
func newCPUEnv(t testing.TB, template ...model.ChatTemplate) (*testEnv, *model.Model) {
	t.Helper()
	return newCPUEnvWith(t, envOpts{}, template...)
}

// newCPUEnvWith is newCPUEnv with the options o sets beside the model's
// (programs, keys, …).
func newCPUEnvWith(t testing.TB, o envOpts, template ...model.ChatTemplate) (*testEnv, *model.Model) {
	t.Helper()
	m, err := model.Open("builtin:tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(template) > 0 {
		m.ChatTemplate = template[0]
	}
	const numBlocks = 128
	exec, err := cpu.New(m, numBlocks, 16, cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Close)
	o.exec, o.codec, o.decoder = exec, codec.Model{Tokenizer: m.Tokenizer, Template: m.ChatTemplate}, m.Tokenizer
	o.eos, o.vocabSize, o.maxModelLen, o.numBlocks = m.Config.EOS, m.Config.VocabSize, m.Config.ContextLen, numBlocks
	env := newEnv(t, o)
	return env, m
}

func TestCPUTinyModel(t *testing.T) {
	env, m := newCPUEnv(t)
	// Greedy decoding is deterministic: the streamed and the whole text agree.
	r := env.post("/v1/completions", `{"prompt":"Hello","max_tokens":8,"temperature":0,"ignore_eos":true}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var whole openai.CompletionResponse
	decodeStrict(t, r.body, &whole)
	if whole.Usage.CompletionTokens != 8 || *whole.Choices[0].FinishReason != "length" {
		t.Errorf("completion: %s", r.body)
	}
	var streamed strings.Builder
	for _, ev := range env.streamRequest("/v1/completions", `{"prompt":"Hello","max_tokens":8,"temperature":0,"ignore_eos":true,"stream":true}`) {
		if ev == "[DONE]" {
			continue
		}
		var c openai.CompletionResponse
		decodeStrict(t, []byte(ev), &c)
		streamed.WriteString(c.Choices[0].Text)
	}
	if streamed.String() != whole.Choices[0].Text {
		t.Errorf("streamed %q, whole %q", streamed.String(), whole.Choices[0].Text)
	}

	r = env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"temperature":0}`)
	if r.status != http.StatusOK {
		t.Fatalf("chat: status %d: %s", r.status, r.body)
	}
	var chat openai.ChatResponse
	decodeStrict(t, r.body, &chat)
	text, err := m.ChatTemplate.Render(&model.Chat{Messages: []model.Message{{Role: "user", Content: "hi"}}, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	wantPrompt := len(m.Tokenizer.Encode(text, true))
	if chat.Usage.PromptTokens != wantPrompt || chat.Usage.CompletionTokens < 1 || chat.Usage.CompletionTokens > 4 {
		t.Errorf("chat usage %+v, want %d prompt tokens", chat.Usage, wantPrompt)
	}
}
