package openai

import (
	"net/http"
	"testing"
)

// TestRefusesUnknownRoleAndInvalidUTF8: vLLM answers both with 400; so do
// we, naming the field.
func TestRefusesUnknownRoleAndInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		name, body, param string
		chat              bool
	}{
		{"unknown role", `{"messages":[{"role":"user","content":"hi"},{"role":"wizard","content":"hi"}]}`, "messages[1].role", true},
		{"role in capitals", `{"messages":[{"role":"User","content":"hi"}]}`, "messages[0].role", true},
		{"invalid UTF-8 in content", "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}", "messages[0].content", true},
		{"invalid UTF-8 in a content part", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"},{\"type\":\"text\",\"text\":\"\xc3\x28\"}]}]}", "messages[0].content[1].text", true},
		{"invalid UTF-8 in the prompt", "{\"prompt\":\"\xff\xfe\",\"max_tokens\":3}", "prompt", false},
		{"invalid UTF-8 in a prompt list", "{\"prompt\":[\"\xed\xa0\x80\"]}", "prompt[0]", false},
		{"invalid UTF-8 in stop", "{\"prompt\":\"x\",\"stop\":[\"\x80\"]}", "stop[0]", false},
		{"invalid UTF-8 in a key", "{\"prompt\":\"x\",\"user\xff\":1}", "user\ufffd", false},
		{"invalid UTF-8 in an unknown nested field", "{\"prompt\":\"x\",\"metadata\":{\"a\":[1,{\"b\":\"\xfe\"}]}}", "metadata.a[1].b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err *Error
			if tc.chat {
				_, err = ParseChat([]byte(tc.body))
			} else {
				_, err = ParseCompletion([]byte(tc.body))
			}
			if err == nil || err.Status != http.StatusBadRequest || err.Param != tc.param {
				t.Errorf("got %v, want 400 naming %q", err, tc.param)
			}
		})
	}
	for _, role := range ChatRoles {
		// A tool message answers a call of an earlier assistant message.
		call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},`
		if _, err := ParseChat([]byte(`{"messages":[` + call + `{"role":"` + role + `","content":"hi","tool_call_id":"c1"}]}`)); err != nil {
			t.Errorf("role %q refused: %v", role, err)
		}
	}
	if _, err := ParseCompletion([]byte(`{"prompt":"caf\u00e9 \u65e5\u672c \ud83d\ude00"}`)); err != nil {
		t.Errorf("valid non-ASCII text refused: %v", err)
	}
}
