package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

func newTable(addr string, capacityTokens int) *programs.Table {
	return programs.New(programs.Config{Pod: addr, Addr: addr, Logger: quiet,
		KV: func() wire.KVReport { return wire.KVReport{BlockSize: 16, TotalBlocks: capacityTokens / 16} }})
}

func findProgram(tab *programs.Table, id string) wire.ProgramReport {
	for _, p := range tab.Report().Programs {
		if p.ID == id {
			return p
		}
	}
	return wire.ProgramReport{}
}

const gateBody = `{"prompt":"the model reads the file","max_tokens":4}`

func TestGateRunsLocallyAndRecordsTheProgram(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab})
	if r := env.post("/v1/completions", gateBody, "X-Program-Id", "p1"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	p := findProgram(tab, "p1")
	// 5 prompt + 4 output tokens.
	if p.Status != "ACTING" || !p.Placed || p.Steps != 1 || p.ContextTokens != 9 {
		t.Fatalf("program after one step: %+v", p)
	}
	// A request without a program id bypasses the table.
	env.post("/v1/completions", gateBody)
	if n := len(tab.Report().Programs); n != 1 {
		t.Errorf("%d programs tracked", n)
	}
}

func TestGateForwardsToThePodRunningTheProgram(t *testing.T) {
	b := newEnv(t, envOpts{programs: newTable("b", 8192), forwardKey: poolKey})
	bAddr := strings.TrimPrefix(b.ts.URL, "http://")
	tab := newTable("a:1", 8192)
	a := newEnv(t, envOpts{programs: tab, forwardKey: poolKey})
	tab.Apply(&wire.Placement{Version: 1, Routes: map[string]string{"moved": bAddr}})
	r := a.post("/v1/completions", `{"prompt":"the model","max_tokens":3,"stream":true}`, "X-Program-Id", "moved")
	if r.status != 200 || r.header.Get("X-Kvpilot-Served-By") != bAddr {
		t.Fatalf("status %d served by %q: %s", r.status, r.header.Get("X-Kvpilot-Served-By"), r.body)
	}
	if !strings.Contains(string(r.body), "data: [DONE]") {
		t.Errorf("the stream did not come through: %s", r.body)
	}
	// Forwarded once: pod b ran it itself even though it has no placement.
	bTab := b.srv.cfg.Programs
	if p := findProgram(bTab, "moved"); !p.Placed || p.Steps != 1 {
		t.Errorf("on pod b: %+v", p)
	}
	// A pod that cannot be reached answers 503, not a hang.
	tab.Apply(&wire.Placement{Version: 2, Routes: map[string]string{"lost": "127.0.0.1:1"}})
	if r := a.post("/v1/completions", gateBody, "X-Program-Id", "lost"); r.status != http.StatusServiceUnavailable {
		t.Errorf("forward to a dead pod: %d %s", r.status, r.body)
	}
}

