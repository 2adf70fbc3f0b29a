package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// TestBatchIndexIsPromptTimesN: with batched prompts and n > 1, choice k
// of prompt p has index p × n + k (vLLM's and the README's rule), streamed
// or not. echo puts each choice's prompt first, so the text tells.
func TestBatchIndexIsPromptTimesN(t *testing.T) {
	env := newLetterEnv(t)
	const body = `{"prompt":["ab","cd","ef"],"n":2,"max_tokens":1,"temperature":0,"echo":true`
	want := []string{"ab", "ab", "cd", "cd", "ef", "ef"}

	c := completionOf(t, env, body+`}`)
	var got []string
	for i, ch := range c.Choices {
		if ch.Index != i {
			t.Errorf("choice %d has index %d", i, ch.Index)
		}
		got = append(got, ch.Text[:2])
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("prompts by index (-want +got):\n%s", d)
	}

	// Streamed, each index's first text is its echoed prompt.
	first := map[int]string{}
	for _, ev := range env.streamRequest("/v1/completions", body+`,"stream":true}`) {
		if ev == "[DONE]" {
			continue
		}
		var ch openai.CompletionResponse
		decodeStrict(t, []byte(ev), &ch)
		for _, x := range ch.Choices {
			if _, ok := first[x.Index]; !ok {
				first[x.Index] = x.Text
			}
		}
	}
	got = got[:0]
	for i := range want {
		got = append(got, first[i])
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("streamed prompts by index (-want +got):\n%s", d)
	}
}

// byteDecoder makes the letter fixture's a, b and c the three bytes of
// '⌂' (U+2302) in an order they do not make it: e2, 82 and 8c.
type byteDecoder struct{}

func (byteDecoder) TokenBytes(id int32) []byte {
	switch id {
	case 0:
		return []byte{0xe2}
	case 1:
		return []byte{0x82}
	case 2:
		return []byte{0x8c}
	}
	return letterDecoder{}.TokenBytes(id)
}

// TestLogprobsOfPartialCharacters: tokens that are pieces of a UTF-8
// character keep distinct, meaningful names (completions top_logprobs
// is an object keyed by them: JSON would write each as U+FFFD, and a
// client would keep one of the three), the same as the chat logprobs'
// token; text_offset counts characters of the returned text.
func TestLogprobsOfPartialCharacters(t *testing.T) {
	env := newEnv(t, envOpts{exec: &letterExec{}, codec: letterCodec{}, decoder: byteDecoder{},
		eos: []int32{letterEOS}, vocabSize: letterVocab, maxModelLen: 256, numBlocks: 128})

	// frequency_penalty 1.5 over logits a 3, b 2, c 1 samples a b a c b:
	// bytes e2 82 | e2 8c 82, the text U+FFFD ⌂ (the cut e2 82 is one
	// U+FFFD).
	r := env.post("/v1/completions", `{"prompt":"q","max_tokens":5,"temperature":0,"ignore_eos":true,"logprobs":3,"frequency_penalty":1.5}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var c struct {
		Choices []struct {
			Text     string
			Logprobs struct {
				Tokens      []string
				TopLogprobs []json.RawMessage `json:"top_logprobs"`
				TextOffset  []int             `json:"text_offset"`
			}
		}
	}
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	lp := c.Choices[0].Logprobs
	if c.Choices[0].Text != "\uFFFD⌂" {
		t.Fatalf("text %q, want U+FFFD ⌂", c.Choices[0].Text)
	}
	wantTokens := []string{`bytes:\xe2`, `bytes:\x82`, `bytes:\xe2`, `bytes:\x8c`, `bytes:\x82`}
	if d := cmp.Diff(wantTokens, lp.Tokens); d != "" {
		t.Errorf("tokens (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{0, 0, 1, 1, 1}, lp.TextOffset); d != "" {
		t.Errorf("text_offset (-want +got):\n%s", d)
	}
	for i, raw := range lp.TopLogprobs {
		keys := objectKeys(t, raw)
		slices.Sort(keys)
		if d := cmp.Diff([]string{`bytes:\x82`, `bytes:\x8c`, `bytes:\xe2`}, keys); d != "" {
			t.Errorf("top_logprobs[%d] keys (-want +got):\n%s", i, d)
		}
	}

	// Chat names the tokens the same way, beside their bytes.
	var chat openai.ChatResponse
	r = env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"q"}],"max_tokens":1,"temperature":0,"logprobs":true,"top_logprobs":2}`)
	decodeStrict(t, r.body, &chat)
	e := chat.Choices[0].Logprobs.Content[0]
	if e.Token != `bytes:\xe2` || !slices.Equal(e.Bytes, []int{0xe2}) || e.TopLogprobs[1].Token != `bytes:\x82` {
		t.Errorf("chat logprob %+v", e)
	}
}

