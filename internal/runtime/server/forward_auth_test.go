package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

const poolKey = "pool-control-token"

// A paused program's request is held whatever X-Kvpilot-Forwarded value a
// client sends with it: only a value signed with the pool's key, as pods
// forward, is taken as forwarded, and only once, for the request it was
// signed for (method, path, program and body), within its time window.
// Program p is paused with its cache on this pod, r paused on another pod:
// what another pod of the pool sends runs (for r, a program the sender has
// just resumed on this pod: this pod's view is a round behind).
func TestClientCannotSkipAPauseWithTheForwardedHeader(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab, forwardKey: poolKey})
	env.post("/v1/completions", gateBody, "X-Program-Id", "p")
	tab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Pause: []string{"p"}, Routes: map[string]string{"r": ""}})

	sign := func(key, method, uri, pid, body string, at time.Time) string {
		return forwardSignature([]byte(key), at, method, uri, pid, []byte(body))
	}
	now := time.Now()
	// A genuine value runs r's request once; the same value is then
	// replayed (for p too: a value never sent for p verifies no better).
	genuine := sign(poolKey, "POST", "/v1/completions", "r", gateBody, now)
	if r := env.post("/v1/completions", gateBody, "X-Program-Id", "r", HeaderForwarded, genuine); r.status != 200 {
		t.Fatalf("a request forwarded by a pod of the pool: %d %s", r.status, r.body)
	}
	// r ends here and is paused elsewhere again.
	tab.Apply(&wire.Placement{Version: 2, Mode: "ProgramAware", Release: []string{"r"}, Routes: map[string]string{"r": ""}})
	for _, id := range []string{"p", "r"} {
		for name, value := range map[string]string{
			"any value":           "1",
			"forged mac":          "0123.abcd",
			"signed with another": sign("not-the-pool-key", "POST", "/v1/completions", id, gateBody, now),
			"signed for another":  sign(poolKey, "POST", "/v1/completions", "q", gateBody, now),
			"another body":        sign(poolKey, "POST", "/v1/completions", id, `{"prompt":"other"}`, now),
			"another path":        sign(poolKey, "POST", "/v1/chat/completions", id, gateBody, now),
			"another method":      sign(poolKey, "PUT", "/v1/completions", id, gateBody, now),
			"too old":             sign(poolKey, "POST", "/v1/completions", id, gateBody, now.Add(-2*ForwardWindow)),
			"from the future":     sign(poolKey, "POST", "/v1/completions", id, gateBody, now.Add(2*ForwardWindow)),
			"replayed":            genuine,
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.ts.URL+"/v1/completions", strings.NewReader(gateBody))
			req.Header.Set("X-Program-Id", id)
			req.Header.Set(HeaderForwarded, value)
			resp, err := env.client.Do(req)
			cancel()
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s, %s: a paused program's request ran (%d); it must be held", id, name, resp.StatusCode)
			}
			deadline := time.Now().Add(waitTimeout)
			for findProgram(tab, id).HeldRequests != 0 {
				if time.Now().After(deadline) {
					t.Fatal("a departed client's request is still held")
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	if p := findProgram(tab, "p"); p.Steps != 1 || p.State != "PAUSED" {
		t.Errorf("after the clients' attempts: %+v", p)
	}
}

// A pod with no key (no control token: no pool) takes nothing as forwarded.
func TestNoForwardKeyNothingVerifies(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab})
	env.post("/v1/completions", gateBody, "X-Program-Id", "p")
	tab.Apply(&wire.Placement{Version: 1, Pause: []string{"p"}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.ts.URL+"/v1/completions", strings.NewReader(gateBody))
	req.Header.Set("X-Program-Id", "p")
	req.Header.Set(HeaderForwarded, forwardSignature(nil, time.Now(), "POST", "/v1/completions", "p", []byte(gateBody)))
	if resp, err := env.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("ran (%d) on a pod without a forward key", resp.StatusCode)
	}
}

// TestNonceCache: a nonce verifies once until it expires; the cache never
// holds more than its bound, refusing (not forgetting) when full of live
// nonces.
func TestNonceCache(t *testing.T) {
	c := newNonceCache(3)
	t0 := time.Unix(1000, 0)
	exp := t0.Add(ForwardWindow)
	for _, step := range []struct {
		nonce string
		now   time.Time
		want  bool
	}{
		{"a", t0, true},
		{"a", t0, false},
		{"b", t0, true},
		{"c", t0.Add(time.Second), true},
		{"d", t0.Add(time.Second), false}, // full of unexpired nonces
		{"a", exp.Add(-time.Second), false},
		{"d", exp, true}, // a, b and c expired
		{"a", exp, true},
	} {
		if got := c.add(step.nonce, step.now.Add(ForwardWindow), step.now); got != step.want {
			t.Errorf("add(%s) at %v = %t, want %t", step.nonce, step.now.Sub(t0), got, step.want)
		}
		if n := len(c.seen); n > 3 {
			t.Fatalf("%d nonces held; bound 3", n)
		}
	}
}
