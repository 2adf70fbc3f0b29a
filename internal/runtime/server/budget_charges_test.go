package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// holdBudget claims all of env's budget but free bytes, as requests in
// flight would; the returned func gives it back.
func holdBudget(t *testing.T, env *testEnv, free int64) (release func()) {
	t.Helper()
	hold := env.srv.budget.Claim()
	if err := hold.Grow(env.srv.budget.Limit() - free); err != nil {
		t.Fatal(err)
	}
	return hold.Release
}

// wantMemoryBusy requires r to be the 503 with Retry-After of work the
// preprocessing budget cannot take now, naming param.
func wantMemoryBusy(t *testing.T, what string, r response, param string) {
	t.Helper()
	var e openai.ErrorResponse
	decodeStrict(t, r.body, &e)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" ||
		deref(e.Error.Code) != openai.CodeMemoryBusy || deref(e.Error.Param) != param {
		t.Fatalf("%s with the budget held elsewhere: %d %q %s, want 503 with Retry-After, code %s and param %s",
			what, r.status, r.header.Get("Retry-After"), r.body, openai.CodeMemoryBusy, param)
	}
}

// repeatingTemplate renders each message's content a thousand times: a
// small request whose rendering is large. It writes its tools with
// Hermes' markup.
const repeatingTemplate = `{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools> Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call>{% endif %}{% for m in messages %}<|{{ m.role }}|>{% for i in range(1000) %}{{ m.content }}{% endfor %}{% endfor %}<|assistant|>`

// TestPreprocessBudgetChargesTheRendering: a chat request whose body is
// small but whose rendering is large (a template loop, a large
// chat_template_kwargs or many tools decoded into template values) is
// charged for the rendering itself: with the pod's budget held by other
// requests it is refused with 503 naming messages, and once the budget is
// free the same request is rendered (and refused by the context, or
// answered). Every charge is given back.
func TestPreprocessBudgetChargesTheRendering(t *testing.T) {
	tmpl, err := model.NewJinjaTemplate(repeatingTemplate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	env, _ := newCPUEnvWith(t, envOpts{preprocessMemory: 64 << 20}, tmpl)
	var tools []string
	for i := range 200 {
		tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":"f%d","description":"%s","parameters":{"type":"object"}}}`, i, strings.Repeat("d", 200)))
	}
	for _, tc := range []struct {
		name, body string
		// then is the status once the budget is free.
		then int
	}{
		{"a template loop", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 1000) + `"}],"max_tokens":1}`, http.StatusBadRequest},
		{"chat_template_kwargs", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"chat_template_kwargs":{"big":[` + strings.Repeat("0,", 16<<10) + `0]}}`, http.StatusOK},
		{"tools", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"tools":[` + strings.Join(tools, ",") + `]}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.body) > 64<<10 {
				t.Fatalf("the body is %d bytes: the test wants a small one", len(tc.body))
			}
			// Room for the body's charge, not for the rendering's.
			release := holdBudget(t, env, 2<<20)
			wantMemoryBusy(t, tc.name, env.post("/v1/chat/completions", tc.body), "messages")
			wantMemoryBusy(t, tc.name+" at /tokenize", env.post("/tokenize", tc.body), "messages")
			release()
			if r := env.post("/v1/chat/completions", tc.body); r.status != tc.then {
				t.Fatalf("%s once the budget is free: %d %s, want %d", tc.name, r.status, r.body, tc.then)
			}
			waitBudgetFree(t, env)
		})
	}
	// A rendering that alone needs more than the whole budget (30 MB of
	// text) is a 400: waiting cannot make it fit.
	r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"`+strings.Repeat("x", 30000)+`"}],"max_tokens":1}`)
	var e openai.ErrorResponse
	decodeStrict(t, r.body, &e)
	if r.status != http.StatusBadRequest || deref(e.Error.Param) != "messages" || !strings.Contains(e.Error.Message, "whole budget") {
		t.Fatalf("a rendering over the whole budget: %d %s, want 400 naming messages and the budget", r.status, r.body)
	}
	waitBudgetFree(t, env)
}

// TestPreprocessBudgetChargesBadWords: bad_words are charged as they are
// tokenized and compiled, beyond their body's share: with the budget held
// elsewhere a request with 16 KiB of them is refused with 503 naming
// bad_words; once it is free the request runs, holding only its body's
// share and what the compiled words keep, and gives that back.
func TestPreprocessBudgetChargesBadWords(t *testing.T) {
	env, m := newCPUEnvWith(t, envOpts{preprocessMemory: 64 << 20})
	words := make([]string, 2000)
	var tokens int
	for i := range words {
		words[i] = fmt.Sprintf(`w%07d`, i)
		tokens += len(m.Tokenizer.Encode(words[i], false)) + len(m.Tokenizer.Encode(" "+words[i], false))
	}
	body := `{"prompt":"hello","max_tokens":2,"ignore_eos":true,"bad_words":["` + strings.Join(words, `","`) + `"]}`

	release := holdBudget(t, env, 1<<20) // over 10× the body, under its words' cost
	wantMemoryBusy(t, "bad_words", env.post("/v1/completions", body), "bad_words")
	release()

	done := postHeld(t, env, "/v1/completions", body)
	want := int64(bodyRetainedFactor*len(body) + compiledBadWordMemory*tokens)
	if got := env.srv.budget.InUse(); got != want {
		t.Errorf("a running request with bad_words holds %d bytes of the budget, want %d (its body's share and %d a compiled token)", got, want, compiledBadWordMemory)
	}
	env.gate.open()
	if r := <-done; r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	waitBudgetFree(t, env)
}

// TestPreprocessBudgetChargesStopStrings: each sequence of a request
// matches its stop strings with a matcher of its own, so 64 KiB of stop
// strings in 16 choices are charged 16 times: with the budget held
// elsewhere the request is refused with 503 naming stop, no sequence left
// behind; once it is free it runs.
func TestPreprocessBudgetChargesStopStrings(t *testing.T) {
	env, _ := newCPUEnvWith(t, envOpts{preprocessMemory: 64 << 20})
	stops := make([]string, 16)
	for i := range stops {
		stops[i] = fmt.Sprintf("%02d", i) + strings.Repeat("s", 4<<10-2)
	}
	body := `{"prompt":"hello","max_tokens":1,"n":16,"stop":["` + strings.Join(stops, `","`) + `"]}`
	if want := 16 * stopMemory(stops); want < 4<<20 {
		t.Fatalf("the stop strings cost %d bytes: the test wants more than the 4 MiB it leaves", want)
	}
	release := holdBudget(t, env, 4<<20)
	wantMemoryBusy(t, "16 choices with 64 KiB of stop strings", env.post("/v1/completions", body), "stop")
	release()
	if r := env.post("/v1/completions", body); r.status != http.StatusOK {
		t.Fatalf("once the budget is free: %d %s", r.status, r.body)
	}
	waitBudgetFree(t, env)
}
