package openai

import (
	"encoding/json"
	"net/http"
	"testing"
	"unicode/utf8"
)

var seedBodies = []string{
	``, `{}`, `null`, `[]`, `{"prompt":"hi"}`, `{"prompt":[1,2,3],"max_tokens":4}`, `{"prompt":[[1]]}`,
	`{"prompt":["a","b"]}`, `{"prompt":"x","stop":["a",""]}`, `{"prompt":"x","stop":"\u0000"}`,
	`{"prompt":"x","n":2}`, `{"prompt":"x","max_tokens":-1}`, `{"prompt":"x","temperature":1e309}`,
	`{"prompt":"x","top_p":"NaN"}`, `{"prompt":"x","priority":"low","program_id":"p","extra_body":{"program_id":3}}`,
	`{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"max_completion_tokens":2}`,
	`{"messages":[{"role":"","content":null}]}`, `{"messages":{"role":"user"}}`,
	`{"prompt":"\xff\xfe","seed":-9223372036854775808}`, `{"prompt":[[[[[[1]]]]]]}`,
	`{"prompt":["a",[1,2],null]}`, `{"prompt":[[1],[2,3]],"n":"2","best_of":3,"logprobs":"2"}`,
	`{"prompt":"x","echo":"true","logit_bias":{"5":-100,"x":1},"bad_words":["a",""]}`,
	`{"prompt":"x","presence_penalty":"1.5","frequency_penalty":-2.5,"repetition_penalty":0,"min_p":"2"}`,
	`{"prompt":"x","stop_token_ids":[1,-1],"truncate_prompt_tokens":-2,"return_token_ids":"false"}`,
	`{"prompt":"x","priority":-7}`, `{"prompt":"x","priority":"99"}`, `{"prompt":"x","priority":1e40}`,
	`{"messages":[{"role":"user","content":"x"}],"logprobs":"true","top_logprobs":"21"}`,
	`{"messages":[{"role":"assistant","content":"x"}],"continue_final_message":true,"add_generation_prompt":false}`,
	`{"messages":[{"role":"user","content":"x"}],"stream":"true","stream_options":{"include_usage":"true"}}`,
	`{"messages":[{"role":"wizard","content":"hi"}]}`, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xffb\"}]}",
}

// FuzzParse checks that no body crashes the parsers, that every failure is a
// 400 with a JSON-encodable message, and that accepted requests satisfy the
// invariants the server relies on.
func FuzzParse(f *testing.F) {
	for _, s := range seedBodies {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		validUTF8 := utf8.Valid(body)
		check := func(c *Common, err *Error) {
			if err != nil {
				if err.Status != http.StatusBadRequest {
					t.Fatalf("status %d, want 400", err.Status)
				}
				if !json.Valid(err.JSON()) {
					t.Fatalf("error body is not JSON: %s", err.JSON())
				}
				return
			}
			if !validUTF8 {
				t.Fatalf("accepted a body with invalid UTF-8: %q", body)
			}
			if n := c.Choices(); n < 1 || n > MaxN {
				t.Fatalf("accepted n=%d", n)
			}
			if c.MaxTokens != nil && *c.MaxTokens < 1 {
				t.Fatalf("accepted max_tokens=%d", *c.MaxTokens)
			}
			if c.TopP != nil && !(*c.TopP > 0 && *c.TopP <= 1) {
				t.Fatalf("accepted top_p=%g", *c.TopP)
			}
			for _, s := range c.Stop {
				if s == "" {
					t.Fatal("accepted an empty stop string")
				}
			}
			p := c.EngineParams(1, Defaults{})
			if p.Temperature < 0 || p.MinTokens < 0 {
				t.Fatalf("engine params %+v", p)
			}
		}
		if r, err := ParseCompletion(body); err == nil {
			if !r.Prompt.Set() {
				t.Fatal("accepted a completion without a prompt")
			}
			check(&r.Common, nil)
		} else {
			check(nil, err)
		}
		if r, err := ParseChat(body); err == nil {
			if len(r.Messages) == 0 {
				t.Fatal("accepted a chat without messages")
			}
			for i, m := range r.Messages {
				if checkRole(i, m.Role) != nil {
					t.Fatalf("accepted role %q", m.Role)
				}
			}
			check(&r.Common, nil)
		} else {
			check(nil, err)
		}
	})
}
