package server

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// The tenancy rules on the Responses and Messages routes: what
// tenancy_test.go checks on the OpenAI routes.

// TestResponsesStoreIsScopedToKey: a stored response belongs to the API
// key that created it. Another key reading it (GET), continuing it
// (previous_response_id, item_reference) or deleting it (DELETE) gets the
// 404 of an id never stored, byte for byte, so it cannot learn that the id
// exists; the owner can do all four.
func TestResponsesStoreIsScopedToKey(t *testing.T) {
	env := newEnv(t, envOpts{keys: []string{"key-a", "key-b"}})
	asA, asB := []string{"Authorization", "Bearer key-a"}, []string{"x-api-key", "key-b"}
	resp, out := postResponse(t, env, `{"input":"hi","max_output_tokens":2}`, asA...)
	itemID, _ := out[0]["id"].(string)
	if itemID == "" {
		t.Fatalf("output item without an id: %v", out)
	}
	uses := []struct {
		name string
		do   func(hdr []string) response
	}{
		{"GET", func(hdr []string) response { return env.do(http.MethodGet, "/v1/responses/"+resp.ID, "", hdr...) }},
		{"previous_response_id", func(hdr []string) response {
			return env.post("/v1/responses", `{"previous_response_id":"`+resp.ID+`","input":"more","max_output_tokens":2,"store":false}`, hdr...)
		}},
		{"item_reference", func(hdr []string) response {
			return env.post("/v1/responses", `{"input":[{"type":"item_reference","id":"`+itemID+`"}],"max_output_tokens":2,"store":false}`, hdr...)
		}},
		{"DELETE", func(hdr []string) response { return env.do(http.MethodDelete, "/v1/responses/"+resp.ID, "", hdr...) }},
	}
	byB := make([]response, len(uses))
	for i, u := range uses {
		byB[i] = u.do(asB)
	}
	for _, u := range uses { // DELETE last: A's response was there for each
		if r := u.do(asA); r.status != http.StatusOK {
			t.Errorf("A's %s: %d %s", u.name, r.status, r.body)
		}
	}
	// Deleted by A: now unknown to every key.
	for i, u := range uses {
		never := u.do(asB)
		if never.status != http.StatusNotFound {
			t.Fatalf("B's %s of a deleted response: %d %s", u.name, never.status, never.body)
		}
		if byB[i].status != never.status || string(byB[i].body) != string(never.body) {
			t.Errorf("B's %s of A's response: %d %s; of an unknown one: %d %s", u.name, byB[i].status, byB[i].body, never.status, never.body)
		}
	}
}

// TestResponsesStoreKeyCannotEvictAnothersShare: the store's bounds are
// shared, but a key flooding it with cheap requests evicts its own
// responses, not those of a key holding fewer.
func TestResponsesStoreKeyCannotEvictAnothersShare(t *testing.T) {
	env := newEnv(t, envOpts{keys: []string{"key-a", "key-b"}, responsesStoreEntries: 5})
	asA, asB := []string{"Authorization", "Bearer key-a"}, []string{"Authorization", "Bearer key-b"}
	a, _ := postResponse(t, env, `{"input":"key-a turn","max_output_tokens":2}`, asA...)
	var bIDs []string
	for range 8 {
		b, _ := postResponse(t, env, `{"input":"x","max_output_tokens":1}`, asB...)
		bIDs = append(bIDs, b.ID)
	}
	if r := env.do(http.MethodGet, "/v1/responses/"+a.ID, "", asA...); r.status != http.StatusOK {
		t.Errorf("key-a's response after key-b's flood: %d %s", r.status, r.body)
	}
	if r := env.post("/v1/responses", `{"previous_response_id":"`+a.ID+`","input":"more","max_output_tokens":2,"store":false}`, asA...); r.status != http.StatusOK {
		t.Errorf("continuing key-a's response after key-b's flood: %d %s", r.status, r.body)
	}
	// key-b evicted its own oldest and kept its newest four.
	for i, id := range bIDs {
		want := http.StatusNotFound
		if i >= len(bIDs)-4 {
			want = http.StatusOK
		}
		if r := env.do(http.MethodGet, "/v1/responses/"+id, "", asB...); r.status != want {
			t.Errorf("key-b's response %d: %d; want %d", i, r.status, want)
		}
	}
}

// jsonNumber is the number at a path of object keys in v.
func jsonNumber(v any, path ...string) (float64, bool) {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		v, ok = m[k]
		if !ok {
			return 0, false
		}
	}
	n, ok := v.(float64)
	return n, ok
}

