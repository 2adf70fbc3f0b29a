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
// tool message answers a call (CheckToolResults).
func checkMessages(msgs []Message) *Error {
	for i, m := range msgs {
		if err := checkRole(i, m.Role); err != nil {
			return err
		}
	}
	return CheckToolResults(msgs, func(i int) string { return fmt.Sprintf("messages[%d].tool_call_id", i) })
}

// CheckToolResults refuses a tool message that answers no call: its
// tool_call_id must name a call of an earlier assistant message, as
// OpenAI and Anthropic require. A template would otherwise render a
// result the model never asked for. Every API whose request becomes a
// chat request runs it on the whole conversation (a stored chain's
// included); field names message i's call id in the request's own terms,
// for the error's param and message.
func CheckToolResults(msgs []Message, field func(i int) string) *Error {
	var calls map[string]bool
	for i, m := range msgs {
		for _, c := range m.ToolCalls {
			if calls == nil {
				calls = map[string]bool{}
			}
			calls[c.ID] = true
		}
		if m.Role != "tool" {
			continue
		}
		switch f := field(i); {
		case m.ToolCallID == "":
			return BadRequest(f, "%s is required: a tool result names the call it answers", f)
		case !calls[m.ToolCallID]:
			return BadRequest(f, "%s %q names no tool call of an earlier assistant message", f, m.ToolCallID)
		}
	}
	return nil
}

// checkText refuses a body with invalid UTF-8 inside a JSON string, or
// with an escaped UTF-16 surrogate that is not half of a pair ("\ud800"):
// Go's decoder would silently turn either into U+FFFD and the model would
// see text the client never sent. The error names the field.
func checkText(body []byte) *Error {
	if err := checkUTF8(body); err != nil {
		return err
	}
	if !bytes.Contains(body, []byte(`\u`)) {
		return nil
	}
	at := loneSurrogateAt(body)
	if at < 0 {
		return nil
	}
	field := fieldAt(body, at)
	if field == "" {
		return BadRequest("", "request body holds an unpaired UTF-16 surrogate escape at byte %d; not valid Unicode", at)
	}
	return BadRequest(field, "%s holds an unpaired UTF-16 surrogate escape (byte %d of the body); not valid Unicode", field, at)
}

// checkUTF8 refuses a body with invalid UTF-8 inside a JSON string, naming
// the field.
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
	field := ""
	walkTokens(body, func(path func() string, _ json.Token, _ bool, end int64) bool {
		if end > int64(off) {
			field = path()
			return false
		}
		return true
	})
	return field
}

// walkTokens calls visit with each token of a JSON document in order: the
// path it is at (a key's is the path it names; computed on demand),
// whether it is a key, and the offset just past it. It stops when visit
// returns false or at the first syntax error.
func walkTokens(body []byte, visit func(path func() string, tok json.Token, isKey bool, end int64) bool) {
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
			return
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
		if !visit(path, tok, isKey, dec.InputOffset()) {
			return
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

// valueOfKind returns the path of the first value in body whose path,
// without array indexes, is field and whose JSON kind is kind ("string",
// "number", "bool", "null", "array", "object"), "" if none is.
func valueOfKind(body []byte, field, kind string) string {
	found := ""
	walkTokens(body, func(path func() string, tok json.Token, isKey bool, _ int64) bool {
		if isKey || kindOf(tok) != kind {
			return true
		}
		if p := path(); withoutIndexes(p) == field {
			found = p
			return false
		}
		return true
	})
	return found
}

// kindOf is a token's JSON kind as json.UnmarshalTypeError.Value names
// it; "" for closing delimiters.
func kindOf(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "object"
		case '[':
			return "array"
		}
		return ""
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return ""
}
