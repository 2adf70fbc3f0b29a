package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
	"github.com/kvpilot/kvpilot/internal/util/testing/jsonschema"
)

// structuredSchemas exercise nested objects, arrays, enums and required
// fields.
var structuredSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer"},"member":{"type":"boolean"}},"required":["name","age"]}`,
	`{"type":"object","properties":{"order":{"type":"object","properties":{"id":{"type":"integer"},"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string","maxLength":6},"qty":{"type":"integer"}},"required":["sku","qty"]},"minItems":1,"maxItems":3}},"required":["id","items"]}},"required":["order"]}`,
	`{"type":"object","properties":{"color":{"enum":["red","green","blue"]},"size":{"type":"string","enum":["S","M","L"]},"price":{"type":["number","null"]}},"required":["color","size","price"],"additionalProperties":false}`,
	`{"type":"array","items":{"anyOf":[{"type":"integer"},{"const":"none"}]},"minItems":2,"maxItems":4}`,
}

// TestStructuredOutputsValidateOnNoise: the built-in model's weights are
// random, so its preferences are noise; constrained decoding must still make
// every output parse and validate, whole and streamed.
func TestStructuredOutputsValidateOnNoise(t *testing.T) {
	env, _ := newCPUEnv(t)
	for i, schema := range structuredSchemas {
		for seed := range 2 {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"give me JSON"}],"max_tokens":400,"temperature":1,"seed":%d,
				"response_format":{"type":"json_schema","json_schema":{"name":"s%d","schema":%s,"strict":true}}}`, seed, i, schema)
			r := env.post("/v1/chat/completions", body)
			if r.status != http.StatusOK {
				t.Fatalf("schema %d: status %d: %s", i, r.status, r.body)
			}
			var resp openai.ChatResponse
			decodeStrict(t, r.body, &resp)
			out := resp.Choices[0].Message.Content
			if err := jsonschema.Validate([]byte(schema), []byte(out)); err != nil {
				t.Errorf("schema %d seed %d: %q: %v", i, seed, out, err)
			}
			if fr := *resp.Choices[0].FinishReason; fr != "stop" {
				t.Errorf("schema %d: finish_reason %q", i, fr)
			}
		}
		// Streamed, through vLLM's guided_json spelling.
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"JSON"}],"max_tokens":400,"seed":7,"stream":true,"guided_json":%s}`, schema)
		var b strings.Builder
		for _, ev := range env.streamRequest("/v1/chat/completions", body) {
			if ev == "[DONE]" {
				continue
			}
			var c openai.ChatChunk
			decodeStrict(t, []byte(ev), &c)
			if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
				b.WriteString(*c.Choices[0].Delta.Content)
			}
		}
		if err := jsonschema.Validate([]byte(schema), []byte(b.String())); err != nil {
			t.Errorf("schema %d streamed: %q: %v", i, b.String(), err)
		}
	}
}

func TestStructuredOutputsOtherKinds(t *testing.T) {
	env, _ := newCPUEnv(t)
	complete := func(extra string) string {
		t.Helper()
		r := env.post("/v1/completions", `{"prompt":"x","max_tokens":200,"seed":3,`+extra+`}`)
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", extra, r.status, r.body)
		}
		var resp openai.CompletionResponse
		decodeStrict(t, r.body, &resp)
		return resp.Choices[0].Text
	}
	if out := complete(`"guided_regex":"[A-Z]{2}-[0-9]{3}"`); !regexp.MustCompile(`^[A-Z]{2}-[0-9]{3}$`).MatchString(out) {
		t.Errorf("guided_regex: %q", out)
	}
	choices := []string{"alpha", "beta", "gamma delta"}
	if out := complete(`"guided_choice":["alpha","beta","gamma delta"]`); !slices.Contains(choices, out) {
		t.Errorf("guided_choice: %q", out)
	}
	if out := complete(`"structured_outputs":{"choice":["yes","no"]}`); out != "yes" && out != "no" {
		t.Errorf("structured_outputs.choice: %q", out)
	}
	out := complete(`"response_format":{"type":"json_object"}`)
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Errorf("json_object: %q: %v", out, err)
	}
}

