package main_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// TestResponsesEndToEnd runs the Responses API of the runtime binary
// serving the built-in tiny model (a ChatML template with Hermes tool
// calls): a function_call_output answers a call of the whole conversation,
// the stored chain's included, or is a 400 naming it; a forced call the
// limit cut before its name is no output_text.
func TestResponsesEndToEnd(t *testing.T) {
	p := startPod(t)
	post := func(t *testing.T, body string) (int, []byte) { t.Helper(); return p.post(t, "/v1/responses", body) }
	const tools = `"tools":[{"type":"function","name":"get_w","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"tool_choice":"required"`

	t.Run("function_call_output answers a call", func(t *testing.T) {
		status, b := post(t, `{"max_output_tokens":200,"input":"weather?",`+tools+`}`)
		var first struct {
			ID     string `json:"id"`
			Output []struct {
				CallID string `json:"call_id"`
			} `json:"output"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &first) != nil || len(first.Output) == 0 || first.Output[len(first.Output)-1].CallID == "" {
			t.Fatalf("forced call: %d %s", status, b)
		}
		call := first.Output[len(first.Output)-1].CallID
		output := func(id string) string {
			return `{"max_output_tokens":2,"previous_response_id":"` + first.ID + `","input":[{"type":"function_call_output","call_id":"` + id + `","output":"sunny"}]}`
		}
		if status, b := post(t, output(call)); status != http.StatusOK {
			t.Errorf("answering the stored chain's call: %d %s", status, b)
		}
		for _, body := range []string{output("nope"), `{"max_output_tokens":2,"input":[{"type":"function_call_output","call_id":"` + call + `","output":"sunny"}]}`} {
			status, b := post(t, body)
			var e openai.ErrorResponse
			if status != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Param == nil || *e.Error.Param != "input[0].call_id" {
				t.Errorf("%s: %d %s; want a 400 naming input[0].call_id", body, status, b)
			}
		}
	})

	t.Run("a forced call cut by max_output_tokens is no text", func(t *testing.T) {
		for _, stream := range []string{"false", "true"} {
			status, b := post(t, `{"max_output_tokens":20,"input":"x","stream":`+stream+`,`+tools+`}`)
			if status != http.StatusOK || strings.Contains(string(b), "<tool_call>") || strings.Contains(string(b), `\u003ctool_call\u003e`) || !strings.Contains(string(b), `"status":"incomplete"`) {
				t.Errorf("stream %s: %d %s", stream, status, b)
			}
		}
	})
}
