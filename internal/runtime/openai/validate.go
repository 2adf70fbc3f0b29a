package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ChatRoles are the message roles the chat API accepts, as OpenAI and vLLM
// define them; any other role is refused rather than passed to a template
// that would render it as text the model never saw in training.
var ChatRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// checkRole refuses a role outside ChatRoles, naming messages[i].role.
func checkRole(i int, role string) *Error {
	for _, r := range ChatRoles {
		if role == r {
			return nil
		}
	}
	field := fmt.Sprintf("messages[%d].role", i)
	if strings.TrimSpace(role) == "" {
		return BadRequest(field, "%s is required", field)
	}
	return BadRequest(field, "%s %q is not one of %s", field, role, strings.Join(ChatRoles, ", "))
}

// checkMessages checks each message's role (checkRole) and that every
// tool message answers a call: it names, in tool_call_id, a call of an
// earlier assistant message, as OpenAI requires. A template would
// otherwise render a result the model never asked for.
func checkMessages(msgs []Message) *Error {
	var calls map[string]bool
	for i, m := range msgs {
		if err := checkRole(i, m.Role); err != nil {
			return err
		}
		for _, c := range m.ToolCalls {
			if calls == nil {
				calls = map[string]bool{}
			}
			calls[c.ID] = true
		}
		if m.Role != "tool" {
			continue
		}
		field := fmt.Sprintf("messages[%d].tool_call_id", i)
		switch {
		case m.ToolCallID == "":
			return BadRequest(field, "a message with role tool needs tool_call_id")
		case !calls[m.ToolCallID]:
			return BadRequest(field, "%s %q names no tool call of an earlier assistant message", field, m.ToolCallID)
		}
	}
	return nil
}

// checkUTF8 refuses a body with invalid UTF-8 inside a JSON string (Go's
// decoder would silently turn the bytes into U+FFFD and the model would
// see text the client never sent). The error names the field.
func checkUTF8(body []byte) *Error {
	if utf8.Valid(body) {
		return nil
	}
	bad := 0
	for bad < len(body) {
		r, n := utf8.DecodeRune(body[bad:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		bad += n
	}
	field := fieldAt(body, bad)
	if field == "" {
		return BadRequest("", "request body has invalid UTF-8 at byte %d", bad)
	}
	return BadRequest(field, "%s has invalid UTF-8 (byte %d of the body)", field, bad)
}

// fieldAt returns the JSON path (messages[0].content) of the token that
// holds byte offset off of a valid JSON document, or "" if none does.
func fieldAt(body []byte, off int) string {
	type frame struct {
		obj       bool
		key       string
		idx       int
		expectKey bool
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.obj {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.idx)
			}
		}
		return b.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].expectKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		isKey := false
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if s, ok := tok.(string); ok && top.obj && top.expectKey {
				top.key, top.expectKey, isKey = s, false, true
			} else if d, ok := tok.(json.Delim); !top.obj && (!ok || d != ']') {
				top.idx++
			}
		}
		if dec.InputOffset() > int64(off) {
			return path()
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{':
				stack = append(stack, frame{obj: true, expectKey: true})
			case '[':
				stack = append(stack, frame{idx: -1})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		default:
			if !isKey {
				valueDone()
			}
		}
	}
}
