package server

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// streamEnds matches the end of each generation endpoint's stream.
var streamEnds = map[string]*regexp.Regexp{
	"/v1/completions":      regexp.MustCompile(`data: \[DONE\]\n\n$`),
	"/v1/chat/completions": regexp.MustCompile(`data: \[DONE\]\n\n$`),
	"/v1/responses":        regexp.MustCompile(`event: response\.(completed|incomplete|failed)\ndata: [^\n]*\n\n$`),
	"/v1/messages":         regexp.MustCompile(`event: (message_stop|error)\ndata: [^\n]*\n\n$`),
}

// FuzzHandler sends arbitrary bodies to the generation endpoints (chat and
// completions, Responses, Messages): nothing may answer 5xx or crash, a
// stream ends with its API's last event, and no KV block may stay
// allocated.
func FuzzHandler(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"x","max_tokens":3}`, `{"prompt":[1,2],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`, `{"prompt":[[1]],"max_tokens":1}`,
		`{"prompt":[99999]}`, `{"prompt":"x","max_tokens":100000}`, `{"prompt":"x","stop":["t"],"max_tokens":4,"min_tokens":2}`,
		`{"prompt":"x","max_tokens":2,"priority":"low","ignore_eos":true,"seed":-1}`, `{"prompt":""}`, `{`, `[]`, ``,
		`{"input":"hi","max_output_tokens":3,"stream":true}`, `{"input":[{"type":"function_call_output","call_id":"c","output":"x"}],"max_output_tokens":2}`,
		`{"input":"x","previous_response_id":"resp_x","max_output_tokens":2}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true,"system":"s"}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}],"max_tokens":2}`,
	} {
		f.Add(s)
	}
	env := newEnv(f, envOpts{maxModelLen: 64})
	f.Fuzz(func(t *testing.T, body string) {
		for path, last := range streamEnds {
			w := httptest.NewRecorder()
			env.srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
			if w.Code >= 500 {
				t.Fatalf("%s %q: %d %s", path, body, w.Code, w.Body)
			}
			if w.Code == http.StatusOK && strings.Contains(w.Header().Get("Content-Type"), "event-stream") && !last.MatchString(w.Body.String()) {
				t.Fatalf("%s %q: stream does not end with its last event: %s", path, body, w.Body)
			}
		}
		env.checkNoLeak(t)
	})
}
