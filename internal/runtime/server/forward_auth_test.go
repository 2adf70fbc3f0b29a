package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

const poolKey = "pool-control-token"

// A paused program's request is held whatever X-Kvpilot-Forwarded value a
// client sends with it: only a value signed with the pool's key, as pods
// forward, is taken as forwarded, and only once, for the request it was
// signed for (pod, method, path, program and body), within its time window.
// Program p is paused with its cache on this pod, r paused on another pod:
// what another pod of the pool sends runs (for r, a program the sender has
// just resumed on this pod: this pod's view is a round behind).
func TestClientCannotSkipAPauseWithTheForwardedHeader(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab, forwardKey: poolKey})
	env.post("/v1/completions", gateBody, "X-Program-Id", "p")
	tab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Pause: []string{"p"}, Routes: map[string]string{"r": ""}})

	self := env.ts.Listener.Addr().String()
	sign := func(key, method, uri, pid, body string, at time.Time) string {
		return forwardSignature([]byte(key), at, self, method, uri, pid, []byte(body))
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
			"sent to another pod": forwardSignature([]byte(poolKey), now, "b:1", "POST", "/v1/completions", id, []byte(gateBody)),
			"unversioned":         strings.TrimPrefix(sign(poolKey, "POST", "/v1/completions", id, gateBody, now), forwardVersion+"."),
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
			poll.Until(t, waitTimeout, "a departed client's request let go", func() bool { return findProgram(tab, id).HeldRequests == 0 })
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
	req.Header.Set(HeaderForwarded, forwardSignature(nil, time.Now(), env.ts.Listener.Addr().String(), "POST", "/v1/completions", "p", []byte(gateBody)))
	if resp, err := env.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("ran (%d) on a pod without a forward key", resp.StatusCode)
	}
}

// A value signed for the pod at one address verifies there and not on a
// pod at another, nor on a pod that does not know its own address; one
// of the format before the target was signed (a pod of the previous
// version) verifies nowhere.
func TestForwardSignatureNamesTheTargetPod(t *testing.T) {
	pod := func(addr string) *Server {
		return &Server{cfg: Config{ForwardKey: []byte(poolKey), AdvertiseAddr: addr}, clk: clock.Real{},
			nonces: newNonceCache(16), log: quiet}
	}
	verify := func(s *Server, value string) bool {
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(gateBody))
		r.Header.Set(HeaderForwarded, value)
		return s.verifyForwarded(takeForwarded(r), "p", []byte(gateBody))
	}
	sign := func(target string) string {
		return forwardSignature([]byte(poolKey), time.Now(), target, "POST", "/v1/completions", "p", []byte(gateBody))
	}
	// v2: "<unix seconds>.<nonce>.<mac>", the mac over no target.
	v2 := func() string {
		ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), strings.Repeat("ab", 16)
		m := hmac.New(sha256.New, []byte(poolKey))
		for _, part := range []string{"kvpilot-forward-v2", ts, nonce, "POST", "/v1/completions", "p"} {
			m.Write([]byte(part))
			m.Write([]byte{0})
		}
		sum := sha256.Sum256([]byte(gateBody))
		m.Write(sum[:])
		return ts + "." + nonce + "." + hex.EncodeToString(m.Sum(nil))
	}
	for _, tc := range []struct {
		name  string
		value string
		on    string
		want  bool
	}{
		{"signed for a, on a", sign("10.0.0.1:8000"), "10.0.0.1:8000", true},
		{"signed for a, on b", sign("10.0.0.1:8000"), "10.0.0.2:8000", false},
		{"signed for a, on a pod with no address", sign("10.0.0.1:8000"), "", false},
		{"signed for no pod, on a pod with no address", sign(""), "", false},
		{"the previous format, on a", v2(), "10.0.0.1:8000", false},
	} {
		if got := verify(pod(tc.on), tc.value); got != tc.want {
			t.Errorf("%s: verified %t, want %t", tc.name, got, tc.want)
		}
	}
	// The same value, sent to a and replayed to b: it verifies on a only.
	v := sign("10.0.0.1:8000")
	a, b := pod("10.0.0.1:8000"), pod("10.0.0.2:8000")
	if !verify(a, v) || verify(b, v) || verify(a, v) {
		t.Error("a value signed for pod a must verify once on a and never on b")
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

// A forwarded request's header, taken on its way to pod a (from pod c,
// which routes program p there), and replayed to pod b, where p is paused
// (on another pod, as pod b sees it), is not a forwarded request there: it
// was signed for pod a. Pod b holds it like any request of a paused
// program; p stays paused there, so later plain requests are held too.
func TestForwardedHeaderReplayedOnAnotherPodIsHeld(t *testing.T) {
	captured := make(chan http.Header, 1)
	aTab, bTab, cTab := newTable("a:1", 8192), newTable("b:1", 8192), newTable("c:1", 8192)
	a := newEnv(t, envOpts{programs: aTab, forwardKey: poolKey, wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(HeaderForwarded) != "" {
				select {
				case captured <- r.Header.Clone():
				default:
				}
			}
			h.ServeHTTP(w, r)
		})
	}})
	b := newEnv(t, envOpts{programs: bTab, forwardKey: poolKey})
	c := newEnv(t, envOpts{programs: cTab, forwardKey: poolKey})
	aAddr := strings.TrimPrefix(a.ts.URL, "http://")
	bTab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Routes: map[string]string{"p": ""}})
	cTab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Routes: map[string]string{"p": aAddr}})
	if r := c.post("/v1/completions", gateBody, "X-Program-Id", "p"); r.status != 200 || r.header.Get("X-Kvpilot-Served-By") != aAddr {
		t.Fatalf("forwarded from pod c to pod a: %d served by %q: %s", r.status, r.header.Get("X-Kvpilot-Served-By"), r.body)
	}
	var h http.Header
	select {
	case h = <-captured:
	default:
		t.Fatal("pod a saw no forwarded request")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.ts.URL+"/v1/completions", strings.NewReader(gateBody))
	req.Header = h
	if resp, err := b.client.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a header signed for pod a, replayed to pod b, ran program p paused there (%d); it must be held", resp.StatusCode)
	}
	poll.Until(t, waitTimeout, "the replayed request let go on pod b", func() bool { return findProgram(bTab, "p").HeldRequests == 0 })
	if p := findProgram(bTab, "p"); p.Steps != 0 || p.Placed || p.State != "PAUSED" {
		t.Errorf("on pod b after the replay: %+v", p)
	}
}
