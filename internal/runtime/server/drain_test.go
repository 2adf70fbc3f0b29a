package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
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
	poll.Until(t, waitTimeout, "a held request", func() bool { return findProgram(tab, "p").HeldRequests == 1 })
	env.srv.BeginDrain()
	// Nothing else here would answer a held request (no placement resumes
	// it, no drain deadline aborts it): an answer at all is the drain's.
	var held response
	select {
	case held = <-got:
	case <-time.After(waitTimeout):
		t.Fatal("the held request was not answered after the drain began")
	}
	for _, r := range []response{held, env.post("/v1/completions", gateBody, "X-Program-Id", "p")} {
		var e openai.ErrorResponse
		_ = json.Unmarshal(r.body, &e)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || deref(e.Error.Code) != openai.CodeDraining {
			t.Errorf("held request on drain: %d %s Retry-After %q", r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	if p := findProgram(tab, "p"); p.HeldRequests != 0 {
		t.Errorf("%d requests still counted held", p.HeldRequests)
	}
}

// TestBeginDrainAnswersQueuedRequestsAtOnce: requests still queued (never
// scheduled) when the drain begins are answered at once as retryable: a
// stream ends each choice with finish_reason "abort", one error event
// (code draining) and [DONE]; a JSON request gets 503 with Retry-After.
// They used to wait for the drain deadline's abort. The running request
// runs on.
func TestBeginDrainAnswersQueuedRequestsAtOnce(t *testing.T) {
	env := newEnv(t, envOpts{maxNumSeqs: 1})
	env.gate.close()
	// The first request runs (blocked in the executor); the next ones queue.
	running := make(chan response, 1)
	go func() { running <- env.post("/v1/completions", `{"prompt":"a","max_tokens":2}`) }()
	<-env.gate.entered
	type result struct {
		status int
		header http.Header
		body   []byte
		err    error
	}
	send := func(body string) chan result {
		out := make(chan result, 1)
		go func() {
			resp, err := env.client.Post(env.ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				out <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			out <- result{resp.StatusCode, resp.Header, b, err}
		}()
		return out
	}
	streamed := send(`{"prompt":["b","bb"],"max_tokens":2,"stream":true}`)
	plain := send(`{"prompt":"c","max_tokens":2}`)
	poll.Until(t, waitTimeout, "three queued sequences", func() bool { _, waiting := env.eng.Pending(); return waiting == 3 })

	env.srv.BeginDrain()
	// Nothing else here would answer the queued requests (no drain
	// deadline aborts them, the running request stays in the executor
	// until the gate opens): answers at all are the drain's.
	var s, p result
	select {
	case s = <-streamed:
	case <-time.After(waitTimeout):
		t.Fatal("the queued stream was not answered after the drain began")
	}
	select {
	case p = <-plain:
	case <-time.After(waitTimeout):
		t.Fatal("the queued request was not answered after the drain began")
	}
	select {
	case r := <-running:
		t.Fatalf("the running request ended (%d) with the gate closed", r.status)
	default:
	}
	if s.err != nil || p.err != nil {
		t.Fatalf("errors: %v, %v", s.err, p.err)
	}
	events := readEvents(t, bytes.NewReader(s.body))
	var finishes, errs int
	for _, ev := range events {
		switch {
		case strings.Contains(ev, `"finish_reason":"abort"`):
			finishes++
		case strings.HasPrefix(ev, `{"error"`):
			errs++
			if !strings.Contains(ev, `"code":"draining"`) {
				t.Errorf("error event %s: want code draining", ev)
			}
		}
	}
	if finishes != 2 || errs != 1 || events[len(events)-1] != "[DONE]" {
		t.Errorf("stream events %q: want each of 2 choices finished \"abort\", one error event, [DONE]", events)
	}
	var e openai.ErrorResponse
	_ = json.Unmarshal(p.body, &e)
	if p.status != http.StatusServiceUnavailable || p.header.Get("Retry-After") == "" || deref(e.Error.Code) != openai.CodeDraining {
		t.Errorf("queued JSON request: %d %s Retry-After %q", p.status, p.body, p.header.Get("Retry-After"))
	}
	env.gate.open()
	if r := <-running; r.status != http.StatusOK {
		t.Errorf("the running request: %d %s; want it to finish", r.status, r.body)
	}
}
