package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// TestKeysCannotSeeReleaseOrJoinEachOthersPrograms: with API keys, a
// program id names a program of the key that sent it. Key B naming A's
// program id gets a program of its own: it cannot release A's (nor learn
// that it exists), is not held by A's pause, and leaves A's context alone.
func TestKeysCannotSeeReleaseOrJoinEachOthersPrograms(t *testing.T) {
	tab := newTable("a:1", 8192)
	env := newEnv(t, envOpts{programs: tab, keys: []string{"key-a", "key-b"}, forwardKey: poolKey})
	ownerA := programs.OwnerOf("key-a", []byte(poolKey))
	idA := ownerA.Scope("p")
	asA, asB := []string{"Authorization", "Bearer key-a"}, []string{"Authorization", "Bearer key-b"}

	if r := env.post("/v1/completions", gateBody, append([]string{"X-Program-Id", "p"}, asA...)...); r.status != 200 {
		t.Fatalf("A: %d %s", r.status, r.body)
	}
	if p := findProgram(tab, idA); p.Steps != 1 || !p.Placed {
		t.Fatalf("A's program: %+v", p)
	}
	if p := findProgram(tab, "p"); p.ID != "" {
		t.Fatalf("an unscoped program p exists: %+v", p)
	}

	// B cannot release it: to B, p is unknown.
	r := env.post(routeRelease, `{"program_id":"p"}`, asB...)
	var rel struct {
		ProgramID string `json:"program_id"`
		Released  bool   `json:"released"`
	}
	if err := json.Unmarshal(r.body, &rel); err != nil || r.status != 200 || rel.Released || rel.ProgramID != "p" {
		t.Fatalf("B releasing p: %d %s", r.status, r.body)
	}
	if p := findProgram(tab, idA); p.State != "ACTIVE" {
		t.Fatalf("A's program after B's release: %+v", p)
	}

	// A's program paused: B's request naming p runs at once (its own
	// program); A's is held.
	tab.Apply(&wire.Placement{Version: 1, Mode: "ProgramAware", Pause: []string{idA}})
	if r := env.post("/v1/completions", gateBody, append([]string{"X-Program-Id", "p"}, asB...)...); r.status != 200 {
		t.Fatalf("B's p while A's p is paused: %d %s", r.status, r.body)
	}
	if p := findProgram(tab, programs.OwnerOf("key-b", []byte(poolKey)).Scope("p")); p.Steps != 1 {
		t.Errorf("B's program: %+v", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.ts.URL+"/v1/completions", strings.NewReader(gateBody))
	req.Header.Set("X-Program-Id", "p")
	req.Header.Set("x-api-key", "key-a") // Anthropic's header names the same key
	if resp, err := env.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("A's request for its paused program ran (%d)", resp.StatusCode)
	}
	if p := findProgram(tab, idA); p.Steps != 1 || p.ContextTokens != 9 || p.State != "PAUSED" {
		t.Errorf("A's program after B's requests: %+v", p)
	}

	// A releases its own.
	r = env.post(routeRelease, `{"program_id":"p"}`, asA...)
	if err := json.Unmarshal(r.body, &rel); err != nil || !rel.Released {
		t.Fatalf("A releasing p: %d %s", r.status, r.body)
	}
}