// objectKeys lists a JSON object's keys as written, repeats included.
func objectKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// heldLetterExec is the letter fixture holding every step after the first
// until release is closed, so the first token's chunk goes out on its own.
type heldLetterExec struct {
	letterExec
	steps   int
	release chan struct{}
}

func (x *heldLetterExec) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	if x.steps++; x.steps > 1 {
		select {
		case <-x.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return x.letterExec.Execute(ctx, b, out)
}

// TestTextOffsetAcrossChunks: streamed, text_offset goes on counting the
// choice's text from chunk to chunk, as in the whole reply.
func TestTextOffsetAcrossChunks(t *testing.T) {
	x := &heldLetterExec{release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(x.release) }) }
	env := newEnv(t, envOpts{exec: x, codec: letterCodec{}, decoder: letterDecoder{},
		eos: []int32{letterEOS}, vocabSize: letterVocab, maxModelLen: 256, numBlocks: 128})
	t.Cleanup(release) // before the engine stops, should the test end early
	resp, cancel := env.openStream("/v1/completions", `{"prompt":"q","max_tokens":6,"temperature":0,"ignore_eos":true,"logprobs":0,"stream":true}`)
	defer cancel()
	// The first chunk, alone (the next step is held), then the rest.
	body := bufio.NewReader(resp.Body)
	first, err := body.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the first chunk: %v", err)
	}
	if blank, err := body.ReadString('\n'); err != nil || blank != "\n" {
		t.Fatalf("the first event %q is not followed by a blank line: %q %v", first, blank, err)
	}
	release()
	events := append([]string{strings.TrimSuffix(strings.TrimPrefix(first, "data: "), "\n")}, readEvents(t, body)...)
	chunks := 0
	var offsets []int
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var ch openai.CompletionResponse
		decodeStrict(t, []byte(ev), &ch)
		if l := ch.Choices[0].Logprobs; l != nil {
			offsets = append(offsets, l.TextOffset...)
			chunks++
		}
	}
	if chunks < 2 {
		t.Fatalf("the 6 tokens came in %d chunk(s); the test needs several", chunks)
	}
	if d := cmp.Diff([]int{0, 1, 2, 3, 4, 5}, offsets); d != "" {
		t.Errorf("streamed text_offset (-want +got):\n%s", d)
	}
}

// TestAddSpecialTokens: add_special_tokens false tokenizes the prompt
// without the model's BOS, on completions and chat, as /tokenize does, so
// /tokenize's count is the request's prompt_tokens.
func TestAddSpecialTokens(t *testing.T) {
	env, m := newCPUEnv(t)
	bos := m.Tokenizer.Encode("", true)
	if len(bos) != 1 {
		t.Fatalf("the tiny model adds %v, want one BOS", bos)
	}
	for _, special := range []string{"true", "false"} {
		c := completionOf(t, env, `{"prompt":"hi","max_tokens":1,"return_token_ids":true,"add_special_tokens":`+special+`}`)
		toks := c.Choices[0].PromptTokenIDs
		if hasBOS := len(toks) > 0 && toks[0] == bos[0]; hasBOS != (special == "true") {
			t.Errorf("completion, add_special_tokens %s: prompt %v", special, toks)
		}
		if n := tokenizeCount(t, env, `{"prompt":"hi","add_special_tokens":`+special+`}`); n != c.Usage.PromptTokens {
			t.Errorf("completion, add_special_tokens %s: /tokenize counts %d, the request %d", special, n, c.Usage.PromptTokens)
		}
		msgs := `"messages":[{"role":"user","content":"hi"}],"add_special_tokens":` + special
		n := chatPromptTokens(t, env, `{`+msgs+`,"max_tokens":1}`)
		if tk := tokenizeCount(t, env, `{`+msgs+`}`); tk != n {
			t.Errorf("chat, add_special_tokens %s: /tokenize counts %d, the request %d", special, tk, n)
		}
	}
	with := chatPromptTokens(t, env, `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`)
	without := chatPromptTokens(t, env, `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"add_special_tokens":false}`)
	if with != without+1 {
		t.Errorf("chat prompt tokens %d with the BOS, %d without", with, without)
	}
}