// A program named by an agent client's session header alone is forwarded
// with that header, so the pod that runs it derives the same program (and
// trusts the forward); the response's headers come back.
func TestGateForwardsAgentSessions(t *testing.T) {
	b := newEnv(t, envOpts{programs: newTable("b", 8192), forwardKey: poolKey})
	bAddr := strings.TrimPrefix(b.ts.URL, "http://")
	tab := newTable("a:1", 8192)
	a := newEnv(t, envOpts{programs: tab, forwardKey: poolKey})
	tab.Apply(&wire.Placement{Version: 1, Routes: map[string]string{"codex": bAddr, "claude": bAddr}})
	for _, tc := range []struct{ path, body, header, id string }{
		{"/v1/responses", `{"input":"hi","max_output_tokens":2,"tools":[{"type":"web_search"}]}`, "session-id", "codex"},
		{"/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, "x-claude-code-session-id", "claude"},
	} {
		r := a.post(tc.path, tc.body, tc.header, tc.id)
		if r.status != 200 || r.header.Get("X-Kvpilot-Served-By") != bAddr {
			t.Fatalf("%s: status %d served by %q: %s", tc.path, r.status, r.header.Get("X-Kvpilot-Served-By"), r.body)
		}
		if p := findProgram(b.srv.cfg.Programs, tc.id); !p.Placed || p.Steps != 1 {
			t.Errorf("%s: program %q on pod b: %+v", tc.path, tc.id, p)
		}
	}
	r := a.post("/v1/responses", `{"input":"hi","max_output_tokens":2,"tools":[{"type":"web_search"}]}`, "session-id", "codex")
	if got := r.header.Get(HeaderToolsDropped); got != "web_search" {
		t.Errorf("forwarded: %s %q", HeaderToolsDropped, got)
	}
}

func TestGateHoldsPausedProgramsUntilResumed(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab})
	env.post("/v1/completions", gateBody, "X-Program-Id", "p")
	tab.Apply(&wire.Placement{Version: 1, Pause: []string{"p"}})

	done := make(chan response, 1)
	go func() { done <- env.post("/v1/completions", gateBody, "X-Program-Id", "p") }()
	poll.Until(t, waitTimeout, "the request held", func() bool { return findProgram(tab, "p").HeldRequests == 1 })
	select {
	case r := <-done:
		t.Fatalf("a paused program's request was answered: %d", r.status)
	case <-time.After(50 * time.Millisecond):
	}
	tab.Apply(&wire.Placement{Version: 2, Place: []string{"p"}})
	if r := <-done; r.status != 200 {
		t.Fatalf("after resume: %d %s", r.status, r.body)
	}
	if p := findProgram(tab, "p"); p.Steps != 2 || p.HeldRequests != 0 {
		t.Errorf("%+v", p)
	}

	// A client that gives up while held leaves nothing behind.
	tab.Apply(&wire.Placement{Version: 3, Pause: []string{"p"}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.ts.URL+"/v1/completions", strings.NewReader(gateBody))
	req.Header.Set("X-Program-Id", "p")
	if _, err := env.client.Do(req); err == nil {
		t.Fatal("held request should time out on the client side")
	}
	poll.Until(t, waitTimeout, "a departed client's request let go", func() bool { return findProgram(tab, "p").HeldRequests == 0 })
}

// A request forwarded to the pod holding its paused program's cache waits
// there; when a placement moves the program to another pod, it follows
// the program. Asked again as forwarded, it ran where it had waited: the
// program was placed on both pods.
func TestGateHeldForwardedRequestFollowsItsProgramsMove(t *testing.T) {
	aTab, bTab := newTable("a:1", 8192), newTable("b:1", 8192)
	a := newEnv(t, envOpts{programs: aTab, forwardKey: poolKey})
	b := newEnv(t, envOpts{programs: bTab, forwardKey: poolKey})
	aAddr, bAddr := strings.TrimPrefix(a.ts.URL, "http://"), strings.TrimPrefix(b.ts.URL, "http://")
	if r := b.post("/v1/completions", gateBody, "X-Program-Id", "p"); r.status != 200 {
		t.Fatalf("first step on pod b: %d %s", r.status, r.body)
	}
	// Paused with its cache on pod b; pod a, a round behind, still routes
	// it there.
	bTab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Pause: []string{"p"}})
	aTab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Routes: map[string]string{"p": bAddr}})
	done := postAsync(a, "p")
	poll.Until(t, waitTimeout, "the forwarded request held on pod b", func() bool { return findProgram(bTab, "p").HeldRequests == 1 })

	// The next round resumes it on pod a.
	aTab.Apply(&wire.Placement{Version: 2, Mode: "ProgramAware", Place: []string{"p"}, FullRoutes: true})
	bTab.Apply(&wire.Placement{Version: 2, Mode: "ProgramAware", Routes: map[string]string{"p": aAddr}})
	if r := waitResponse(t, done, "the held request"); r.status != 200 {
		t.Fatalf("after the move: %d %s", r.status, r.body)
	}
	if p := findProgram(aTab, "p"); !p.Placed || p.State != "ACTIVE" || p.Steps != 1 {
		t.Errorf("on pod a, where it was placed: %+v", p)
	}
	if p := findProgram(bTab, "p"); p.Placed || p.InFlight != 0 || p.HeldRequests != 0 {
		t.Errorf("on pod b, which it left: %+v", p)
	}
}

func TestReleaseEndpoint(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab})
	env.post("/v1/completions", gateBody, "X-Program-Id", "p")
	if r := env.post("/programs/release", `{}`); r.status != 400 {
		t.Errorf("release without an id: %d", r.status)
	}
	if r := env.post("/programs/release", `{"program_id":"p"}`); r.status != 200 || !strings.Contains(string(r.body), `"released":true`) {
		t.Errorf("release: %d %s", r.status, r.body)
	}
	if p := findProgram(tab, "p"); p.State != "TERMINATED" {
		t.Errorf("state %s", p.State)
	}
	if r := env.post("/programs/release", `{"program_id":"never"}`); r.status != 200 || !strings.Contains(string(r.body), `"released":false`) {
		t.Errorf("release of an unknown program: %d %s", r.status, r.body)
	}
}