// TestProgramLimitPerKeyIs429: a key at its limit of live programs is
// refused a new one with 429, Retry-After and the error naming
// program_id; its existing programs and other keys go on.
func TestProgramLimitPerKeyIs429(t *testing.T) {
	tab := programs.New(programs.Config{Pod: "a:1", Addr: "a:1", Logger: quiet, MaxProgramsPerOwner: 1,
		KV: func() wire.KVReport { return wire.KVReport{BlockSize: 16, TotalBlocks: 512} }})
	env := newEnv(t, envOpts{programs: tab, keys: []string{"key-a", "key-b"}})
	asA, asB := []string{"Authorization", "Bearer key-a"}, []string{"Authorization", "Bearer key-b"}
	if r := env.post("/v1/completions", gateBody, append([]string{"X-Program-Id", "p1"}, asA...)...); r.status != 200 {
		t.Fatalf("A's first program: %d %s", r.status, r.body)
	}
	r := env.post("/v1/completions", gateBody, append([]string{"X-Program-Id", "p2"}, asA...)...)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), `"param":"program_id"`) {
		t.Fatalf("A's second program: %d %v %s; want 429 with Retry-After naming program_id", r.status, r.header, r.body)
	}
	if ra := r.header.Get("Retry-After"); ra == "1" {
		t.Errorf("Retry-After %s: want the time until p1 idles out", ra)
	}
	for _, tc := range []struct {
		name string
		hdr  []string
	}{
		{"A's existing program", append([]string{"X-Program-Id", "p1"}, asA...)},
		{"B's first program", append([]string{"X-Program-Id", "p2"}, asB...)},
		{"A's request of no program", asA},
	} {
		if r := env.post("/v1/completions", gateBody, tc.hdr...); r.status != 200 {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
}

// TestCacheSaltIsolatesPrefixHits: a prompt cached under one cache_salt is
// a prefix hit for that salt only, and cached_tokens is reported only
// when the pod enables it.
func TestCacheSaltIsolatesPrefixHits(t *testing.T) {
	env := newEnv(t, envOpts{promptTokensDetails: true})
	prompt := strings.Repeat("the secret system prompt of tenant a ", 10)
	cached := func(salt string) int {
		t.Helper()
		body := `{"prompt":"` + prompt + `","max_tokens":1` + salt + `}`
		r := env.post("/v1/completions", body)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		var c struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(r.body, &c); err != nil || c.Usage.PromptTokensDetails == nil {
			t.Fatalf("usage without cached tokens: %s", r.body)
		}
		if c.Usage.PromptTokens < 33 {
			t.Fatalf("prompt of %d tokens: want at least two full blocks", c.Usage.PromptTokens)
		}
		return c.Usage.PromptTokensDetails.CachedTokens
	}
	for _, step := range saltSteps {
		if got := cached(step.salt); (got > 0) != step.hit {
			t.Errorf("%s: %d cached tokens; want a hit: %t", step.name, got, step.hit)
		}
	}
}

// TestPrefixCacheIsolatedByKey (issue 34, item 6): with API keys, a
// prompt key A cached is no prefix hit for key B (nor its timing), while
// A's own repeat hits and B's own repeat hits; a pod that shares across
// keys (--share-prefix-cache-across-keys) gives B the hit.
func TestPrefixCacheIsolatedByKey(t *testing.T) {
	prompt := strings.Repeat("the secret system prompt of tenant a ", 10)
	body := `{"prompt":"` + prompt + `","max_tokens":1}`
	for _, share := range []bool{false, true} {
		env := newEnv(t, envOpts{promptTokensDetails: true, keys: []string{"key-a", "key-b"}, forwardKey: poolKey, sharePrefixCache: share})
		cached := func(key string) int {
			t.Helper()
			r := env.post("/v1/completions", body, "Authorization", "Bearer "+key)
			if r.status != 200 {
				t.Fatalf("%s: %d %s", key, r.status, r.body)
			}
			var c struct {
				Usage struct {
					PromptTokensDetails struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(r.body, &c); err != nil {
				t.Fatal(err)
			}
			return c.Usage.PromptTokensDetails.CachedTokens
		}
		steps := []struct {
			key string
			hit bool
		}{{"key-a", false}, {"key-a", true}, {"key-b", share}, {"key-b", true}}
		for i, st := range steps {
			if got := cached(st.key); (got > 0) != st.hit {
				t.Errorf("shared across keys %t, step %d (%s): %d cached tokens; want a hit: %t", share, i, st.key, got, st.hit)
			}
		}
	}
}

// saltSteps are requests of one prompt, in order, with the cache_salt
// field each adds to its body and whether it must be a prefix hit.
var saltSteps = []struct {
	name, salt string
	hit        bool
}{
	{"first under a", `,"cache_salt":"a"`, false},
	{"again under a", `,"cache_salt":"a"`, true},
	{"under b", `,"cache_salt":"b"`, false},
	{"unsalted", ``, false},
	{"unsalted again", ``, true},
}

func TestCachedTokensOffByDefault(t *testing.T) {
	env := newEnv(t, envOpts{})
	body := `{"prompt":"` + strings.Repeat("a shared prompt ", 8) + `","max_tokens":1}`
	for range 2 {
		if r := env.post("/v1/completions", body); r.status != 200 || strings.Contains(string(r.body), "cached_tokens") {
			t.Fatalf("%d %s: want no cached_tokens", r.status, r.body)
		}
	}
	events := env.streamRequest("/v1/completions", `{"prompt":"x","max_tokens":1,"stream":true,"stream_options":{"include_usage":true}}`)
	for _, ev := range events {
		if strings.Contains(ev, "cached_tokens") {
			t.Fatalf("streamed usage %s: want no cached_tokens", ev)
		}
	}
}

// TestForwardedRequestKeepsItsOwner: a program of key A placed on pod b is
// forwarded there from pod a and runs as A's program on b (b derives the
// same owner from the key the request carries, and the signature binds
// it); key B's request naming the same id is B's own program on pod a.
func TestForwardedRequestKeepsItsOwner(t *testing.T) {
	keys := []string{"key-a", "key-b"}
	bTab := newTable("b", 8192)
	b := newEnv(t, envOpts{programs: bTab, keys: keys, forwardKey: poolKey})
	bAddr := strings.TrimPrefix(b.ts.URL, "http://")
	aTab := newTable("a:1", 8192)
	a := newEnv(t, envOpts{programs: aTab, keys: keys, forwardKey: poolKey})
	idA := programs.OwnerOf("key-a", []byte(poolKey)).Scope("p")
	idB := programs.OwnerOf("key-b", []byte(poolKey)).Scope("p")
	aTab.Apply(&wire.Placement{Version: 1, Routes: map[string]string{idA: bAddr}})

	for _, hdr := range [][]string{{"Authorization", "Bearer key-a"}, {"x-api-key", "key-a"}} {
		r := a.post("/v1/completions", gateBody, append([]string{"X-Program-Id", "p"}, hdr...)...)
		if r.status != 200 || r.header.Get("X-Kvpilot-Served-By") != bAddr {
			t.Fatalf("A's request (%s): %d served by %q: %s", hdr[0], r.status, r.header.Get("X-Kvpilot-Served-By"), r.body)
		}
	}
	if p := findProgram(bTab, idA); p.Steps != 2 || !p.Placed {
		t.Errorf("A's program on pod b: %+v", p)
	}
	r := a.post("/v1/completions", gateBody, "X-Program-Id", "p", "Authorization", "Bearer key-b")
	if r.status != 200 || r.header.Get("X-Kvpilot-Served-By") != "" {
		t.Fatalf("B's request: %d served by %q: %s", r.status, r.header.Get("X-Kvpilot-Served-By"), r.body)
	}
	if p := findProgram(aTab, idB); p.Steps != 1 {
		t.Errorf("B's program on pod a: %+v", p)
	}
	if p := findProgram(bTab, idB); p.ID != "" {
		t.Errorf("B's program reached pod b: %+v", p)
	}
}
