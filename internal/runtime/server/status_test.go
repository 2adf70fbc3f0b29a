package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// TestStatusesNameTheField: requests that can never succeed are 400s
// naming the field, not retryable 429s or silently merged programs.
func TestStatusesNameTheField(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{maxQueue: 8, programs: tab})
	prompts := `["a","b","c"]`
	for _, tc := range []struct {
		name, path, body, param string
	}{
		// 3 prompts × 4 choices = 12 sequences; the queue holds 8.
		{"more sequences than the queue holds (n)", "/v1/completions", `{"prompt":` + prompts + `,"n":4,"max_tokens":1}`, "n"},
		{"more sequences than the queue holds (best_of)", "/v1/completions", `{"prompt":` + prompts + `,"n":1,"best_of":4,"max_tokens":1}`, "best_of"},
		{"more prompts than the queue holds", "/v1/completions", `{"prompt":[` + strings.Repeat(`"a",`, 8) + `"a"],"max_tokens":1}`, "prompt"},
		{"lone surrogate program id", "/v1/completions", `{"prompt":"a","max_tokens":1,"program_id":"\ud800"}`, "program_id"},
		{"lone surrogate release", routeRelease, `{"program_id":"\udfff"}`, "program_id"},
		{"tool message answering nothing", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c1","content":"r"}],"max_tokens":1}`, "messages[1].tool_call_id"},
	} {
		r := env.post(tc.path, tc.body)
		var e openai.ErrorResponse
		_ = json.Unmarshal(r.body, &e)
		if r.status != http.StatusBadRequest || deref(e.Error.Param) != tc.param {
			t.Errorf("%s: %d %s; want 400 naming %s", tc.name, r.status, r.body, tc.param)
		}
	}
	if n := len(tab.Report().Programs); n != 0 {
		t.Errorf("%d programs after refused requests: %+v", n, tab.Report().Programs)
	}
	// Within the bound, a batch runs.
	if r := env.post("/v1/completions", `{"prompt":`+prompts+`,"n":2,"max_tokens":1}`); r.status != http.StatusOK {
		t.Errorf("6 sequences: %d %s", r.status, r.body)
	}
}
