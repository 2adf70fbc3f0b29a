package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// A body the pod's preprocessing budget cannot take now is answered 503
// with Retry-After, read to its end (the client reads the answer, not a
// reset), a body it could never take 413, and a body it can take is
// served; every claim is given back.
func TestPreprocessBudgetRefusesABody(t *testing.T) {
	env, _ := newCPUEnvWith(t, envOpts{preprocessMemory: 1 << 20})
	half := `{"prompt":"` + strings.Repeat("a", 1<<19/BodyMemoryFactor) + `","max_tokens":1}` // BodyMemoryFactor× is over half the budget
	release := holdBudget(t, env, 1<<19)
	r := env.post("/v1/completions", half)
	var e openai.ErrorResponse
	decodeStrict(t, r.body, &e)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || deref(e.Error.Code) != openai.CodeMemoryBusy {
		t.Fatalf("a body over the budget left: %d %q %s, want 503 with Retry-After and code %s", r.status, r.header.Get("Retry-After"), r.body, openai.CodeMemoryBusy)
	}
	release()
	big := `{"prompt":"` + strings.Repeat("a", 1<<20/BodyMemoryFactor+1) + `","max_tokens":1}` // BodyMemoryFactor× is over 1 MiB
	if r := env.post("/v1/completions", big); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the whole budget: %d %s, want 413 (waiting cannot help)", r.status, r.body)
	}
	if r := env.post("/v1/completions", `{"prompt":"hi","max_tokens":1}`); r.status != http.StatusOK {
		t.Fatalf("a small body: %d %s", r.status, r.body)
	}
	if got := gathered(t, env, "kvpilot_preprocess_memory_refused_total"); got != 2 {
		t.Errorf("kvpilot_preprocess_memory_refused_total = %v, want 2", got)
	}
	waitBudgetFree(t, env)
}

// A compile the budget cannot feed fails with 503 naming the field, is
// not cached, and compiles once the budget has room again.
func TestPreprocessBudgetRefusesACompile(t *testing.T) {
	const budget = 40 << 20
	env, _ := newCPUEnvWith(t, envOpts{preprocessMemory: budget})
	hold := env.srv.budget.Claim()
	if err := hold.Grow(budget - 256<<10); err != nil {
		t.Fatal(err)
	}
	pattern, _ := json.Marshal(`[a-z]{1,40}@[a-z]{1,20}\.(com|org)`)
	req := `{"prompt":"hi","max_tokens":4,"structured_outputs":{"regex":` + string(pattern) + `}}`
	r := env.post("/v1/completions", req)
	var e openai.ErrorResponse
	decodeStrict(t, r.body, &e)
	if r.status != http.StatusServiceUnavailable || deref(e.Error.Param) != "structured_outputs.regex" || r.header.Get("Retry-After") == "" {
		t.Fatalf("a compile with the budget held elsewhere: %d %s, want 503 naming structured_outputs.regex", r.status, r.body)
	}
	hold.Release()
	if r := env.post("/v1/completions", req); r.status != http.StatusOK {
		t.Fatalf("the same constraint once the budget is free: %d %s (a refusal by the budget must not be cached)", r.status, r.body)
	}
	waitBudgetFree(t, env)
}

// A request that has gone to the engine keeps two times its body drawn
// (the bytes and the decoded request), not the sixteen its preprocessing
// was charged, and gives that back when it ends.
func TestPreprocessBudgetShrinksOnceSubmitted(t *testing.T) {
	env := newEnv(t, envOpts{preprocessMemory: 1 << 30})
	body := `{"prompt":"hello there","max_tokens":2,"ignore_eos":true}`
	done := postHeld(t, env, "/v1/completions", body)
	if got, want := env.srv.budget.InUse(), int64(bodyRetainedFactor*len(body)); got != want {
		t.Errorf("a running request holds %d bytes of the budget, want %d (%d× its body)", got, want, bodyRetainedFactor)
	}
	env.gate.open()
	if r := <-done; r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	waitBudgetFree(t, env)
}

// postHeld posts body to path with env's executor held, and returns once
// the request has reached it (its preprocessing is over); the answer
// comes on the channel once the gate is opened.
func postHeld(t *testing.T, env *testEnv, path, body string) <-chan response {
	t.Helper()
	env.gate.close()
	done := make(chan response, 1)
	go func() { done <- env.post(path, body) }()
	select {
	case <-env.gate.entered:
	case <-time.After(waitTimeout):
		t.Fatal("the request never reached the executor")
	}
	return done
}

// waitBudgetFree waits for every claim on env's budget to be given back:
// a handler releases its claim as it returns, which may be just after the
// client has read the answer.
func waitBudgetFree(t *testing.T, env *testEnv) {
	t.Helper()
	poll.UntilOK(t, waitTimeout, func() string {
		if n := env.srv.budget.InUse(); n != 0 {
			return fmt.Sprintf("%d bytes of the budget still held with no request in flight", n)
		}
		return ""
	})
}

// gathered is the value of env's metric name (a gauge or a counter).
func gathered(t *testing.T, env *testEnv, name string) float64 {
	t.Helper()
	fams, err := env.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
