package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandler sends arbitrary bodies to both generation endpoints: nothing
// may answer 5xx or crash, and no KV block may stay allocated.
func FuzzHandler(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"x","max_tokens":3}`, `{"prompt":[1,2],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`, `{"prompt":[[1]],"max_tokens":1}`,
		`{"prompt":[99999]}`, `{"prompt":"x","max_tokens":100000}`, `{"prompt":"x","stop":["t"],"max_tokens":4,"min_tokens":2}`,
		`{"prompt":"x","max_tokens":2,"priority":"low","ignore_eos":true,"seed":-1}`, `{"prompt":""}`, `{`, `[]`, ``,
	} {
		f.Add(s)
	}
	env := newEnv(f, envOpts{maxModelLen: 64})
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			w := httptest.NewRecorder()
			env.srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
			if w.Code >= 500 {
				t.Fatalf("%s %q: %d %s", path, body, w.Code, w.Body)
			}
			if w.Code == http.StatusOK && strings.Contains(w.Header().Get("Content-Type"), "event-stream") &&
				!strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
				t.Fatalf("%s %q: stream does not end with [DONE]: %s", path, body, w.Body)
			}
		}
		env.checkNoLeak(t)
	})
}
