package openai

import (
	"net/http"
	"testing"
)

// parsers are the request parsers the strictness rules below hold for,
// each followed by the structured-output resolution the server runs.
var parsers = map[string]func([]byte) *Error{
	"completion": func(b []byte) *Error {
		r, err := ParseCompletion(b)
		if err == nil {
			_, err = r.Constraint()
		}
		return err
	},
	"chat": func(b []byte) *Error {
		r, err := ParseChat(b)
		if err == nil {
			_, err = r.Constraint()
		}
		return err
	},
}

// TestRequestsRefusedNamingTheField: values that Go's decoder would take
// silently, or fields whose effect the server does not implement, are a
// 400 whose param is the field's JSON path (never a Go struct name).
func TestRequestsRefusedNamingTheField(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct {
		name, parser, body, param string
	}{
		// Type errors name the JSON path, with indexes.
		{"tools type", "chat", `{` + msgs + `,"tools":"x"}`, "tools"},
		{"response_format type", "completion", `{"prompt":"x","response_format":"json"}`, "response_format"},
		{"guided_regex type", "completion", `{"prompt":"x","guided_regex":1}`, "guided_regex"},
		{"structured_outputs.regex type", "completion", `{"prompt":"x","structured_outputs":{"regex":1}}`, "structured_outputs.regex"},
		{"strict type", "chat", `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"schema":{},"strict":"yes"}}}`, "response_format.json_schema.strict"},
		{"parallel_tool_calls type", "chat", `{` + msgs + `,"parallel_tool_calls":3}`, "parallel_tool_calls"},
		{"tool name type", "chat", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":3}}]}`, "tools[1].function.name"},
		{"role type", "chat", `{"messages":[{"role":"user","content":"x"},{"role":5,"content":"y"}]}`, "messages[1].role"},
		{"tool call arguments type", "chat", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "messages[0].tool_calls[0].function.arguments"},

		// null is no token id, string or bias.
		{"null prompt tokens", "completion", `{"prompt":[null,null]}`, "prompt"},
		{"null in a batch's tokens", "completion", `{"prompt":[[1,2],[3,null]]}`, "prompt"},
		{"null stop token", "completion", `{"prompt":"x","stop_token_ids":[null]}`, "stop_token_ids"},
		{"null allowed token", "chat", `{` + msgs + `,"allowed_token_ids":[1,null]}`, "allowed_token_ids"},
		{"null guided choice", "completion", `{"prompt":"x","guided_choice":["a",null]}`, "guided_choice"},
		{"null structured choice", "chat", `{` + msgs + `,"structured_outputs":{"choice":[null]}}`, "structured_outputs.choice"},
		{"null bias", "completion", `{"prompt":"x","logit_bias":{"65":null}}`, "logit_bias"},

		// One bias per token.
		{"logit_bias leading zero", "completion", `{"prompt":"x","logit_bias":{"65":60,"065":60}}`, "logit_bias"},
		{"logit_bias plus sign", "chat", `{` + msgs + `,"logit_bias":{"+65":60,"65":60,"66":100}}`, "logit_bias"},

		// An unpaired surrogate escape is no text.
		{"surrogate in prompt", "completion", `{"prompt":"ab\ud800cd"}`, "prompt"},
		{"low surrogate in a batch", "completion", `{"prompt":["a","b\udc00"]}`, "prompt[1]"},
		{"surrogate in content", "chat", `{"messages":[{"role":"user","content":"x"},{"role":"user","content":"\ud83dx"}]}`, "messages[1].content"},
		{"surrogate in a stop string", "completion", `{"prompt":"x","stop":["\udfff"]}`, "stop[0]"},

		// Keys are case-sensitive.
		{"N", "completion", `{"prompt":"x","N":3}`, "N"},
		{"MAX_TOKENS", "chat", `{` + msgs + `,"MAX_TOKENS":2}`, "MAX_TOKENS"},
		{"Stream beside stream", "completion", `{"prompt":"x","stream":false,"Stream":true}`, "Stream"},
		{"Kelvin sign", "completion", "{\"prompt\":\"x\",\"top_\u212a\":2}", "top_\u212a"},

		// Fields whose effect is not implemented.
		{"prompt_logprobs", "completion", `{"prompt":"x","prompt_logprobs":0}`, "prompt_logprobs"},
		{"use_beam_search", "completion", `{"prompt":"x","use_beam_search":"true"}`, "use_beam_search"},
		{"logits_processors", "chat", `{` + msgs + `,"logits_processors":["m.f"]}`, "logits_processors"},
		{"prompt_embeds", "completion", `{"prompt":"x","prompt_embeds":"AAAA"}`, "prompt_embeds"},
		{"continuous_usage_stats", "completion", `{"prompt":"x","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":"true"}}`, "stream_options.continuous_usage_stats"},
		{"whitespace_pattern", "completion", `{"prompt":"x","structured_outputs":{"json":{},"whitespace_pattern":" "}}`, "structured_outputs.whitespace_pattern"},
		{"structural_tag", "chat", `{` + msgs + `,"structured_outputs":{"structural_tag":"{}"}}`, "structured_outputs.structural_tag"},
		{"top-level structural_tag", "chat", `{` + msgs + `,"structural_tag":"{}"}`, "structural_tag"},
		{"disable_any_whitespace", "chat", `{` + msgs + `,"structured_outputs":{"json_object":true,"disable_any_whitespace":true}}`, "structured_outputs.disable_any_whitespace"},
		{"json_object beside a regex", "chat", `{` + msgs + `,"structured_outputs":{"json_object":true,"regex":"a"}}`, "structured_outputs.regex"},
		{"chat_template", "chat", `{` + msgs + `,"chat_template":"{{ messages }}"}`, "chat_template"},
		{"chat echo", "chat", `{` + msgs + `,"echo":true}`, "echo"},
		{"chat best_of below n", "chat", `{` + msgs + `,"n":2,"best_of":1}`, "best_of"},
		{"chat best_of streamed", "chat", `{` + msgs + `,"best_of":2,"stream":true}`, "best_of"},
		{"audio", "chat", `{` + msgs + `,"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}}`, "audio"},
		{"modalities", "chat", `{` + msgs + `,"modalities":["audio"]}`, "modalities"},
		{"documents", "chat", `{` + msgs + `,"documents":[{"text":"d"}]}`, "documents"},
		{"allowed_token_ids empty", "chat", `{` + msgs + `,"allowed_token_ids":[]}`, "allowed_token_ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parsers[tc.parser]([]byte(tc.body))
			if err == nil || err.Status != http.StatusBadRequest || err.Param != tc.param {
				t.Errorf("%s: got %v, want a 400 naming %s", tc.body, err, tc.param)
			}
		})
	}
}