// TestReleaseNamedByHeader: the release endpoint names its program as the
// generation endpoints do (X-Program-Id, else the body's program_id, else
// X-Session-ID), so a header alone, with no body, is enough.
func TestReleaseNamedByHeader(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		header   []string
		status   int
		released string // the program released; "" for none
		kept     string // a program that must still be active
	}{
		{name: "X-Program-Id, no body", header: []string{"X-Program-Id", "a"}, status: 200, released: "a", kept: "b"},
		{name: "X-Session-ID, no body", header: []string{"X-Session-ID", "a"}, status: 200, released: "a", kept: "b"},
		{name: "X-Program-Id, blank body", body: " \n", header: []string{"X-Program-Id", "a"}, status: 200, released: "a", kept: "b"},
		{name: "X-Program-Id wins over the body", body: `{"program_id":"b"}`, header: []string{"X-Program-Id", "a"}, status: 200, released: "a", kept: "b"},
		{name: "the body wins over X-Session-ID", body: `{"program_id":"b"}`, header: []string{"X-Session-ID", "a"}, status: 200, released: "b", kept: "a"},
		{name: "no body, no header", status: 400, kept: "a"},
		{name: "a header with a bad body", body: `{"program_id":`, header: []string{"X-Program-Id", "a"}, status: 400, kept: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := newTable("a:1", 8192)
			env := newEnv(t, envOpts{programs: tab})
			for _, id := range []string{"a", "b"} {
				if r := env.post("/v1/completions", gateBody, "X-Program-Id", id); r.status != 200 {
					t.Fatalf("step of %s: %d %s", id, r.status, r.body)
				}
			}
			r := env.post(routeRelease, tc.body, tc.header...)
			if r.status != tc.status {
				t.Fatalf("release: %d %s; want %d", r.status, r.body, tc.status)
			}
			if tc.released != "" {
				var rel struct {
					ProgramID string `json:"program_id"`
					Released  bool   `json:"released"`
				}
				decodeStrict(t, r.body, &rel)
				if rel.ProgramID != tc.released || !rel.Released {
					t.Errorf("release answered %s; want %s released", r.body, tc.released)
				}
				if p := findProgram(tab, tc.released); p.State != "TERMINATED" {
					t.Errorf("%s after the release: %s", tc.released, p.State)
				}
			}
			if p := findProgram(tab, tc.kept); p.State != "ACTIVE" {
				t.Errorf("%s after the release: %s; want ACTIVE", tc.kept, p.State)
			}
		})
	}
}

// A release sent to a pod that only routes the program (it runs on pod b)
// ends it on pod b too: the route is read before the local release
// forgets it.
func TestReleaseReachesThePodRunningTheProgram(t *testing.T) {
	b := newEnv(t, envOpts{programs: newTable("b", 8192), forwardKey: poolKey})
	bAddr := strings.TrimPrefix(b.ts.URL, "http://")
	tab := newTable("a:1", 8192)
	a := newEnv(t, envOpts{programs: tab, forwardKey: poolKey})
	tab.Apply(&wire.Placement{Version: 1, Routes: map[string]string{"moved": bAddr}})
	if r := a.post("/v1/completions", gateBody, "X-Program-Id", "moved"); r.status != 200 {
		t.Fatalf("forwarded step: %d %s", r.status, r.body)
	}
	if r := a.post("/programs/release", `{"program_id":"moved"}`); r.status != 200 || !strings.Contains(string(r.body), `"released":true`) {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	if p := findProgram(b.srv.cfg.Programs, "moved"); p.State != "TERMINATED" {
		t.Errorf("on pod b, where it runs, the released program is %s", p.State)
	}

	// Named by its header alone, with no body, it is released on pod b too.
	tab.Apply(&wire.Placement{Version: 2, Routes: map[string]string{"moved2": bAddr}})
	if r := a.post("/v1/completions", gateBody, "X-Program-Id", "moved2"); r.status != 200 {
		t.Fatalf("forwarded step: %d %s", r.status, r.body)
	}
	if r := a.post("/programs/release", "", "X-Program-Id", "moved2"); r.status != 200 || !strings.Contains(string(r.body), `"released":true`) {
		t.Fatalf("release by header: %d %s", r.status, r.body)
	}
	if p := findProgram(b.srv.cfg.Programs, "moved2"); p.State != "TERMINATED" {
		t.Errorf("on pod b, the program released by header is %s", p.State)
	}
}