func TestStructuredOutputsRefusals(t *testing.T) {
	env, _ := newCPUEnv(t)
	for _, tc := range []struct{ extra, param, mention string }{
		{`"response_format":{"type":"bogus"}`, "response_format.type", "bogus"},
		{`"response_format":{"type":"json_schema"}`, "response_format.json_schema", "schema"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"array","uniqueItems":true}}}`, "response_format.json_schema.schema", "uniqueItems"},
		{`"guided_json":{"type":"object","patternProperties":{}}`, "guided_json", "patternProperties"},
		{`"guided_regex":"\\bword"`, "guided_regex", "word boundaries"},
		{`"guided_grammar":"?start: \"a\""`, "guided_grammar", "Lark"},
		{`"guided_grammar":"root ::= (\"a\""`, "guided_grammar", "expected )"},
		{`"guided_choice":[]`, "guided_choice", "at least one"},
		{`"guided_regex":"a","guided_choice":["a"]`, "guided_choice", "both"},
		{`"structured_outputs":{"choice":[]}`, "structured_outputs.choice", "at least one"},
		{`"structured_outputs":{"json":{"type":"string","format":"color"}}`, "structured_outputs.json", "format"},
		{`"structured_outputs":{"grammar":"start: \"a\"\n%import common.WS"}`, "structured_outputs.grammar", "Lark"},
		{`"structured_outputs":{"grammar":"root ::= a\na ::= a \"x\" | \"y\""}`, "structured_outputs.grammar", "left-recursive"},
	} {
		r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],`+tc.extra+`}`)
		var e openai.ErrorResponse
		decodeStrict(t, r.body, &e)
		if r.status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.mention) {
			t.Errorf("%s: status %d %s, want 400 naming %s and mentioning %q", tc.extra, r.status, r.body, tc.param, tc.mention)
		}
	}
}

// TestGBNFGrammarRequests: guided_grammar and structured_outputs.grammar
// take a GBNF grammar, recursion included: every output parses.
func TestGBNFGrammarRequests(t *testing.T) {
	env, _ := newCPUEnv(t)
	const arith = `root ::= expr
expr ::= term ([+-] term)*
term ::= [0-9]{1,3} | "(" expr ")"`
	exprRe := regexp.MustCompile(`^[0-9()+-]+$`)
	balanced := func(s string) bool {
		depth := 0
		for _, c := range s {
			switch c {
			case '(':
				depth++
			case ')':
				if depth--; depth < 0 {
					return false
				}
			}
		}
		return depth == 0
	}
	for seed := range 3 {
		for _, field := range []string{`"guided_grammar":%s`, `"structured_outputs":{"grammar":%s}`} {
			g, _ := json.Marshal(arith)
			body := fmt.Sprintf(`{"prompt":"x","max_tokens":60,"seed":%d,`+field+`}`, seed, g)
			r := env.post("/v1/completions", body)
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d %s", field, r.status, r.body)
			}
			var resp openai.CompletionResponse
			decodeStrict(t, r.body, &resp)
			if out := resp.Choices[0].Text; !exprRe.MatchString(out) || !balanced(out) || *resp.Choices[0].FinishReason != "stop" {
				t.Errorf("%s seed %d: %q (finish %s)", field, seed, out, *resp.Choices[0].FinishReason)
			}
		}
	}
}

// TestRecursiveSchemaRequest: a recursive $ref schema is enforced on
// the random-weight model.
func TestRecursiveSchemaRequest(t *testing.T) {
	env, _ := newCPUEnv(t)
	schema := `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v","kids"]}},"$ref":"#/$defs/node"}`
	for seed := range 3 {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"tree"}],"max_tokens":300,"seed":%d,"response_format":{"type":"json_schema","json_schema":{"name":"t","strict":true,"schema":%s}}}`, seed, schema)
		r := env.post("/v1/chat/completions", body)
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var resp openai.ChatResponse
		decodeStrict(t, r.body, &resp)
		if err := jsonschema.Validate([]byte(schema), []byte(resp.Choices[0].Message.Content)); err != nil {
			t.Errorf("seed %d: %q: %v", seed, resp.Choices[0].Message.Content, err)
		}
	}
}

// TestSchemaDroppedHeader: keywords the decoder cannot enforce are
// dropped for tool parameters and non-strict response formats, named in
// X-Kvpilot-Schema-Dropped, and refused under strict: true.
func TestSchemaDroppedHeader(t *testing.T) {
	env, _ := newCPUEnv(t)
	params := `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":4},"uniqueItems":true,"maxItems":2},"n":{"type":"number","multipleOf":0.25}},"required":["tags"]}`
	for _, tc := range []struct {
		name, extra, want string
		status            int
	}{
		{"tools required", `"tools":[{"type":"function","function":{"name":"f","parameters":` + params + `}}],"tool_choice":"required"`, "multipleOf,uniqueItems", 200},
		{"response_format", `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + params + `}}`, "multipleOf,uniqueItems", 200},
		{"response_format strict", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + params + `}}`, "", 400},
		{"enforceable", `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","minimum":1}}}`, "", 200},
	} {
		r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":200,"seed":1,`+tc.extra+`}`)
		if r.status != tc.status || r.header.Get(SchemaDroppedHeader) != tc.want {
			t.Errorf("%s: %d, %s %q, want %d %q: %s", tc.name, r.status, SchemaDroppedHeader, r.header.Get(SchemaDroppedHeader), tc.status, tc.want, r.body)
			continue
		}
		if tc.status != 200 {
			continue
		}
		var resp openai.ChatResponse
		decodeStrict(t, r.body, &resp)
		doc := resp.Choices[0].Message.Content
		if calls := resp.Choices[0].Message.ToolCalls; len(calls) > 0 {
			doc = calls[0].Function.Arguments
		}
		// The structure holds even where assertions were dropped.
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Errorf("%s: %q is not JSON: %v", tc.name, doc, err)
		}
	}
}

