package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// TestEmptyLanguageIsRefused: a grammar, regex or schema that accepts no
// output at all is the client's mistake: a 400 naming the field it came
// in, on every endpoint, not a 500 from a first step with no token
// allowed. A language whose only member is the empty string is not
// empty.
func TestEmptyLanguageIsRefused(t *testing.T) {
	env, _ := newCPUEnv(t)
	const chat = `{"messages":[{"role":"user","content":"x"}],"max_tokens":4,`
	for _, tc := range []struct {
		path, body, param string
		status            int
	}{
		{"/v1/chat/completions", chat + `"guided_grammar":"root ::= [^\\x00-\\U0010FFFF]"}`, "guided_grammar", 400},
		{"/v1/completions", `{"prompt":"x","max_tokens":4,"guided_grammar":"root ::= [^\\x00-\\U0010FFFF]"}`, "guided_grammar", 400},
		{"/v1/chat/completions", chat + `"structured_outputs":{"grammar":"root ::= [^\\x00-\\U0010FFFF]"}}`, "structured_outputs.grammar", 400},
		{"/v1/chat/completions", chat + `"guided_regex":"[^\\x00-\\x{10FFFF}]"}`, "guided_regex", 400},
		{"/v1/chat/completions", chat + `"structured_outputs":{"regex":"[^\\x00-\\x{10FFFF}]"}}`, "structured_outputs.regex", 400},
		{"/v1/chat/completions", chat + `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","minLength":3,"maxLength":2}}}}`, "response_format.json_schema.schema", 400},
		{"/v1/chat/completions", chat + `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"allOf":[{"type":"string"},{"type":"integer"}]}}}}`, "response_format.json_schema.schema", 400},
		{"/v1/chat/completions", chat + `"guided_json":{"type":"string","minLength":3,"maxLength":2}}`, "guided_json", 400},
		{"/v1/responses", `{"input":"x","max_output_tokens":4,"text":{"format":{"type":"json_schema","name":"x","schema":{"allOf":[{"type":"string"},{"type":"integer"}]}}}}`, "text.format.schema", 400},
		{"/v1/messages", `{"max_tokens":4,"messages":[{"role":"user","content":"x"}],"output_format":{"type":"json_schema","schema":{"allOf":[{"type":"string"},{"type":"integer"}]}}}`, "output_format.schema", 400},
		// Only the empty string: not empty.
		{"/v1/chat/completions", chat + `"guided_grammar":"root ::= \"\""}`, "", 200},
		{"/v1/chat/completions", chat + `"guided_regex":""}`, "", 200},
	} {
		r := env.post(tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s %s: %d %s; want %d", tc.path, tc.body, r.status, r.body, tc.status)
			continue
		}
		if tc.status != http.StatusBadRequest {
			continue
		}
		if tc.path == "/v1/messages" { // Anthropic's shape: no param, the message names it
			var e struct {
				Error struct{ Type, Message string } `json:"error"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Type != "invalid_request_error" || !strings.HasPrefix(e.Error.Message, tc.param) {
				t.Errorf("%s %s: %s; want an invalid_request_error naming %s", tc.path, tc.body, r.body, tc.param)
			}
			continue
		}
		var e openai.ErrorResponse
		decodeStrict(t, r.body, &e)
		if deref(e.Error.Param) != tc.param || e.Error.Type != "invalid_request_error" {
			t.Errorf("%s %s: %s; want an invalid_request_error naming %s", tc.path, tc.body, r.body, tc.param)
		}
	}
}
