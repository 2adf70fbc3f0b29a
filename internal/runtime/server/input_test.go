package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// TestBadInputIs400: inputs vLLM refuses are refused here too, with the
// field named, over a real HTTP server; none reaches the engine.
func TestBadInputIs400(t *testing.T) {
	env := newEnv(t, envOpts{programs: programs.New(programs.Config{Pod: "a"})})
	for _, tc := range []struct {
		name, path, body, param string
		header                  []string
	}{
		{"unknown chat role", routeChat, `{"messages":[{"role":"wizard","content":"hi"}],"max_tokens":2}`, "messages[0].role", nil},
		{"invalid UTF-8 in chat content", routeChat, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}],\"max_tokens\":2}", "messages[0].content", nil},
		{"invalid UTF-8 in a prompt", routeCompletions, "{\"prompt\":\"ab\xc0\",\"max_tokens\":2}", "prompt", nil},
		{"tab in X-Program-Id", routeCompletions, `{"prompt":"x","max_tokens":2}`, "program_id", []string{"X-Program-Id", "a\tb"}},
		{"invalid UTF-8 in X-Program-Id", routeCompletions, `{"prompt":"x","max_tokens":2}`, "program_id", []string{"X-Program-Id", "a\xffb"}},
		{"overlong program_id", routeCompletions, `{"prompt":"x","max_tokens":2,"program_id":"` + strings.Repeat("p", programs.MaxIDLen+1) + `"}`, "program_id", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := env.post(tc.path, tc.body, tc.header...)
			var e openai.ErrorResponse
			if err := json.Unmarshal(r.body, &e); err != nil {
				t.Fatalf("status %d, body %s: %v", r.status, r.body, err)
			}
			if r.status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != tc.param {
				t.Errorf("status %d, body %s; want 400 naming %q", r.status, r.body, tc.param)
			}
		})
	}
	if n := len(env.srv.cfg.Programs.Report().Programs); n != 0 {
		t.Errorf("%d programs created by refused requests", n)
	}
}
