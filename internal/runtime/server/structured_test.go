package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
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
