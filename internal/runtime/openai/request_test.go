package openai

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
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
			func(r *CompletionRequest) any { return r.BodyProgramID() }, "p1"},
		{"program id in extra_body", `{"prompt":"x","extra_body":{"program_id":"p2"}}`,
			func(r *CompletionRequest) any { return r.BodyProgramID() }, "p2"},
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
		{"batched prompts", `{"prompt":["a","b"]}`, "prompt"},
		{"token not int", `{"prompt":[1,"a"]}`, "prompt"},
		{"token too big", `{"prompt":[99999999999]}`, "prompt"},
		{"triple nesting", `{"prompt":[[[1]]]}`, "prompt"},
		{"n=2", `{"prompt":"x","n":2}`, "n"},
		{"negative max_tokens", `{"prompt":"x","max_tokens":-1}`, "max_tokens"},
		{"zero max_tokens", `{"prompt":"x","max_tokens":0}`, "max_tokens"},
		{"max_tokens string", `{"prompt":"x","max_tokens":"5"}`, "max_tokens"},
		{"max_tokens float", `{"prompt":"x","max_tokens":5.5}`, "max_tokens"},
		{"temperature string", `{"prompt":"x","temperature":"hot"}`, "temperature"},
		{"negative temperature", `{"prompt":"x","temperature":-1}`, "temperature"},
		{"top_p zero", `{"prompt":"x","top_p":0}`, "top_p"},
		{"top_p above one", `{"prompt":"x","top_p":1.5}`, "top_p"},
		{"top_k", `{"prompt":"x","top_k":-2}`, "top_k"},
		{"stop number", `{"prompt":"x","stop":3}`, "stop"},
		{"stop empty string", `{"prompt":"x","stop":[""]}`, "stop"},
		{"stream string", `{"prompt":"x","stream":"yes"}`, "stream"},
		{"priority unknown", `{"prompt":"x","priority":"urgent"}`, "priority"},
		{"priority out of range", `{"prompt":"x","priority":7}`, "priority"},
		{"min over max", `{"prompt":"x","min_tokens":5,"max_tokens":2}`, "min_tokens"},
		{"negative min", `{"prompt":"x","min_tokens":-1}`, "min_tokens"},
		{"echo", `{"prompt":"x","echo":true}`, "echo"},
		{"best_of", `{"prompt":"x","best_of":3}`, "best_of"},
		{"logprobs", `{"prompt":"x","logprobs":2}`, "logprobs"},
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
	if d := cmp.Diff([]string{"be brief", "ab", ""}, got); d != "" {
		t.Errorf("contents (-want +got):\n%s", d)
	}
	if *r.MaxTokens != 7 {
		t.Errorf("max tokens %d, want 7 from max_completion_tokens", *r.MaxTokens)
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
		{"n", `{"messages":[{"role":"user","content":"x"}],"n":3}`, "n"},
		{"logprobs", `{"messages":[{"role":"user","content":"x"}],"logprobs":true}`, "logprobs"},
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

func TestNGreaterThanOneMessage(t *testing.T) {
	_, err := ParseCompletion([]byte(`{"prompt":"x","n":2}`))
	if err == nil || err.Message != "n>1 is not supported" {
		t.Fatalf("got %v, want the message %q", err, "n>1 is not supported")
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
	tests := []struct {
		name    string
		headers map[string]string
		body    string
		want    string
	}{
		{"header wins", map[string]string{"X-Program-Id": "h", "X-Session-ID": "s"}, `{"prompt":"x","program_id":"b"}`, "h"},
		{"body", map[string]string{"X-Session-ID": "s"}, `{"prompt":"x","program_id":"b"}`, "b"},
		{"extra_body", map[string]string{"X-Session-ID": "s"}, `{"prompt":"x","extra_body":{"program_id":"e"}}`, "e"},
		{"body before extra_body", nil, `{"prompt":"x","program_id":"b","extra_body":{"program_id":"e"}}`, "b"},
		{"session header", map[string]string{"X-Session-ID": "s"}, `{"prompt":"x"}`, "s"},
		{"none", nil, `{"prompt":"x"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			r, err := ParseCompletion([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := ProgramID(h.Get, &r.Common); got != tt.want {
				t.Errorf("ProgramID = %q, want %q", got, tt.want)
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
