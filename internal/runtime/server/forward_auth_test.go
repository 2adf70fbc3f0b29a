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
// forward, is taken as forwarded. Program p is paused with its cache on
// this pod, r paused on another pod.
func TestClientCannotSkipAPauseWithTheForwardedHeader(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab, forwardKey: poolKey})
	env.post("/v1/completions", gateBody, "X-Program-Id", "p")
	tab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Pause: []string{"p"}, Routes: map[string]string{"r": ""}})

	for _, id := range []string{"p", "r"} {
		for name, value := range map[string]string{
			"any value":           "1",
			"forged mac":          "0123.abcd",
			"signed with another": signForward([]byte("not-the-pool-key"), id),
			"signed for another":  signForward([]byte(poolKey), "q"),
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
	// What another pod of the pool sends does run: here, a program paused
	// elsewhere that the sender has just resumed on this pod (this pod's
	// view is a round behind).
	r := env.post("/v1/completions", gateBody, "X-Program-Id", "r", HeaderForwarded, signForward([]byte(poolKey), "r"))
	if r.status != 200 {
		t.Fatalf("a request forwarded by a pod of the pool: %d %s", r.status, r.body)
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
	req.Header.Set(HeaderForwarded, signForward(nil, "p"))
	if resp, err := env.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("ran (%d) on a pod without a forward key", resp.StatusCode)
	}
}
