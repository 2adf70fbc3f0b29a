package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/util/testing/stackgrammars"
)

// TestGrammarStackBlowup: grammars whose rule stacks multiply with their
// depth (helpers/probe-bounds.md, finding 1: a 300-byte one hung the
// engine, every other request with it) are refused with a 400 naming the
// field when their first position is at fault, and otherwise fail only
// their own request, as a 400 or, streamed, a choice finished "abort" and
// an error event, while an unconstrained request on the same engine runs
// to its length.
func TestGrammarStackBlowup(t *testing.T) {
	env, _ := newCPUEnv(t)
	chat := func(grammar, extra string) string {
		g, _ := json.Marshal(grammar)
		return fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"guided_grammar":%s%s}`, g, extra)
	}
	for _, g := range []string{stackgrammars.Nullable(14), stackgrammars.Doubling("", 20)} {
		r := env.post("/v1/chat/completions", chat(g, ""))
		var e openai.ErrorResponse
		decodeStrict(t, r.body, &e)
		if r.status != http.StatusBadRequest || deref(e.Error.Param) != "guided_grammar" || !strings.Contains(e.Error.Message, "too many rule stacks") {
			t.Errorf("%.40q…: %d %s; want a 400 naming guided_grammar", g, r.status, r.body)
		}
	}

	// Its stacks multiply after "bb": the mask after the first "b" meets
	// them, in the engine.
	late := stackgrammars.Doubling("bb", 20)
	type answer struct {
		status int
		body   string
		err    error
	}
	free := make(chan answer, 1)
	go func() {
		resp, err := env.client.Post(env.ts.URL+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"hi","max_tokens":32,"ignore_eos":true}`))
		if err != nil {
			free <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		free <- answer{resp.StatusCode, string(b), err}
	}()
	r := env.post("/v1/chat/completions", chat(late, ""))
	var e openai.ErrorResponse
	decodeStrict(t, r.body, &e)
	if r.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, "too many rule stacks") {
		t.Errorf("a grammar failing in the engine: %d %s; want a 400 saying why", r.status, r.body)
	}
	a := <-free
	var resp openai.CompletionResponse
	if a.err == nil && a.status == http.StatusOK {
		decodeStrict(t, []byte(a.body), &resp)
	}
	if a.err != nil || a.status != http.StatusOK || resp.Usage.CompletionTokens != 32 || *resp.Choices[0].FinishReason != "length" {
		t.Errorf("the unconstrained request beside it: %v %d %s; want 32 tokens, finish length", a.err, a.status, a.body)
	}

	var aborted, errs int
	for _, ev := range env.streamRequest("/v1/chat/completions", chat(late, `,"stream":true`)) {
		switch {
		case strings.Contains(ev, `"finish_reason":"abort"`):
			aborted++
		case strings.HasPrefix(ev, `{"error"`):
			errs++
			if !strings.Contains(ev, "too many rule stacks") || !strings.Contains(ev, `"type":"invalid_request_error"`) {
				t.Errorf("error event %s: want an invalid_request_error saying why", ev)
			}
		}
	}
	if aborted != 1 || errs != 1 {
		t.Errorf("streamed: %d choices finished abort, %d error events; want 1 and 1", aborted, errs)
	}
}