// TestRequestsAccepted: what the strictness above must leave alone.
func TestRequestsAccepted(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct{ name, parser, body string }{
		{"surrogate pair", "completion", `{"prompt":"\ud83d\ude00"}`},
		{"escaped backslash before u", "completion", `{"prompt":"\\ud800"}`},
		{"null lists", "completion", `{"prompt":"x","stop_token_ids":null,"logit_bias":null,"guided_choice":null}`},
		{"one bias per token", "completion", `{"prompt":"x","logit_bias":{"65":60,"66":-1}}`},
		{"unknown fields", "chat", `{` + msgs + `,"store":false,"metadata":{"N":"1"},"prediction":null}`},
		{"false, null and empty asks", "chat", `{` + msgs + `,"use_beam_search":false,"prompt_logprobs":null,"logits_processors":[],"echo":false,"chat_template":null,"modalities":["text"],"stream_options":{"continuous_usage_stats":false}}`},
		{"backend choices", "completion", `{"prompt":"x","structured_outputs":{"json_object":true,"disable_fallback":true,"backend":"xgrammar"}}`},
		{"chat best_of", "chat", `{` + msgs + `,"n":2,"best_of":3}`},
		{"null in a schema enum", "chat", `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"schema":{"enum":[null,1]}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := parsers[tc.parser]([]byte(tc.body)); err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
		})
	}
}

// TestStructuredOutputsJSONObject: structured_outputs.json_object is
// response_format json_object under vLLM's newer spelling.
func TestStructuredOutputsJSONObject(t *testing.T) {
	r, err := ParseCompletion([]byte(`{"prompt":"x","structured_outputs":{"json_object":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Constraint()
	if err != nil || c == nil || c.Kind != ConstraintJSONObject || c.Param != "structured_outputs.json_object" {
		t.Errorf("constraint %+v, %v; want json_object named structured_outputs.json_object", c, err)
	}
}
