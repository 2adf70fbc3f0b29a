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
			if c.N != nil && *c.N != 1 {
				t.Fatalf("accepted n=%d", *c.N)
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
