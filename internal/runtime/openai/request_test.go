package openai

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

func ptr[T any](v T) *T { return &v }

func TestParseCompletion(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  func(r *CompletionRequest) any // projection compared with wantV
		wantV any
	}{
		{"string prompt", `{"model":"m","prompt":"hello"}`,
			func(r *CompletionRequest) any { return r.Prompt.Text }, "hello"},
		{"token prompt", `{"prompt":[1,2,3]}`,
			func(r *CompletionRequest) any { return r.Prompt.Tokens }, []int32{1, 2, 3}},
		{"list of one string", `{"prompt":["hi"]}`,
			func(r *CompletionRequest) any { return r.Prompt.Text }, "hi"},
		{"list of one token list", `{"prompt":[[7,8]]}`,
			func(r *CompletionRequest) any { return r.Prompt.Tokens }, []int32{7, 8}},
		{"stop string", `{"prompt":"x","stop":"\n"}`,
			func(r *CompletionRequest) any { return []string(r.Stop) }, []string{"\n"}},
		{"stop list", `{"prompt":"x","stop":["a","b"]}`,
			func(r *CompletionRequest) any { return []string(r.Stop) }, []string{"a", "b"}},
		{"stop null", `{"prompt":"x","stop":null}`,
			func(r *CompletionRequest) any { return len(r.Stop) }, 0},
		{"max tokens", `{"prompt":"x","max_tokens":5}`,
			func(r *CompletionRequest) any { return *r.MaxTokens }, 5},
		{"n=1 accepted", `{"prompt":"x","n":1}`,
			func(r *CompletionRequest) any { return *r.N }, 1},
		{"priority string", `{"prompt":"x","priority":"high"}`,
			func(r *CompletionRequest) any { return r.Priority.Priority() }, engine.PriorityHigh},
		{"priority int", `{"prompt":"x","priority":2}`,
			func(r *CompletionRequest) any { return r.Priority.Priority() }, engine.PriorityLow},
		{"priority absent", `{"prompt":"x"}`,
			func(r *CompletionRequest) any { return r.Priority.Priority() }, engine.PriorityNormal},
		{"include usage", `{"prompt":"x","stream":true,"stream_options":{"include_usage":true}}`,
			func(r *CompletionRequest) any { return r.IncludeUsage() }, true},
		{"program id in body", `{"prompt":"x","program_id":"p1"}`,
			func(r *CompletionRequest) any { return r.BodyProgram().ID }, "p1"},
		{"program id in extra_body", `{"prompt":"x","extra_body":{"program_id":"p2"}}`,
			func(r *CompletionRequest) any { return r.BodyProgram().ID }, "p2"},
		{"unknown fields ignored", `{"prompt":"x","presence_penalty":0.5,"whatever":{"a":[1]}}`,
			func(r *CompletionRequest) any { return r.Prompt.Text }, "x"},
		{"logprobs null ok", `{"prompt":"x","logprobs":null}`,
			func(r *CompletionRequest) any { return r.Prompt.Text }, "x"},
		{"extensions", `{"prompt":"x","ignore_eos":true,"min_tokens":3,"max_tokens":4}`,
			func(r *CompletionRequest) any { return []any{r.IgnoreEOS, *r.MinTokens} }, []any{true, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseCompletion([]byte(tt.body))
			if err != nil {
				t.Fatalf("ParseCompletion(%s): %v", tt.body, err)
			}
			if d := cmp.Diff(tt.wantV, tt.want(r)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestParseCompletionErrors(t *testing.T) {
	tests := []struct {
		name, body, param string
	}{
		{"empty body", ``, ""},
		{"not an object", `[1]`, ""},
		{"bad json", `{"prompt":`, ""},
		{"missing prompt", `{"model":"m"}`, "prompt"},
		{"prompt number", `{"prompt":5}`, "prompt"},
		{"prompt object", `{"prompt":{"a":1}}`, "prompt"},
		{"batched prompt null", `{"prompt":["a",null]}`, "prompt"},
		{"batched prompt bad token", `{"prompt":[[1],["x"]]}`, "prompt"},
		{"token not int", `{"prompt":[1,"a"]}`, "prompt"},
		{"token too big", `{"prompt":[99999999999]}`, "prompt"},
		{"triple nesting", `{"prompt":[[[1]]]}`, "prompt"},
		{"n=0", `{"prompt":"x","n":0}`, "n"},
		{"n too big", `{"prompt":"x","n":129}`, "n"},
		{"negative max_tokens", `{"prompt":"x","max_tokens":-1}`, "max_tokens"},
		{"zero max_tokens", `{"prompt":"x","max_tokens":0}`, "max_tokens"},
		{"max_tokens word", `{"prompt":"x","max_tokens":"five"}`, "max_tokens"},
		{"max_tokens numeric string float", `{"prompt":"x","max_tokens":"5.5"}`, "max_tokens"},
		{"max_tokens float", `{"prompt":"x","max_tokens":5.5}`, "max_tokens"},
		{"temperature string", `{"prompt":"x","temperature":"hot"}`, "temperature"},
		{"negative temperature", `{"prompt":"x","temperature":-1}`, "temperature"},
		{"top_p zero", `{"prompt":"x","top_p":0}`, "top_p"},
		{"top_p above one", `{"prompt":"x","top_p":1.5}`, "top_p"},
		{"top_k", `{"prompt":"x","top_k":-2}`, "top_k"},
		{"stop number", `{"prompt":"x","stop":3}`, "stop"},
		{"stop empty string", `{"prompt":"x","stop":[""]}`, "stop"},
		{"cache_salt empty", `{"prompt":"x","cache_salt":""}`, "cache_salt"},
		{"cache_salt number", `{"prompt":"x","cache_salt":3}`, "cache_salt"},
		{"stop too many", `{"prompt":"x","stop":[` + strings.Repeat(`"s",`, MaxStopStrings) + `"s"]}`, "stop"},
		{"stop too long", `{"prompt":"x","stop":["` + strings.Repeat("s", MaxStopBytes+1) + `"]}`, "stop"},
		{"stream string", `{"prompt":"x","stream":"yes"}`, "stream"},
		{"priority unknown", `{"prompt":"x","priority":"urgent"}`, "priority"},
		{"priority float", `{"prompt":"x","priority":1.5}`, "priority"},
		{"min over max", `{"prompt":"x","min_tokens":5,"max_tokens":2}`, "min_tokens"},
		{"negative min", `{"prompt":"x","min_tokens":-1}`, "min_tokens"},
		{"echo with logprobs", `{"prompt":"x","echo":true,"logprobs":1}`, "echo"},
		{"best_of below n", `{"prompt":"x","n":3,"best_of":2}`, "best_of"},
		{"best_of streamed", `{"prompt":"x","best_of":2,"stream":true}`, "best_of"},
		{"logprobs too many", `{"prompt":"x","logprobs":21}`, "logprobs"},
		{"logprobs negative", `{"prompt":"x","logprobs":-1}`, "logprobs"},
		{"presence_penalty", `{"prompt":"x","presence_penalty":2.5}`, "presence_penalty"},
		{"frequency_penalty", `{"prompt":"x","frequency_penalty":"-3"}`, "frequency_penalty"},
		{"repetition_penalty zero", `{"prompt":"x","repetition_penalty":0}`, "repetition_penalty"},
		{"min_p", `{"prompt":"x","min_p":1.5}`, "min_p"},
		{"logit_bias key", `{"prompt":"x","logit_bias":{"a":1}}`, "logit_bias"},
		{"logit_bias value", `{"prompt":"x","logit_bias":{"3":101}}`, "logit_bias"},
		{"logit_bias too many", `{"prompt":"x","logit_bias":{` + manyBiases(MaxLogitBiasEntries+1) + `}}`, "logit_bias"},
		{"stop_token_ids type", `{"prompt":"x","stop_token_ids":["a"]}`, "stop_token_ids"},
		{"bad_words empty", `{"prompt":"x","bad_words":[""]}`, "bad_words"},
		{"bad_words word too long", `{"prompt":"x","bad_words":["a","` + strings.Repeat("z", MaxBadWordBytes+1) + `"]}`, "bad_words"},
		{"truncate_prompt_tokens", `{"prompt":"x","truncate_prompt_tokens":0}`, "truncate_prompt_tokens"},
		{"seed float", `{"prompt":"x","seed":1.5}`, "seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseCompletion([]byte(tt.body))
			if err == nil {
				t.Fatalf("ParseCompletion(%s) = %+v, want an error", tt.body, r)
			}
			if err.Status != http.StatusBadRequest || err.Type != TypeInvalidRequest {
				t.Errorf("error %v: want 400 %s", err, TypeInvalidRequest)
			}
			if err.Param != tt.param {
				t.Errorf("error %v: param %q, want %q", err, err.Param, tt.param)
			}
		})
	}
}

// TestBadWordsBounded: a bad word of MaxBadWordBytes is taken, a longer
// one is a 400 that names it, on both endpoints.
func TestBadWordsBounded(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	words := func(n int) string { return `"bad_words":["a","` + strings.Repeat("z", n) + `"]` }
	for name, parse := range parsers {
		prompt := `"prompt":"x"`
		if name == "chat" {
			prompt = msgs
		}
		if err := parse([]byte(`{` + prompt + `,` + words(MaxBadWordBytes) + `}`)); err != nil {
			t.Errorf("%s: a word of %d bytes: %v", name, MaxBadWordBytes, err)
		}
		err := parse([]byte(`{` + prompt + `,` + words(MaxBadWordBytes+1) + `}`))
		if err == nil || err.Status != http.StatusBadRequest || err.Param != "bad_words" || !strings.Contains(err.Message, "bad_words[1]") {
			t.Errorf("%s: a word of %d bytes: got %v, want a 400 naming bad_words[1]", name, MaxBadWordBytes+1, err)
		}
	}
}

func TestParseChat(t *testing.T) {
	r, err := ParseChat([]byte(`{"model":"m","messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
		{"role":"assistant","content":null}],
		"max_completion_tokens":7}`))
	if err != nil {
		t.Fatal(err)
	}
	got := []string{r.Messages[0].Content.Text, r.Messages[1].Content.Text, r.Messages[2].Content.Text}
	// Text parts are joined with "\n", as vLLM joins them.
	if d := cmp.Diff([]string{"be brief", "a\nb", ""}, got); d != "" {
		t.Errorf("contents (-want +got):\n%s", d)
	}
	if *r.MaxTokens != 7 {
		t.Errorf("max tokens %d, want 7 from max_completion_tokens", *r.MaxTokens)
	}
}

// TestProgramIDEscapes: escaped surrogate pairs and escaped backslashes
// are ids like any other; only unpaired surrogates are refused.
func TestProgramIDEscapes(t *testing.T) {
	for body, want := range map[string]string{
		`{"prompt":"x","program_id":"\ud83d\ude00"}`: "\U0001F600",
		`{"prompt":"x","program_id":"\\ud800"}`:      `\ud800`,
		`{"prompt":"x","program_id":"a\u0041"}`:      "aA",
	} {
		r, err := ParseCompletion([]byte(body))
		if err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if got := r.BodyProgram().ID; got != want {
			t.Errorf("%s: program id %q, want %q", body, got, want)
		}
	}
}

func TestParseChatErrors(t *testing.T) {
	tests := []struct{ name, body, param string }{
		{"no messages", `{"model":"m"}`, "messages"},
		{"empty messages", `{"messages":[]}`, "messages"},
		{"messages string", `{"messages":"hi"}`, "messages"},
		{"no role", `{"messages":[{"content":"hi"}]}`, "messages[0].role"},
		{"image part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages"},
		{"content number", `{"messages":[{"role":"user","content":5}]}`, "messages"},
		{"negative max_completion_tokens", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":-3}`, "max_completion_tokens"},
		{"disagreeing limits", `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"max_completion_tokens":4}`, "max_completion_tokens"},
		{"n", `{"messages":[{"role":"user","content":"x"}],"n":-3}`, "n"},
		{"logprobs word", `{"messages":[{"role":"user","content":"x"}],"logprobs":"yes"}`, "logprobs"},
		{"top_logprobs without logprobs", `{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, "top_logprobs"},
		{"top_logprobs too many", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, "top_logprobs"},
		{"continue a user message", `{"messages":[{"role":"user","content":"x"}],"continue_final_message":true}`, "continue_final_message"},
		{"continue and generation prompt", `{"messages":[{"role":"assistant","content":"x"}],"continue_final_message":true,"add_generation_prompt":true}`, "continue_final_message"},
		{"tool without tool_call_id", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r"}]}`, "messages[2].tool_call_id"},
		{"tool naming no call", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c2","content":"r"}]}`, "messages[2].tool_call_id"},
		{"tool before its call", `{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[1].tool_call_id"},
		{"program_id lone high surrogate", `{"messages":[{"role":"user","content":"x"}],"program_id":"a\ud800"}`, "program_id"},
		{"program_id lone low surrogate", `{"messages":[{"role":"user","content":"x"}],"program_id":"\udfff"}`, "program_id"},
		{"program_id high then not low", `{"messages":[{"role":"user","content":"x"}],"program_id":"\ud800\u0041"}`, "program_id"},
		{"extra_body.program_id lone surrogate", `{"messages":[{"role":"user","content":"x"}],"extra_body":{"program_id":"\ud800"}}`, "program_id"},
		{"program_id lone surrogate beside a lenient field", `{"messages":[{"role":"user","content":"x"}],"max_tokens":"3","program_id":"\ud800"}`, "program_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseChat([]byte(tt.body))
			if err == nil {
				t.Fatalf("ParseChat(%s): want an error", tt.body)
			}
			if err.Status != http.StatusBadRequest || err.Param != tt.param {
				t.Errorf("error %v: want 400 with param %q", err, tt.param)
			}
		})
	}
}

// TestLenientAndNewFields: what vLLM's clients send loosely is accepted
// with its meaning, and the sampling fields reach the engine parameters.
func TestLenientAndNewFields(t *testing.T) {
	r, err := ParseCompletion([]byte(`{"prompt":[[1,2],"b"],"n":"3","best_of":"4","max_tokens":"8",
		"temperature":"0.5","stream":"false","echo":"true","priority":-4,"presence_penalty":"0.5",
		"frequency_penalty":-1,"repetition_penalty":1.2,"min_p":"0.1","logit_bias":{"7":-100,"2":5.5},
		"stop_token_ids":[3],"return_token_ids":"true","truncate_prompt_tokens":"5"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Prompt.All(); len(got) != 2 || !got[0].IsTokens || got[1].Text != "b" {
		t.Errorf("batched prompts %+v", got)
	}
	if r.Choices() != 3 || r.Candidates() != 4 || *r.MaxTokens != 8 || !r.Echo || !r.ReturnTokenIDs ||
		*r.TruncatePromptTokens != 5 || r.Priority.Priority() != engine.PriorityHigh {
		t.Errorf("parsed %+v", r)
	}
	p := r.EngineParams(8, Defaults{})
	want := engine.Params{MaxTokens: 8, Temperature: 0.5, PresencePenalty: 0.5, FrequencyPenalty: -1,
		RepetitionPenalty: 1.2, MinP: 0.1, LogitBias: []sampling.Bias{{ID: 2, Value: 5.5}, {ID: 7, Value: -100}},
		StopTokenIDs: []int32{3}}
	if d := cmp.Diff(want, p); d != "" {
		t.Errorf("engine params (-want +got):\n%s", d)
	}
	for body, want := range map[string]engine.Priority{
		`{"prompt":"x","priority":0}`: engine.PriorityHigh, `{"prompt":"x","priority":1}`: engine.PriorityNormal,
		`{"prompt":"x","priority":"7"}`: engine.PriorityLow, `{"prompt":"x","priority":-100}`: engine.PriorityHigh,
	} {
		r, err := ParseCompletion([]byte(body))
		if err != nil || r.Priority.Priority() != want {
			t.Errorf("%s: priority %v (%v), want %v", body, r.Priority.Priority(), err, want)
		}
	}
	c, err := ParseChat([]byte(`{"messages":[{"role":"assistant","content":"x"}],"logprobs":"true","top_logprobs":"3",
		"stream":"true","stream_options":{"include_usage":"true"},"continue_final_message":true,"add_generation_prompt":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if lp := c.LogprobSettings(); !lp.On || lp.Top != 3 || !c.Stream || !c.IncludeUsage() || c.GenerationPrompt() || !c.ContinueFinalMessage {
		t.Errorf("parsed chat %+v", c)
	}
}

func TestEngineParams(t *testing.T) {
	r, err := ParseCompletion([]byte(`{"prompt":"x","temperature":0,"top_p":0.9,"top_k":-1,"seed":-5,"min_tokens":1,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got := r.EngineParams(10, Defaults{Stop: []string{"END"}, MaxResponseChars: 100})
	want := engine.Params{MaxTokens: 10, MinTokens: 1, Temperature: 0, TopP: 0.9, Seed: uint64(1<<64 - 5), HasSeed: true,
		Stop: []string{"END"}, IgnoreEOS: true, MaxResponseChars: 100}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	r, _ = ParseCompletion([]byte(`{"prompt":"x","stop":"s"}`))
	got = r.EngineParams(3, Defaults{Stop: []string{"END"}})
	if d := cmp.Diff(engine.Params{MaxTokens: 3, Temperature: 1, Stop: []string{"s"}}, got); d != "" {
		t.Errorf("request stop strings replace the defaults (-want +got):\n%s", d)
	}
}

func TestProgramID(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name        string
		headers     map[string]string
		body        string
		want, param string
	}{
		{"header wins", map[string]string{"X-Program-Id": "h", "X-Session-ID": "s"}, `{"program_id":"b"}`, "h", "program_id"},
		{"body", map[string]string{"X-Session-ID": "s"}, `{"program_id":"b","prompt_cache_key":"k"}`, "b", "program_id"},
		{"extra_body", map[string]string{"X-Session-ID": "s"}, `{"extra_body":{"program_id":"e"}}`, "e", "program_id"},
		{"body before extra_body", nil, `{"program_id":"b","extra_body":{"program_id":"e"}}`, "b", "program_id"},
		{"session header", map[string]string{"X-Session-ID": "s", "Session-Id": "codex"}, `{"prompt_cache_key":"k"}`, "s", "program_id"},
		{"prompt_cache_key before the agents' session headers", map[string]string{"Session-Id": "codex", "X-Claude-Code-Session-Id": "cc"},
			`{"prompt_cache_key":"k"}`, "k", "prompt_cache_key"},
		{"codex session header", map[string]string{"session-id": "codex", "X-Claude-Code-Session-Id": "cc"}, `{}`, "codex", "program_id"},
		{"claude code session header", map[string]string{"x-claude-code-session-id": "cc"}, `{}`, "cc", "program_id"},
		{"none", nil, `{}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			body := strings.Replace(tt.body, "{", "{"+msgs+",", 1)
			if tt.body == `{}` {
				body = "{" + msgs + "}"
			}
			r, err := ParseChat([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if got, param := ProgramID(h.Get, r.Common.BodyProgram()); got != tt.want || param != tt.param {
				t.Errorf("ProgramID = %q (param %q), want %q (%q)", got, param, tt.want, tt.param)
			}
		})
	}
}

func TestErrorJSON(t *testing.T) {
	got := string(BadRequest("max_tokens", "bad").JSON())
	want := `{"error":{"message":"bad","type":"invalid_request_error","param":"max_tokens","code":null}}`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// manyBiases is n logit_bias entries, JSON without the braces.
func manyBiases(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":1`, i)
	}
	return b.String()
}

// TestChatReasoningEffort: reasoning_effort reaches the template as
// reasoning_effort, and none as enable_thinking false too (a thinking
// model then does not think); the client's own variables win; an
// unknown effort is a 400 naming the field.
func TestChatReasoningEffort(t *testing.T) {
	for _, tc := range []struct {
		body   string
		kwargs map[string]string
		param  string
	}{
		{`"reasoning_effort":"high"`, map[string]string{"reasoning_effort": `"high"`}, ""},
		{`"reasoning_effort":"none"`, map[string]string{"reasoning_effort": `"none"`, "enable_thinking": "false"}, ""},
		{`"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true}`, map[string]string{"reasoning_effort": `"none"`, "enable_thinking": "true"}, ""},
		{`"reasoning_effort":"extreme"`, nil, "reasoning_effort"},
	} {
		r, err := ParseChat([]byte(`{"messages":[{"role":"user","content":"x"}],` + tc.body + `}`))
		if tc.param != "" {
			if err == nil || err.Param != tc.param {
				t.Errorf("%s: got %v; want a 400 naming %s", tc.body, err, tc.param)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		got := map[string]string{}
		for k, v := range r.ChatTemplateKwargs {
			got[k] = string(v)
		}
		if len(got) != len(tc.kwargs) {
			t.Errorf("%s: kwargs %v, want %v", tc.body, got, tc.kwargs)
		}
		for k, v := range tc.kwargs {
			if got[k] != v {
				t.Errorf("%s: kwargs %v, want %v", tc.body, got, tc.kwargs)
			}
		}
	}
}