// TestCompileCache: schemas differing in spacing share an entry, the
// cache keeps refusals, forgets compiles cut short by the request's
// context, and holds at most grammarCacheEntries entries.
func TestCompileCache(t *testing.T) {
	gs := newGrammars(300, nil, nil)
	compileSchema := func(ctx context.Context, schema string) (compiled, *openai.Error) {
		return gs.compileOutput(ctx, &openai.OutputConstraint{Kind: openai.ConstraintJSONSchema, Param: "p", Schema: json.RawMessage(schema)})
	}
	a, err := compileSchema(context.Background(), `{"type": "object", "properties": {"a": {"type": "integer"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := compileSchema(context.Background(), `{"type":"object","properties":{"a":{"type":"integer"}}}`)
	if a.g != b.g {
		t.Error("spacing made two entries")
	}
	if _, err := compileSchema(context.Background(), `{"type":"string","format":"color"}`); err == nil {
		t.Fatal("unknown format compiled")
	}
	n := gs.lru.Len()
	if _, err := compileSchema(context.Background(), `{"type":"string","format":"color"}`); err == nil || gs.lru.Len() != n {
		t.Errorf("refusal not kept: %v, %d entries then %d", err, n, gs.lru.Len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := compileSchema(ctx, `{"type":"integer","minimum":7}`); err == nil || gs.lru.Len() != n {
		t.Errorf("cancelled compile: %v, %d entries (want %d)", err, gs.lru.Len(), n)
	}
	for i := range grammarCacheEntries + 10 {
		if _, err := compileSchema(context.Background(), fmt.Sprintf(`{"type":"integer","minimum":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if gs.lru.Len() != grammarCacheEntries || len(gs.cache) != grammarCacheEntries {
		t.Errorf("%d entries, bound %d", gs.lru.Len(), grammarCacheEntries)
	}

	// Concurrent requests for one key compile it once; one whose
	// compile is cancelled hands over to a waiter.
	var compiles atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	slow := func(ctx context.Context) (*grammar.Grammar, []string, error) {
		compiles.Add(1)
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		g, err := grammar.Regex("a")
		return g, nil, err
	}
	waiting := make(chan string, 8)
	gs.onWait = func(key string) { waiting <- key }
	leaderCtx, leaderCancel := context.WithCancel(context.Background())
	results := make(chan error, 5)
	go func() { _, err := gs.get(leaderCtx, "k", slow); results <- err }()
	<-started
	for range 4 {
		go func() { _, err := gs.get(context.Background(), "k", slow); results <- err }()
	}
	for range 4 {
		<-waiting // each follower waits on the leader's compile
	}
	leaderCancel()
	if err := <-results; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled leader: %v", err)
	}
	<-started // a waiter took the compile over
	close(release)
	for range 4 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if n := compiles.Load(); n != 2 {
		t.Errorf("%d compiles for 5 requests of one key, one cancelled: want 2", n)
	}
}

// TestDeepRefChainRequest: issue 20's schema (dN = anyOf[dN-1, array of
// dN-1], 16 deep), which used to take a pod past 3 GB, is answered at
// once over HTTP, its output valid.
func TestDeepRefChainRequest(t *testing.T) {
	env, _ := newCPUEnv(t)
	var defs strings.Builder
	defs.WriteString(`"d0":{"type":"integer"}`)
	for i := 1; i <= 16; i++ {
		fmt.Fprintf(&defs, `,"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"type":"array","items":{"$ref":"#/$defs/d%d"}}]}`, i, i-1, i-1)
	}
	schema := `{"$defs":{` + defs.String() + `},"$ref":"#/$defs/d16"}`
	r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":100,"seed":2,
		"response_format":{"type":"json_schema","json_schema":{"name":"chain","strict":true,"schema":`+schema+`}}}`)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	if err := jsonschema.Validate([]byte(schema), []byte(resp.Choices[0].Message.Content)); err != nil {
		t.Errorf("%q: %v", resp.Choices[0].Message.Content, err)
	}
}

// TestDisconnectStopsCompile: a client that leaves while its schema
// compiles stops the compile. The schema's compile, run to its end, is
// refused at the state budget, and a refusal is cached; a compile the
// disconnect stopped ends with the context's error, and is not cached.
func TestDisconnectStopsCompile(t *testing.T) {
	env, _ := newCPUEnv(t)
	var props strings.Builder
	for i := range 150 {
		if i > 0 {
			props.WriteByte(',')
		}
		fmt.Fprintf(&props, `"p%d":{"type":"string","format":"email","pattern":"^[a-z.]{1,40}@[a-z]{1,30}\\.com$","maxLength":60}`, i)
	}
	schema := `{"type":"object","properties":{` + props.String() + `}}`
	if _, _, err := grammar.CompileJSONSchema(context.Background(), []byte(schema), grammar.SchemaOptions{Lenient: true}); !errors.Is(err, grammar.ErrTooLarge) {
		t.Fatalf("the schema compiles to %v, want the state budget's refusal", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The client leaves once the compile has begun; the compile goes on
	// once the server has seen it leave, so it runs, however fast the
	// machine, with the client gone.
	seen := make(chan bool, 1)
	env.srv.grammars.onCompile = func(cctx context.Context, _ string) {
		cancel()
		select {
		case <-cctx.Done():
			seen <- true
		case <-time.After(waitTimeout):
			seen <- false
		}
	}
	ended := make(chan error, 1)
	env.srv.grammars.onCompiled = func(_ string, err error) { ended <- err }
	body := `{"messages":[{"role":"user","content":"x"}],"max_tokens":50,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.ts.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := env.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the request finished (%d) before the client left", resp.StatusCode)
	}
	if !<-seen {
		t.Fatalf("the request's context did not end within %v of the client leaving", waitTimeout)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the compile ended with %v, want %v: it ran on after the client left", err, context.Canceled)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("the compile still runs %v after the client left", waitTimeout)
	}
	env.srv.grammars.mu.Lock()
	cached := env.srv.grammars.lru.Len()
	env.srv.grammars.mu.Unlock()
	if cached != 0 {
		t.Errorf("%d compiles cached after the client left", cached)
	}
}