// TestMeaningfulFieldsHonoured: fields that change the output and are
// implemented do change it.
func TestMeaningfulFieldsHonoured(t *testing.T) {
	env := newLetterEnv(t)
	// allowed_token_ids masks every other token: greedy would say "aaa".
	c := completionOf(t, env, `{"prompt":"q","max_tokens":3,"temperature":0,"allowed_token_ids":[2,3]}`)
	if c.Choices[0].Text != "ccc" {
		t.Errorf("allowed_token_ids [c, d]: %q", c.Choices[0].Text)
	}
	// return_tokens_as_token_ids names tokens by id.
	c = completionOf(t, env, `{"prompt":"q","max_tokens":1,"temperature":0,"logprobs":1,"return_tokens_as_token_ids":true}`)
	if l := c.Choices[0].Logprobs; l.Tokens[0] != "token_id:0" || l.TopLogprobs[0]["token_id:0"] == 0 {
		t.Errorf("return_tokens_as_token_ids: %+v", l)
	}
	// best_of on chat generates best_of candidates and returns n.
	r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"q"}],"max_tokens":2,"n":1,"best_of":3,"seed":1}`)
	var chat openai.ChatResponse
	decodeStrict(t, r.body, &chat)
	if len(chat.Choices) != 1 || chat.Usage.CompletionTokens != 6 {
		t.Errorf("chat best_of 3: %d choices, %d completion tokens; want 1 of 3 candidates of 2", len(chat.Choices), chat.Usage.CompletionTokens)
	}

	// structured_outputs.json_object constrains the output as
	// response_format json_object does.
	cpu, _ := newCPUEnv(t)
	c = completionOf(t, cpu, `{"prompt":"x","max_tokens":200,"seed":3,"structured_outputs":{"json_object":true}}`)
	var obj map[string]any
	if err := json.Unmarshal([]byte(c.Choices[0].Text), &obj); err != nil {
		t.Errorf("structured_outputs.json_object: %q: %v", c.Choices[0].Text, err)
	}
}

// TestMeaningfulFieldsRefused: fields that would change the output and
// are not implemented are a 400 naming them, not a 200 ignoring them.
func TestMeaningfulFieldsRefused(t *testing.T) {
	env := newLetterEnv(t)
	const msgs = `"messages":[{"role":"user","content":"q"}],"max_tokens":2`
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/completions", `{"prompt":"q","prompt_logprobs":1}`, "prompt_logprobs"},
		{"/v1/completions", `{"prompt":"q","use_beam_search":true}`, "use_beam_search"},
		{"/v1/completions", `{"prompt":"q","stream":true,"stream_options":{"continuous_usage_stats":true}}`, "stream_options.continuous_usage_stats"},
		{"/v1/completions", `{"prompt":"q","structured_outputs":{"regex":"a+","whitespace_pattern":" "}}`, "structured_outputs.whitespace_pattern"},
		{"/v1/completions", `{"prompt":"q","structured_outputs":{"structural_tag":"{}"}}`, "structured_outputs.structural_tag"},
		{"/v1/completions", `{"prompt":"q","allowed_token_ids":[27]}`, "allowed_token_ids"},
		{"/v1/completions", `{"prompt":"q","allowed_token_ids":[1],"guided_regex":"b+"}`, "allowed_token_ids"},
		{"/v1/chat/completions", `{` + msgs + `,"chat_template":"{{ messages }}"}`, "chat_template"},
		{"/v1/chat/completions", `{` + msgs + `,"echo":true}`, "echo"},
		{"/v1/chat/completions", `{` + msgs + `,"prompt_logprobs":0}`, "prompt_logprobs"},
		{"/v1/chat/completions", `{` + msgs + `,"modalities":["text","audio"]}`, "modalities"},
	} {
		r := env.post(tc.path, tc.body)
		var e openai.ErrorResponse
		_ = json.Unmarshal(r.body, &e)
		if r.status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != tc.param {
			t.Errorf("%s %s: %d %s, want a 400 naming %s", tc.path, tc.body, r.status, r.body, tc.param)
		}
	}
}

// TestNullTokenIDsRefused: null in a list of token ids is a 400 naming
// the field, not token 0.
func TestNullTokenIDsRefused(t *testing.T) {
	env := newLetterEnv(t)
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/completions", `{"prompt":[null,null],"max_tokens":1}`, "prompt"},
		{"/v1/completions", `{"prompt":"a","max_tokens":5,"stop_token_ids":[null]}`, "stop_token_ids"},
		{"/detokenize", `{"tokens":[7,null]}`, "tokens"},
	} {
		r := env.post(tc.path, tc.body)
		var e openai.ErrorResponse
		_ = json.Unmarshal(r.body, &e)
		if r.status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != tc.param {
			t.Errorf("%s %s: %d %s, want a 400 naming %s", tc.path, tc.body, r.status, r.body, tc.param)
		}
	}
}

// TestStopReasonAlwaysWritten: every non-streamed choice has stop_reason,
// null when nothing matched, as streamed choices and vLLM's have.
func TestStopReasonAlwaysWritten(t *testing.T) {
	env := newLetterEnv(t)
	for path, body := range map[string]string{
		"/v1/completions":      `{"prompt":"q","max_tokens":2}`,
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"q"}],"max_tokens":2}`,
	} {
		r := env.post(path, body)
		var resp struct{ Choices []map[string]json.RawMessage }
		if err := json.Unmarshal(r.body, &resp); err != nil {
			t.Fatal(err)
		}
		if v, ok := resp.Choices[0]["stop_reason"]; !ok || string(v) != "null" {
			t.Errorf("%s: stop_reason %q (present %v): %s", path, v, ok, r.body)
		}
	}
}

