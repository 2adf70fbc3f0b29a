package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// TestBeginDrainAnswersHeldRequests: held requests, and those held after
// the drain began, get a retryable 503 at once instead of waiting for a
// resume the draining pod will not see through.
func TestBeginDrainAnswersHeldRequests(t *testing.T) {
	tab := newTable("a:1", 8192)
	tab.Apply(&wire.Placement{Version: 1, Routes: map[string]string{"p": ""}})
	env := newEnv(t, envOpts{programs: tab})
	got := make(chan response, 1)
	go func() { got <- env.post("/v1/completions", gateBody, "X-Program-Id", "p") }()
	waitFor(t, "a held request", func() bool { return findProgram(tab, "p").HeldRequests == 1 })
	start := time.Now()
	env.srv.BeginDrain()
	for _, r := range []response{<-got, env.post("/v1/completions", gateBody, "X-Program-Id", "p")} {
		var e openai.ErrorResponse
		_ = json.Unmarshal(r.body, &e)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || deref(e.Error.Code) != openai.CodeDraining {
			t.Errorf("held request on drain: %d %s Retry-After %q", r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("answered %v after the drain began", d)
	}
	if p := findProgram(tab, "p"); p.HeldRequests != 0 {
		t.Errorf("%d requests still counted held", p.HeldRequests)
	}
}