// TestCompilePanicReleasesWaiters: a compile that panics still releases
// the requests waiting on its key, which then compile it themselves
// instead of waiting for as long as they last.
func TestCompilePanicReleasesWaiters(t *testing.T) {
	gs := newGrammars(300, nil, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	panicking := func(context.Context) (*grammar.Grammar, []string, error) {
		close(entered)
		<-release
		panic("compile bug")
	}
	go func() {
		defer func() { _ = recover() }() // the server's recovery, for the panicking request
		_, _ = gs.get(context.Background(), "k", panicking)
	}()
	<-entered
	waiter := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := gs.get(ctx, "k", func(context.Context) (*grammar.Grammar, []string, error) {
			g, err := grammar.Regex("a")
			return g, nil, err
		})
		waiter <- err
	}()
	close(release)
	if err := <-waiter; err != nil {
		t.Fatalf("the request waiting on a compile that panicked: %v (want its own compile)", err)
	}
}

// TestSchemaDroppedHeaderBounded: a schema with thousands of keywords the
// decoder drops names them in a header of bounded length, cut with "…".
func TestSchemaDroppedHeaderBounded(t *testing.T) {
	env, _ := newCPUEnv(t)
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"a":{"type":"integer"}}`)
	for i := range 3000 {
		fmt.Fprintf(&b, `,"x-vendor-keyword-%05d":1`, i)
	}
	b.WriteString(`}`)
	r := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":20,"seed":1,`+
		`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":`+b.String()+`}}}`)
	h := r.header.Get(SchemaDroppedHeader)
	if r.status != 200 || !strings.HasPrefix(h, "x-vendor-keyword-00000,") || !strings.HasSuffix(h, ",…") || len(h) > maxDroppedHeaderBytes+len(",…") {
		t.Fatalf("%d, %s of %d bytes: %.80q…: %s", r.status, SchemaDroppedHeader, len(h), h, r.body)
	}
}
