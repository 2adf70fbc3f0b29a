package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// The vLLM request fields that change the prompt or the output text, each
// checked over loopback on the built-in tiny model (random weights: the
// output is steered with logit_bias where its text matters).

// qwen3LikeTemplate renders ChatML and, like Qwen3's template, an empty
// think block after the generation prompt when enable_thinking is false.
const qwen3LikeTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{%- endif %}`

func chatPromptTokens(t *testing.T, env *testEnv, body string) int {
	t.Helper()
	r := env.post("/v1/chat/completions", body)
	if r.status != http.StatusOK {
		t.Fatalf("chat %s: status %d: %s", body, r.status, r.body)
	}
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	return resp.Usage.PromptTokens
}

func tokenizeCount(t *testing.T, env *testEnv, body string) int {
	t.Helper()
	r := env.post("/tokenize", body)
	if r.status != http.StatusOK {
		t.Fatalf("tokenize %s: status %d: %s", body, r.status, r.body)
	}
	var resp openai.TokenizeResponse
	decodeStrict(t, r.body, &resp)
	if resp.Count != len(resp.Tokens) {
		t.Fatalf("tokenize: count %d, %d tokens", resp.Count, len(resp.Tokens))
	}
	return resp.Count
}

func TestChatTemplateKwargs(t *testing.T) {
	tmpl, err := model.NewJinjaTemplate(qwen3LikeTemplate, "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	env, m := newCPUEnv(t, tmpl)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	plain := chatPromptTokens(t, env, `{`+msgs+`,"max_tokens":1}`)
	off := chatPromptTokens(t, env, `{`+msgs+`,"max_tokens":1,"chat_template_kwargs":{"enable_thinking":false}}`)
	thinkBlock := len(m.Tokenizer.Encode("<think>\n\n</think>\n\n", false))
	if off != plain+thinkBlock {
		t.Errorf("enable_thinking false: %d prompt tokens, want %d (+ the empty think block's %d)", off, plain+thinkBlock, thinkBlock)
	}
	if got := tokenizeCount(t, env, `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":false}}`); got != off {
		t.Errorf("/tokenize with chat_template_kwargs: %d tokens, the chat request %d", got, off)
	}
	r := env.post("/v1/chat/completions", `{`+msgs+`,"max_tokens":1,"chat_template_kwargs":{"messages":[]}}`)
	wantError(t, r, http.StatusBadRequest, "chat_template_kwargs")
}

func TestTokenizeRendersTools(t *testing.T) {
	env, _ := newCPUEnv(t)
	msgs := `"messages":[{"role":"user","content":"weather?"}]`
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	chat := chatPromptTokens(t, env, `{`+msgs+`,`+tools+`,"max_tokens":1}`)
	withTools := tokenizeCount(t, env, `{`+msgs+`,`+tools+`}`)
	without := tokenizeCount(t, env, `{`+msgs+`}`)
	if withTools != chat || withTools <= without {
		t.Errorf("/tokenize: %d tokens with tools, %d without; the chat request has %d", withTools, without, chat)
	}
}

func TestContentPartsJoinedWithNewline(t *testing.T) {
	env, _ := newCPUEnv(t)
	parts := tokenizeCount(t, env, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`)
	joined := tokenizeCount(t, env, `{"messages":[{"role":"user","content":"a\nb"}]}`)
	if parts != joined {
		t.Errorf("text parts a, b: %d tokens; content \"a\\nb\": %d", parts, joined)
	}
}

// forced steers the tiny model to one token every step.
func forced(id int32) string { return fmt.Sprintf(`"temperature":0,"logit_bias":{"%d":100}`, id) }

func completionText(t *testing.T, env *testEnv, body string) (text, finish string, stopReason any) {
	t.Helper()
	r := env.post("/v1/completions", body)
	if r.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", body, r.status, r.body)
	}
	var resp openai.CompletionResponse
	decodeStrict(t, r.body, &resp)
	return resp.Choices[0].Text, *resp.Choices[0].FinishReason, resp.Choices[0].StopReason
}

func TestOutputTextFields(t *testing.T) {
	env, _ := newCPUEnv(t)
	a := forced('a')
	bos := forced(model.ByteBOS)
	tests := []struct {
		name, body   string
		text, finish string
		stopReason   any
	}{
		{"stop string cut", `"max_tokens":8,"stop":["aa"],` + a, "", "stop", "aa"},
		{"include_stop_str_in_output", `"max_tokens":8,"stop":["aa"],"include_stop_str_in_output":true,` + a, "aa", "stop", "aa"},
		{"stop string on the last allowed token", `"max_tokens":2,"stop":["aa"],` + a, "", "stop", "aa"},
		{"special tokens skipped by default", `"max_tokens":3,` + bos, "", "length", nil},
		{"skip_special_tokens false", `"max_tokens":3,"skip_special_tokens":false,` + bos, "<s> <s> <s>", "length", nil},
		{"spaces_between_special_tokens false", `"max_tokens":3,"skip_special_tokens":false,"spaces_between_special_tokens":false,` + bos,
			"<s><s><s>", "length", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"prompt":"x",` + tt.body + `}`
			text, finish, stopReason := completionText(t, env, body)
			if text != tt.text || finish != tt.finish || fmt.Sprint(stopReason) != fmt.Sprint(tt.stopReason) {
				t.Errorf("text %q, finish %q, stop_reason %v; want %q, %q, %v", text, finish, stopReason, tt.text, tt.finish, tt.stopReason)
			}
			var streamed strings.Builder
			last := ""
			for _, ev := range env.streamRequest("/v1/completions", `{"stream":true,`+body[1:]) {
				if ev == "[DONE]" {
					continue
				}
				var c openai.CompletionResponse
				decodeStrict(t, []byte(ev), &c)
				streamed.WriteString(c.Choices[0].Text)
				if c.Choices[0].FinishReason != nil {
					last = *c.Choices[0].FinishReason
				}
			}
			if streamed.String() != tt.text || last != tt.finish {
				t.Errorf("streamed %q, finish %q; want %q, %q", streamed.String(), last, tt.text, tt.finish)
			}
		})
	}
}

// wantError checks an OpenAI-shaped error naming param.
func wantError(t *testing.T, r response, status int, param string) {
	t.Helper()
	var e openai.ErrorResponse
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != status || e.Error.Param == nil || *e.Error.Param != param {
		t.Errorf("status %d, body %s; want %d naming %q", r.status, r.body, status, param)
	}
}
