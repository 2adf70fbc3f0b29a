package server

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// The letters fixture: a model whose logits the test controls. Tokens 0-25
// are the letters a-z, 26 is EOS. Every step the logits are fixed: a 3,
// b 2, c 1, the other letters 0, EOS -5, so greedy decoding says "aaaa…"
// and each sampling control moves that in a way worked out by hand.
const (
	letterVocab = 27
	letterEOS   = 26
)

var letterLogits = func() []float32 {
	l := make([]float32, letterVocab)
	l[0], l[1], l[2], l[letterEOS] = 3, 2, 1, -5
	return l
}()

type letterExec struct{ bufs [][]float32 }

func (x *letterExec) Execute(_ context.Context, b *batch.Batch, out *batch.Output) error {
	for i := range b.Seqs {
		if !b.Seqs[i].Sample {
			continue
		}
		for len(x.bufs) <= i {
			x.bufs = append(x.bufs, make([]float32, letterVocab))
		}
		// A fresh copy each step: the engine must restore what it changes,
		// but the test does not rely on it.
		copy(x.bufs[i], letterLogits)
		out.Logits[i] = x.bufs[i]
	}
	return nil
}

// letterCodec maps a-z to 0-25 and drops every other byte.
type letterCodec struct{}

func (letterCodec) Encode(text string, _ bool) []int32 {
	var ids []int32
	for _, c := range []byte(text) {
		if c >= 'a' && c <= 'z' {
			ids = append(ids, int32(c-'a'))
		}
	}
	return ids
}
func (c letterCodec) EncodePrompt(text string) []int32 { return c.Encode(text, true) }
func (c letterCodec) EncodeChat(chat *model.Chat, addSpecial bool) ([]int32, error) {
	var b strings.Builder
	for _, m := range chat.Messages {
		b.WriteString(m.Content)
	}
	if chat.AddGenerationPrompt && !chat.ContinueFinalMessage {
		b.WriteString("z") // the "assistant header"
	}
	return c.Encode(b.String(), addSpecial), nil
}
func (letterCodec) ToolFormat() string { return "" }
func (letterCodec) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.Write(letterDecoder{}.TokenBytes(id))
	}
	return b.String()
}

type letterDecoder struct{}

func (letterDecoder) TokenBytes(id int32) []byte {
	if id < 0 || id >= letterEOS {
		return nil
	}
	return []byte{byte('a' + id)}
}

func newLetterEnv(t *testing.T) *testEnv {
	return newEnv(t, envOpts{exec: &letterExec{}, codec: letterCodec{}, decoder: letterDecoder{},
		eos: []int32{letterEOS}, vocabSize: letterVocab, maxModelLen: 256, numBlocks: 128})
}

func completionOf(t *testing.T, env *testEnv, body string, header ...string) openai.CompletionResponse {
	t.Helper()
	r := env.post("/v1/completions", body, header...)
	if r.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", body, r.status, r.body)
	}
	var c openai.CompletionResponse
	decodeStrict(t, r.body, &c)
	return c
}