// TestContentTypeMustBeJSON: a POST whose body is declared as anything
// but JSON (the types a web page can send across sites without a CORS
// preflight among them) is a 415 in the endpoint's error shape; JSON
// types, with parameters, and no Content-Type at all are read.
func TestContentTypeMustBeJSON(t *testing.T) {
	env := newLetterEnv(t)
	bodies := map[string]string{
		"/v1/completions":           `{"prompt":"q","max_tokens":1}`,
		"/v1/chat/completions":      `{"messages":[{"role":"user","content":"q"}],"max_tokens":1}`,
		"/v1/responses":             `{"input":"q","max_output_tokens":1}`,
		"/v1/messages":              `{"messages":[{"role":"user","content":"q"}],"max_tokens":1}`,
		"/v1/messages/count_tokens": `{"messages":[{"role":"user","content":"q"}]}`,
		"/tokenize":                 `{"prompt":"q"}`,
		"/detokenize":               `{"tokens":[1]}`,
		"/programs/release":         `{"program_id":"p"}`,
	}
	for path, body := range bodies {
		for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/html"} {
			r := env.post(path, body, "Content-Type", ct)
			if r.status != http.StatusUnsupportedMediaType {
				t.Errorf("%s with %s: %d %s, want 415", path, ct, r.status, r.body)
				continue
			}
			var shape struct {
				Type  string
				Error struct{ Type, Message string }
			}
			_ = json.Unmarshal(r.body, &shape)
			wantType := ""
			if strings.HasPrefix(path, "/v1/messages") {
				wantType = "error" // Anthropic's shape
			}
			if shape.Type != wantType || shape.Error.Type != "invalid_request_error" || !strings.Contains(shape.Error.Message, "Content-Type: application/json") {
				t.Errorf("%s with %s: body %s", path, ct, r.body)
			}
		}
		for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json"} {
			var h []string
			if ct != "" {
				h = []string{"Content-Type", ct}
			}
			if r := env.post(path, body, h...); r.status != http.StatusOK {
				t.Errorf("%s with Content-Type %q: %d %s", path, ct, r.status, r.body)
			}
		}
	}
}

// TestPromptOverContextNamesThePrompt: a prompt that alone fills the
// context is the request's fault whatever max_tokens says: the error names
// the prompt (or messages), not max_tokens.
func TestPromptOverContextNamesThePrompt(t *testing.T) {
	env := newLetterEnv(t) // max_model_len 256
	long := strings.Repeat("a", 300)
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":1}`, long), "prompt"},
		{"/v1/completions", fmt.Sprintf(`{"prompt":%q}`, long), "prompt"},
		{"/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":1}`, long), "messages"},
		{"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":100}`, long[:200]), "max_tokens"},
	} {
		r := env.post(tc.path, tc.body)
		var e openai.ErrorResponse
		_ = json.Unmarshal(r.body, &e)
		if r.status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != tc.param ||
			e.Error.Code == nil || *e.Error.Code != openai.CodeContextLength {
			t.Errorf("%s (%d bytes): %d %s, want a context-length 400 naming %s", tc.path, len(tc.body), r.status, r.body, tc.param)
		}
	}
}

// TestForcedCallCutLeavesNoMarkup: a forced tool call that max_tokens cuts
// before its name is no call, and its markup (<tool_call>, or the part of
// it written) is not content, in the whole reply as in the stream.
func TestForcedCallCutLeavesNoMarkup(t *testing.T) {
	for label, env := range toolEnvs(t) { // Hermes calls
		for _, maxTokens := range []int{3, 8, 14} {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"weather?"}],"tools":%s,"tool_choice":"required","max_tokens":%d`, toolsJSON, maxTokens)
			r := env.post("/v1/chat/completions", body+`}`)
			var chat openai.ChatResponse
			decodeStrict(t, r.body, &chat)
			msg := chat.Choices[0].Message
			if msg.Content != "" || len(msg.ToolCalls) != 0 || *chat.Choices[0].FinishReason != "length" {
				t.Errorf("%s, max_tokens %d: %s", label, maxTokens, r.body)
			}
			_, content, finish := assembleStream(t, env.streamRequest("/v1/chat/completions", body+`,"stream":true}`))
			if content != "" || finish != "length" {
				t.Errorf("%s, max_tokens %d, streamed: content %q, finish %q", label, maxTokens, content, finish)
			}
		}
	}
}