// agentUsageReadings are the cache reads that a Responses and a Messages
// reply (whole and streamed) report for prompt, and the prompt tokens
// Messages reports (input_tokens plus cache_read_input_tokens). A count
// absent from a reply fails the test: the official clients read these
// fields.
func agentUsageReadings(t *testing.T, env *testEnv, prompt string) (cached map[string]int, messagesPrompt []int) {
	t.Helper()
	cached = map[string]int{}
	read := func(name string, v any, path ...string) int {
		t.Helper()
		n, ok := jsonNumber(v, path...)
		if !ok {
			t.Fatalf("%s: no %s in %v", name, strings.Join(path, "."), v)
		}
		cached[name] = int(n)
		return int(n)
	}
	var m map[string]any
	r := env.post("/v1/responses", `{"input":"`+prompt+`","max_output_tokens":1}`)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &m) != nil {
		t.Fatalf("responses: %d %s", r.status, r.body)
	}
	read("responses", m, "usage", "input_tokens_details", "cached_tokens")
	evs := env.namedEvents("/v1/responses", `{"input":"`+prompt+`","max_output_tokens":1,"stream":true}`)
	read("responses stream", evs[len(evs)-1].data, "response", "usage", "input_tokens_details", "cached_tokens")

	r = env.post("/v1/messages", `{"messages":[{"role":"user","content":"`+prompt+`"}],"max_tokens":1}`)
	m = nil
	if r.status != http.StatusOK || json.Unmarshal(r.body, &m) != nil {
		t.Fatalf("messages: %d %s", r.status, r.body)
	}
	in, _ := jsonNumber(m, "usage", "input_tokens")
	messagesPrompt = append(messagesPrompt, int(in)+read("messages", m, "usage", "cache_read_input_tokens"))
	evs = env.namedEvents("/v1/messages", `{"messages":[{"role":"user","content":"`+prompt+`"}],"max_tokens":1,"stream":true}`)
	delta := evs[len(evs)-2].data
	in, _ = jsonNumber(delta, "usage", "input_tokens")
	messagesPrompt = append(messagesPrompt, int(in)+read("messages stream", delta, "usage", "cache_read_input_tokens"))
	return cached, messagesPrompt
}

// TestAgentAPIsCachedTokensNeedTheFlag: /v1/responses and /v1/messages
// report prefix-cache hits only with Config.PromptTokensDetails, as chat
// does; without it the fields are there (the official clients expect
// them) and 0, and Messages counts every prompt token as input_tokens.
func TestAgentAPIsCachedTokensNeedTheFlag(t *testing.T) {
	prompt := strings.Repeat("the secret system prompt of tenant a ", 10)
	for _, details := range []bool{false, true} {
		env := newEnv(t, envOpts{promptTokensDetails: details})
		// The first request caches the prompt; every reading after it hits.
		agentUsageReadings(t, env, prompt)
		cached, prompts := agentUsageReadings(t, env, prompt)
		for name, n := range cached {
			if (n > 0) != details {
				t.Errorf("details %t: %s reports %d cached tokens", details, name, n)
			}
		}
		chat := chatPromptTokens(t, env, `{"messages":[{"role":"user","content":"`+prompt+`"}],"max_tokens":1}`)
		for _, p := range prompts {
			if p != chat {
				t.Errorf("details %t: Messages reports %d prompt tokens; the chat request has %d", details, p, chat)
			}
		}
	}
}