// TestSamplingControlsSteerOutput: each control changes greedy output the
// way its definition says (the expected texts are worked out from the
// fixture's logits a 3, b 2, c 1, rest 0).
func TestSamplingControlsSteerOutput(t *testing.T) {
	env := newLetterEnv(t)
	for _, tc := range []struct {
		name, fields, text, finish string
		stopReason                 any
	}{
		{"plain greedy", ``, "aaaa", "length", nil},
		// a 3→1.5 loses to b 2; then a 1.5 beats c 1 and b 0.5; then a 0 < c 1.
		{"frequency_penalty", `"frequency_penalty":1.5`, "abac", "length", nil},
		// a 3→1 once it appeared, b 2→0, c 1: a wins ties by the lower id.
		{"presence_penalty", `"presence_penalty":2`, "abaa", "length", nil},
		// Seen tokens' logits divided by 4: a .75 < b 2, then c 1, then a .75 beats b .5, c .25.
		{"repetition_penalty", `"repetition_penalty":4`, "abca", "length", nil},
		{"logit_bias", `"logit_bias":{"2":5}`, "cccc", "length", nil},
		{"bad_words single", `"bad_words":["a"]`, "bbbb", "length", nil},
		// "aa" bans a right after an a.
		{"bad_words pair", `"bad_words":["aa"]`, "abab", "length", nil},
		{"stop_token_ids", `"frequency_penalty":1.5,"stop_token_ids":[1]`, "a", "stop", float64(1)},
		{"stop string reported", `"frequency_penalty":1.5,"stop":["ba"]`, "a", "stop", "ba"},
		// EOS made the most likely token: nothing, unless min_tokens holds it off.
		{"eos first", `"logit_bias":{"26":20},"ignore_eos":false`, "", "stop", nil},
		{"min_tokens", `"logit_bias":{"26":20},"ignore_eos":false,"min_tokens":2`, "aa", "stop", nil},
		// Only a has at least half of a's probability (b has e^-1 of it).
		{"min_p", `"temperature":1,"seed":11,"min_p":0.5`, "aaaa", "length", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"prompt":"q","max_tokens":4,"temperature":0,"ignore_eos":true`
			if tc.fields != "" {
				body += "," + tc.fields
			}
			body = strings.Replace(body, `"ignore_eos":true,"logit_bias":{"26":20},"ignore_eos":false`, `"logit_bias":{"26":20},"ignore_eos":false`, 1)
			c := completionOf(t, env, body+"}")
			ch := c.Choices[0]
			if ch.Text != tc.text || *ch.FinishReason != tc.finish {
				t.Errorf("text %q finish %s, want %q %s", ch.Text, *ch.FinishReason, tc.text, tc.finish)
			}
			if ch.StopReason != tc.stopReason {
				t.Errorf("stop_reason %v (%T), want %v", ch.StopReason, ch.StopReason, tc.stopReason)
			}
		})
	}
	// Without min_p the same temperature draws other letters too.
	c := completionOf(t, env, `{"prompt":"q","max_tokens":40,"temperature":1,"seed":11,"ignore_eos":true}`)
	if strings.Trim(c.Choices[0].Text, "a") == "" {
		t.Errorf("temperature 1 without min_p drew only a: %q", c.Choices[0].Text)
	}
}

// TestSeedPerChoice: n choices with a seed differ from each other, repeat
// exactly, and choice 0 is what n=1 with that seed gives.
func TestSeedPerChoice(t *testing.T) {
	env := newLetterEnv(t)
	body := `{"prompt":"q","max_tokens":12,"temperature":2,"seed":5,"ignore_eos":true,"n":3}`
	a, b := completionOf(t, env, body), completionOf(t, env, body)
	one := completionOf(t, env, strings.Replace(body, `"n":3`, `"n":1`, 1))
	if len(a.Choices) != 3 {
		t.Fatalf("%d choices, want 3", len(a.Choices))
	}
	for i := range a.Choices {
		if a.Choices[i].Index != i || a.Choices[i].Text != b.Choices[i].Text {
			t.Errorf("choice %d: %+v then %+v: want equal texts at index %d", i, a.Choices[i], b.Choices[i], i)
		}
	}
	if a.Choices[0].Text == a.Choices[1].Text && a.Choices[1].Text == a.Choices[2].Text {
		t.Errorf("all choices equal %q: each should have its own seed", a.Choices[0].Text)
	}
	if one.Choices[0].Text != a.Choices[0].Text {
		t.Errorf("n=1 gave %q, choice 0 of n=3 %q", one.Choices[0].Text, a.Choices[0].Text)
	}
	if a.Usage.CompletionTokens != 36 || a.Usage.PromptTokens != 1 {
		t.Errorf("usage %+v, want 1 prompt and 36 completion tokens", a.Usage)
	}
}

func metricValue(t *testing.T, env *testEnv, name string) float64 {
	t.Helper()
	r := env.do(http.MethodGet, "/metrics", "")
	for line := range strings.SplitSeq(string(r.body), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// TestNChoicesShareOnePrefill: n=4 prefills the prompt once; the other
// three choices find its full blocks in the prefix cache.
func TestNChoicesShareOnePrefill(t *testing.T) {
	env := newLetterEnv(t)
	prompt := strings.Repeat("abcdefghij", 4) // 40 tokens: two full blocks of 16
	before := metricValue(t, env, "vllm:prefix_cache_hits_total")
	c := completionOf(t, env, `{"prompt":"`+prompt+`","max_tokens":3,"temperature":1,"n":4,"seed":1}`)
	if len(c.Choices) != 4 {
		t.Fatalf("%d choices", len(c.Choices))
	}
	hits := metricValue(t, env, "vllm:prefix_cache_hits_total") - before
	if hits != 3*32 {
		t.Errorf("prefix-cache hits grew by %v tokens, want 96 (3 choices × 2 blocks of 16)", hits)
	}
}

// TestNChoicesAreOneRequestInMetrics: the histograms vLLM keeps per API
// request see a request with n=3 once, with its n, its max_tokens and its
// longest output, streamed or not, and each prompt of a batch as its own.
func TestNChoicesAreOneRequestInMetrics(t *testing.T) {
	env := newLetterEnv(t)
	for _, body := range []string{
		`{"prompt":"abc","max_tokens":4,"temperature":1,"n":3,"seed":1,"ignore_eos":true}`,
		`{"prompt":"abc","max_tokens":4,"temperature":1,"n":3,"seed":1,"ignore_eos":true,"stream":true}`,
	} {
		want := map[string]float64{
			"vllm:request_params_n_count":                1,
			"vllm:request_params_n_sum":                  3,
			"vllm:request_params_max_tokens_sum":         4,
			"vllm:request_max_num_generation_tokens_sum": 4,
		}
		before := map[string]float64{}
		for name := range want {
			before[name] = metricValue(t, env, name)
		}
		if r := env.post("/v1/completions", body); r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		for name, w := range want {
			if got := metricValue(t, env, name) - before[name]; got != w {
				t.Errorf("%s: grew by %v, want %v (%s)", name, got, w, body)
			}
		}
	}
	before := metricValue(t, env, "vllm:request_params_n_count")
	if r := env.post("/v1/completions", `{"prompt":["ab","cd"],"max_tokens":2,"n":2,"temperature":1,"seed":1}`); r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	if got := metricValue(t, env, "vllm:request_params_n_count") - before; got != 2 {
		t.Errorf("a batch of two prompts counted as %v requests, want 2", got)
	}
}

func TestBestOfPicksTheLikeliest(t *testing.T) {
	env := newLetterEnv(t)
	c := completionOf(t, env, `{"prompt":"q","max_tokens":6,"temperature":3,"seed":2,"best_of":5,"n":2,"logprobs":0,"ignore_eos":true}`)
	all := completionOf(t, env, `{"prompt":"q","max_tokens":6,"temperature":3,"seed":2,"n":5,"logprobs":0,"ignore_eos":true}`)
	sum := func(ch openai.CompletionChoice) float64 {
		s := 0.0
		for _, v := range ch.Logprobs.TokenLogprobs {
			s += v
		}
		return s
	}
	var scores []float64
	for _, ch := range all.Choices {
		scores = append(scores, sum(ch))
	}
	if len(c.Choices) != 2 {
		t.Fatalf("%d choices, want 2", len(c.Choices))
	}
	for _, ch := range c.Choices {
		better := 0
		for _, s := range scores {
			if s > sum(ch)+1e-9 {
				better++
			}
		}
		if better > 1 {
			t.Errorf("choice %q (logprob %v) is beaten by %d of %v", ch.Text, sum(ch), better, scores)
		}
	}
}

// TestLogprobs: chosen tokens match greedy choices and the top-1, the
// values are the model's log-softmax, probabilities stay ≤ 1; streamed the
// same.
func TestLogprobs(t *testing.T) {
	env := newLetterEnv(t)
	lse := 0.0
	for _, v := range letterLogits {
		lse += math.Exp(float64(v))
	}
	lse = math.Log(lse)
	want := func(id int) float64 { return float64(letterLogits[id]) - lse }

	r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"q"}],"max_tokens":3,"temperature":0,
		"ignore_eos":true,"logprobs":true,"top_logprobs":3}`)
	var chat openai.ChatResponse
	decodeStrict(t, r.body, &chat)
	lp := chat.Choices[0].Logprobs
	if lp == nil || len(lp.Content) != 3 || chat.Choices[0].Message.Content != "aaa" {
		t.Fatalf("chat: %s", r.body)
	}
	for i, e := range lp.Content {
		if e.Token != "a" || math.Abs(e.Logprob-want(0)) > 1e-5 || len(e.TopLogprobs) != 3 ||
			e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob ||
			e.TopLogprobs[1].Token != "b" || math.Abs(e.TopLogprobs[2].Logprob-want(2)) > 1e-5 {
			t.Errorf("token %d: %+v, want a at %v then b, c", i, e, want(0))
		}
		sum := 0.0
		for _, x := range e.TopLogprobs {
			sum += math.Exp(x.Logprob)
		}
		if sum > 1 {
			t.Errorf("token %d: top probabilities sum to %v", i, sum)
		}
	}
	// Logprobs are the model's, before processors: a penalty changes the
	// choice, not the reported distribution.
	c := completionOf(t, env, `{"prompt":"q","max_tokens":2,"temperature":0,"ignore_eos":true,"logprobs":1,"frequency_penalty":1.5}`)
	if l := c.Choices[0].Logprobs; c.Choices[0].Text != "ab" || len(l.Tokens) != 2 || l.Tokens[1] != "b" ||
		math.Abs(l.TokenLogprobs[1]-want(1)) > 1e-5 || math.Abs(l.TopLogprobs[1]["a"]-want(0)) > 1e-5 || l.TextOffset[1] != 1 {
		t.Errorf("completion logprobs %+v for %q", l, c.Choices[0].Text)
	}

	// Streamed: one logprob per token, the same values.
	var tokens []string
	for _, ev := range env.streamRequest("/v1/completions", `{"prompt":"q","max_tokens":5,"temperature":0,"ignore_eos":true,"logprobs":2,"stream":true}`) {
		if ev == "[DONE]" {
			continue
		}
		var ch openai.CompletionResponse
		decodeStrict(t, []byte(ev), &ch)
		if l := ch.Choices[0].Logprobs; l != nil {
			for i, tok := range l.Tokens {
				if math.Abs(l.TokenLogprobs[i]-want(0)) > 1e-5 || len(l.TopLogprobs[i]) != 2 {
					t.Errorf("streamed entry %+v", l)
				}
				tokens = append(tokens, tok)
			}
		}
	}
	if strings.Join(tokens, "") != "aaaaa" {
		t.Errorf("streamed logprob tokens %q, want 5 a", tokens)
	}
}

// TestEchoBatchAndTokenIDs: batched prompts get a choice each (index in
// order), echo puts the prompt first, return_token_ids and
// truncate_prompt_tokens work per prompt.
func TestEchoBatchAndTokenIDs(t *testing.T) {
	env := newLetterEnv(t)
	c := completionOf(t, env, `{"prompt":["ab",[2,3]],"max_tokens":2,"temperature":0,"ignore_eos":true,"echo":true,"return_token_ids":true}`)
	if len(c.Choices) != 2 || c.Choices[0].Text != "abaa" || c.Choices[1].Text != "cdaa" || c.Choices[1].Index != 1 {
		t.Fatalf("choices %+v", c.Choices)
	}
	if d := c.Choices[1].PromptTokenIDs; len(d) != 2 || d[0] != 2 || len(c.Choices[1].TokenIDs) != 2 {
		t.Errorf("token ids %+v", c.Choices[1])
	}
	if c.Usage.PromptTokens != 4 || c.Usage.CompletionTokens != 4 {
		t.Errorf("usage %+v", c.Usage)
	}
	c = completionOf(t, env, `{"prompt":"abcdefgh","max_tokens":1,"temperature":0,"truncate_prompt_tokens":3,"return_token_ids":true}`)
	if c.Usage.PromptTokens != 3 || len(c.Choices[0].PromptTokenIDs) != 3 || c.Choices[0].PromptTokenIDs[0] != 5 {
		t.Errorf("truncated: %+v", c)
	}
	// Streamed batch with n: every (prompt, choice) index ends once.
	ended := map[int]int{}
	for _, ev := range env.streamRequest("/v1/completions", `{"prompt":["ab","cd"],"n":2,"max_tokens":3,"temperature":1,"seed":3,"stream":true,"stream_options":{"include_usage":"true"}}`) {
		if ev == "[DONE]" {
			continue
		}
		var ch openai.CompletionResponse
		decodeStrict(t, []byte(ev), &ch)
		if ch.Usage != nil && ch.Usage.CompletionTokens != 12 {
			t.Errorf("usage %+v, want 12 completion tokens", ch.Usage)
		}
		for _, x := range ch.Choices {
			if x.FinishReason != nil {
				ended[x.Index]++
			}
		}
	}
	if len(ended) != 4 || ended[0] != 1 || ended[3] != 1 {
		t.Errorf("finished choices %v, want 0-3 once each", ended)
	}
}

func TestRequestIDAndTokenize(t *testing.T) {
	env := newLetterEnv(t)
	r := env.post("/v1/completions", `{"prompt":"q","max_tokens":1}`, "X-Request-Id", "client-42")
	var c openai.CompletionResponse
	decodeStrict(t, r.body, &c)
	if c.ID != "cmpl-client-42" || r.header.Get("X-Request-Id") != "client-42" {
		t.Errorf("id %q, header %q: want the client's id kept", c.ID, r.header.Get("X-Request-Id"))
	}

	r = env.post("/tokenize", `{"prompt":"abc"}`)
	var tk openai.TokenizeResponse
	decodeStrict(t, r.body, &tk)
	if tk.Count != 3 || tk.Tokens[2] != 2 || tk.MaxModelLen != 256 {
		t.Errorf("tokenize: %s", r.body)
	}
	// Chat messages render through the template: with and without the
	// generation prompt ("z" in this codec).
	r = env.post("/tokenize", `{"messages":[{"role":"user","content":"ab"}]}`)
	decodeStrict(t, r.body, &tk)
	if tk.Count != 3 || tk.Tokens[2] != 25 {
		t.Errorf("tokenize messages: %s", r.body)
	}
	r = env.post("/tokenize", `{"messages":[{"role":"user","content":"ab"}],"add_generation_prompt":false,"return_token_strs":true}`)
	decodeStrict(t, r.body, &tk)
	if tk.Count != 2 || tk.TokenStrs[1] != "b" {
		t.Errorf("tokenize without generation prompt: %s", r.body)
	}
	r = env.post("/detokenize", `{"tokens":[7,8]}`)
	var dt openai.DetokenizeResponse
	decodeStrict(t, r.body, &dt)
	if dt.Prompt != "hi" {
		t.Errorf("detokenize: %s", r.body)
	}
	for _, bad := range []struct{ path, body, param string }{
		{"/detokenize", `{"tokens":[27]}`, "tokens"},
		{"/tokenize", `{}`, "prompt"},
		{"/tokenize", `{"prompt":"a","model":"other"}`, "model"},
	} {
		r := env.post(bad.path, bad.body)
		var e openai.ErrorResponse
		_ = json.Unmarshal(r.body, &e)
		if r.status/100 != 4 || (bad.param != "model" && (e.Error.Param == nil || *e.Error.Param != bad.param)) {
			t.Errorf("%s %s: status %d %s, want 4xx naming %s", bad.path, bad.body, r.status, r.body, bad.param)
		}
	}
	// add_generation_prompt false and continue_final_message reach the
	// template: the prompt has no "z" header.
	r = env.post("/v1/chat/completions", `{"messages":[{"role":"assistant","content":"ab"}],"continue_final_message":true,
		"add_generation_prompt":false,"max_tokens":1,"return_token_ids":true}`)
	var chat openai.ChatResponse
	decodeStrict(t, r.body, &chat)
	if len(chat.PromptTokenIDs) != 2 || chat.Usage.PromptTokens != 2 {
		t.Errorf("continued prompt %v: %s", chat.PromptTokenIDs, r.body)
	}
}