// TestAgentAPIsHonourCacheSalt: cache_salt keeps prefix hits apart on
// /v1/responses and /v1/messages as on chat (it is part of the chat
// request they translate into), and an empty one is a 400 naming it.
func TestAgentAPIsHonourCacheSalt(t *testing.T) {
	env := newEnv(t, envOpts{promptTokensDetails: true})
	for _, api := range []struct {
		path, body string
		cached     []string
	}{
		{"/v1/responses", `{"input":"%s","max_output_tokens":1%s}`, []string{"usage", "input_tokens_details", "cached_tokens"}},
		{"/v1/messages", `{"messages":[{"role":"user","content":"%s"}],"max_tokens":1%s}`, []string{"usage", "cache_read_input_tokens"}},
	} {
		prompt := strings.Repeat("the secret prompt of "+api.path+" ", 8)
		body := func(salt string) string {
			return strings.Replace(strings.Replace(api.body, "%s", prompt, 1), "%s", salt, 1)
		}
		for _, step := range saltSteps {
			r := env.post(api.path, body(step.salt))
			var m map[string]any
			if r.status != http.StatusOK || json.Unmarshal(r.body, &m) != nil {
				t.Fatalf("%s %s: %d %s", api.path, step.name, r.status, r.body)
			}
			if n, ok := jsonNumber(m, api.cached...); !ok || (n > 0) != step.hit {
				t.Errorf("%s %s: %v cached tokens; want a hit: %t", api.path, step.name, n, step.hit)
			}
		}
		r := env.post(api.path, body(`,"cache_salt":""`))
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "cache_salt") {
			t.Errorf("%s with an empty cache_salt: %d %s; want 400 naming cache_salt", api.path, r.status, r.body)
		}
	}
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestAnthropicRoutesErrorsBeforeTheHandler: what the server answers on
// the Messages paths before their handler runs (no or a wrong key, a
// wrong method, an unknown path under /v1/messages) is in Anthropic's
// shape too; the 401 closes the connection without reading the body.
// The OpenAI routes keep OpenAI's shape.
func TestAnthropicRoutesErrorsBeforeTheHandler(t *testing.T) {
	env := newEnv(t, envOpts{keys: []string{"k1"}})
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		status             int
		typ                string
	}{
		{"no key", http.MethodPost, "/v1/messages", nil, http.StatusUnauthorized, "authentication_error"},
		{"wrong x-api-key", http.MethodPost, "/v1/messages", []string{"x-api-key", "nope"}, http.StatusUnauthorized, "authentication_error"},
		{"wrong bearer", http.MethodPost, "/v1/messages/", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized, "authentication_error"},
		{"count_tokens without key", http.MethodPost, "/v1/messages/count_tokens", nil, http.StatusUnauthorized, "authentication_error"},
		{"GET", http.MethodGet, "/v1/messages", []string{"x-api-key", "k1"}, http.StatusMethodNotAllowed, "invalid_request_error"},
		{"GET count_tokens without key", http.MethodGet, "/v1/messages/count_tokens", nil, http.StatusMethodNotAllowed, "invalid_request_error"},
		{"unknown path", http.MethodPost, "/v1/messages/batches", []string{"x-api-key", "k1"}, http.StatusNotFound, "not_found_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := env.do(tc.method, tc.path, body, tc.hdr...)
			var e anthropicError
			if err := json.Unmarshal(r.body, &e); err != nil || r.status != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" {
				t.Errorf("%d %s; want %d %s in Anthropic's shape", r.status, r.body, tc.status, tc.typ)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			if tc.status == http.StatusMethodNotAllowed && r.header.Get("Allow") != "POST" {
				t.Errorf("Allow %q", r.header.Get("Allow"))
			}
		})
	}
	// The OpenAI routes are unchanged.
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		r := env.post(path, `{}`)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if json.Unmarshal(r.body, &e) != nil || r.status != http.StatusUnauthorized || e.Type != "" || e.Error.Type == "" {
			t.Errorf("%s without key: %d %s; want OpenAI's shape", path, r.status, r.body)
		}
	}

	// A 401 comes before the body: a client that announced a body and
	// never sends it is answered at once, and the connection closes.
	conn, err := net.Dial("tcp", env.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: nope\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	defer resp.Body.Close()
	var e anthropicError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusUnauthorized || e.Error.Type != "authentication_error" {
		t.Errorf("%d %+v (%v); want 401 authentication_error", resp.StatusCode, e, err)
	}
	if !resp.Close {
		t.Errorf("401 keeps the connection open (header %v)", resp.Header)
	}
}

// TestAgentAPIsProgramLimit: a key at its limit of live programs gets 429
// with Retry-After on /v1/messages (Anthropic's rate_limit_error) and on
// /v1/responses (OpenAI's shape, naming program_id), streamed requests
// too.
func TestAgentAPIsProgramLimit(t *testing.T) {
	tab := programs.New(programs.Config{Pod: "a:1", Addr: "a:1", Logger: quiet, MaxProgramsPerOwner: 1,
		KV: func() wire.KVReport { return wire.KVReport{BlockSize: 16, TotalBlocks: 512} }})
	env := newEnv(t, envOpts{programs: tab, keys: []string{"key-a"}})
	asA := []string{"x-api-key", "key-a"}
	messages := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2`
	responses := `{"input":"hi","max_output_tokens":2`
	if r := env.post("/v1/messages", messages+`}`, append([]string{"X-Program-Id", "p1"}, asA...)...); r.status != http.StatusOK {
		t.Fatalf("A's first program: %d %s", r.status, r.body)
	}
	for _, stream := range []string{`}`, `,"stream":true}`} {
		r := env.post("/v1/messages", messages+stream, append([]string{"X-Program-Id", "p2"}, asA...)...)
		var e anthropicError
		if json.Unmarshal(r.body, &e) != nil || r.status != http.StatusTooManyRequests || e.Type != "error" || e.Error.Type != "rate_limit_error" ||
			!strings.Contains(e.Error.Message, "limit") {
			t.Errorf("messages%s over the limit: %d %s; want 429 rate_limit_error", stream, r.status, r.body)
		}
		if ra := r.header.Get("Retry-After"); ra == "" || ra == "1" {
			t.Errorf("messages%s: Retry-After %q; want the time until p1 idles out", stream, ra)
		}

		r = env.post("/v1/responses", responses+stream, append([]string{"X-Program-Id", "p2"}, asA...)...)
		if ra := r.header.Get("Retry-After"); ra == "" || ra == "1" {
			t.Errorf("responses%s: Retry-After %q; want the time until p1 idles out", stream, ra)
		}
		wantError(t, r, http.StatusTooManyRequests, "program_id")
	}
}
