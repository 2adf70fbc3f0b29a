package openai

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
)

// Tool-call output formats (how the model writes calls; the server reads
// the format from the chat template).
const (
	ToolFormatHermes     = "hermes"      // <tool_call>{"name": …, "arguments": {…}}</tool_call>
	ToolFormatLlama3JSON = "llama3_json" // {"name": …, "parameters": {…}} as the whole message
	ToolFormatMistral    = "mistral"     // [TOOL_CALLS] [{"name": …, "arguments": {…}}]
)

// ToolCallDelta is one streamed piece of a call: the first piece of a call
// has ID and Name, later pieces append to its arguments.
type ToolCallDelta struct {
	Index     int
	ID, Name  string
	Arguments string
	First     bool
}

// ToolStreamer separates a model's output into content and tool calls as
// it arrives, so content streams at once and calls stream as delta.tool_calls
// pieces (id and name first, then argument fragments), the way the
// official clients assemble them. The whole-response path feeds all the
// text at once: both paths agree by construction.
//
// Text is content until the format's start of a call: "<tool_call>"
// anywhere (hermes; a partial marker at the end is held back), or a first
// non-blank character "{" (llama3_json, after an optional <|python_tag|>)
// or "[" (mistral, after an optional [TOOL_CALLS]). From there on, the
// output is calls: each JSON object {"name": …, "arguments"|"parameters":
// …} is one call; text between objects (markers, separators) is dropped.
// When that part of the output holds no call after all, it is returned as
// content at the end only if no marker opened it (a bare "{" or "[" may
// be a JSON answer); a part a marker opened is the template's call markup
// (a call max_tokens cut before its name, say), never content.
type ToolStreamer struct {
	format string
	idLen  int

	decided bool // llama3_json / mistral: the first non-blank byte was seen
	inCalls bool
	marked  bool   // a marker (<tool_call>, <|python_tag|>, [TOOL_CALLS]) opened the calls
	pending []byte // content held back (a possible marker start)
	raw     []byte // the calls part
	scan    int    // bytes of raw consumed

	calls []*streamCall
}

type streamCall struct {
	id, name   string
	args       bytes.Buffer
	headerSent bool
	sentArgs   int
	argsStart  int // offset in raw of the arguments value, -1 unknown
	objStart   int
	done       bool
}

// NewToolStreamer starts parsing one output written in format.
func NewToolStreamer(format string) *ToolStreamer {
	idLen := 24
	if format == ToolFormatMistral {
		idLen = 9 // Mistral's template requires 9-character ids
	}
	return &ToolStreamer{format: format, idLen: idLen}
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
)

// Feed takes new output text; it returns the content that can be
// released and the call pieces completed so far.
func (t *ToolStreamer) Feed(text []byte) (content []byte, deltas []ToolCallDelta) {
	if t.inCalls {
		t.raw = append(t.raw, text...)
		return nil, t.advance(false)
	}
	buf := append(t.pending, text...)
	t.pending = nil
	switch t.format {
	case ToolFormatHermes:
		if i := bytes.Index(buf, []byte(hermesOpen)); i >= 0 {
			content = buf[:i]
			t.inCalls, t.marked = true, true
			t.raw = append(t.raw, buf[i:]...)
			return trimRightCopy(content), t.advance(false)
		}
		// Hold back a suffix that could start the marker.
		keep := markerPrefix(buf, hermesOpen)
		t.pending = append([]byte(nil), buf[len(buf)-keep:]...)
		return buf[:len(buf)-keep], nil
	case ToolFormatLlama3JSON, ToolFormatMistral:
		if t.decided {
			return buf, nil
		}
		trimmed := bytes.TrimLeft(buf, " \t\r\n")
		for _, p := range []string{"<|python_tag|>", "[TOOL_CALLS]"} {
			if bytes.HasPrefix(trimmed, []byte(p)) {
				trimmed = bytes.TrimLeft(trimmed[len(p):], " \t\r\n")
				t.marked = true
			} else if len(trimmed) < len(p) && bytes.HasPrefix([]byte(p), trimmed) && len(trimmed) > 0 {
				t.pending = append([]byte(nil), buf...)
				return nil, nil
			}
		}
		if len(trimmed) == 0 {
			t.pending = append([]byte(nil), buf...)
			return nil, nil
		}
		t.decided = true
		open := byte('{')
		if t.format == ToolFormatMistral {
			open = '['
		}
		if trimmed[0] == open || (t.format == ToolFormatMistral && trimmed[0] == '{') {
			t.inCalls = true
			t.raw = append(t.raw, trimmed...)
			return nil, t.advance(false)
		}
		return buf, nil
	}
	return buf, nil
}

// Finish ends the output: the held-back content, the last call pieces,
// and whether any call was found.
func (t *ToolStreamer) Finish() (content []byte, deltas []ToolCallDelta, called bool) {
	if !t.inCalls {
		return t.pending, nil, false
	}
	deltas = t.advance(true)
	if len(t.calls) == 0 {
		if t.marked {
			// The template's markup of a call that never got a name:
			// not text the model meant for the reader.
			return nil, nil, false
		}
		// No call after all: what looked like one is content.
		return t.raw, nil, false
	}
	return nil, deltas, true
}

// Calls returns the calls parsed (after Finish).
func (t *ToolStreamer) Calls() []ToolCall {
	out := make([]ToolCall, 0, len(t.calls))
	for _, c := range t.calls {
		out = append(out, ToolCall{ID: c.id, Type: "function", Function: ToolCallFunction{Name: c.name, Arguments: c.args.String()}})
	}
	return out
}

var callHead = regexp.MustCompile(`^\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*`)

// advance scans t.raw for call objects and returns new pieces; final
// flushes what the end of the output completes.
func (t *ToolStreamer) advance(final bool) []ToolCallDelta {
	var out []ToolCallDelta
	for {
		var c *streamCall
		if n := len(t.calls); n > 0 && !t.calls[n-1].done {
			c = t.calls[n-1]
		} else {
			// Find the next object start.
			i := bytes.IndexByte(t.raw[t.scan:], '{')
			if i < 0 {
				return out
			}
			c = &streamCall{objStart: t.scan + i, argsStart: -1}
			t.calls = append(t.calls, c)
		}
		idx := len(t.calls) - 1
		obj := t.raw[c.objStart:]
		// A hermes call ends at its closing marker, whatever its JSON
		// says: nothing past it belongs to the call.
		closed := false
		if t.format == ToolFormatHermes {
			if i := bytes.Index(obj, []byte(hermesClose)); i >= 0 {
				obj, closed = obj[:i], true
			} else {
				// Hold back what may be the start of the marker.
				obj = obj[:len(obj)-markerPrefix(obj, hermesClose)]
			}
		}
		if c.argsStart < 0 {
			if m := callHead.FindSubmatchIndex(obj); m != nil {
				var name string
				if json.Unmarshal(obj[m[2]:m[3]], &name) == nil {
					c.name, c.argsStart = name, c.objStart+m[1]
				}
			}
		}
		end := jsonValueEnd(obj)
		if c.argsStart >= 0 && !c.headerSent {
			c.id = newCallID(t.idLen)
			c.headerSent = true
			out = append(out, ToolCallDelta{Index: idx, ID: c.id, Name: c.name, First: true})
		}
		if c.argsStart >= 0 {
			args := obj[c.argsStart-c.objStart:]
			// The head may have matched before the blanks after its colon
			// arrived: they are not part of the arguments.
			for c.sentArgs == 0 && len(args) > 0 && strings.IndexByte(" \t\r\n", args[0]) >= 0 {
				c.argsStart++
				args = args[1:]
			}
			if len(args) > 0 && (args[0] == '{' || args[0] == '[') {
				// Stream the arguments object as it grows, up to its end
				// (a string or a scalar is sent whole, once the call
				// object is complete: only then is its end known).
				argEnd := jsonValueEnd(args)
				avail := len(args)
				if argEnd >= 0 {
					avail = argEnd
				}
				if avail > c.sentArgs {
					frag := args[c.sentArgs:avail]
					c.args.Write(frag)
					out = append(out, ToolCallDelta{Index: idx, Arguments: string(frag)})
					c.sentArgs = avail
				}
			}
		}
		if end < 0 {
			if !final && !closed {
				return out
			}
			// The output (or the call's marker) ended inside the object:
			// keep what streamed.
			if c.argsStart < 0 {
				t.calls = t.calls[:idx]
			}
			c.done = true
			if closed {
				t.scan = c.objStart + len(obj) + len(hermesClose)
				continue
			}
			return out
		}
		// The object is complete.
		c.done = true
		t.scan = c.objStart + end
		var whole struct {
			Name       string          `json:"name"`
			Arguments  json.RawMessage `json:"arguments"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(obj[:end], &whole); err != nil || whole.Name == "" {
			if !c.headerSent {
				t.calls = t.calls[:idx] // not a call: skip it
			}
			continue
		}
		args := whole.Arguments
		if len(args) == 0 {
			args = whole.Parameters
		}
		argText := compactArgs(args)
		if !c.headerSent {
			// The head did not match the streaming pattern (another key
			// order): send the whole call now.
			c.id, c.name, c.headerSent = newCallID(t.idLen), whole.Name, true
			out = append(out, ToolCallDelta{Index: idx, ID: c.id, Name: c.name, First: true})
		}
		if c.args.Len() == 0 && argText != "" {
			c.args.WriteString(argText)
			out = append(out, ToolCallDelta{Index: idx, Arguments: argText})
		}
	}
}

// compactArgs is the arguments as JSON text: a string value is taken as
// already-encoded JSON (some models write arguments that way).
func compactArgs(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// jsonValueEnd returns the length of the JSON object or array at the
// start of b, or -1 when b ends first. Strings and escapes are honoured;
// nothing else is validated.
func jsonValueEnd(b []byte) int {
	depth := 0
	inStr, esc := false, false
	for i, c := range b {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newCallID is "call_" and n random characters, or, for Mistral, n
// alphanumerics alone (its template checks the length).
func newCallID(n int) string {
	var b strings.Builder
	if n != 9 {
		b.WriteString("call_")
	}
	for range n {
		b.WriteByte(idAlphabet[rand.IntN(len(idAlphabet))])
	}
	return b.String()
}

// markerPrefix is the length of the longest end of b that begins marker
// (and is shorter than it).
func markerPrefix(b []byte, marker string) int {
	for k := min(len(marker)-1, len(b)); k > 0; k-- {
		if bytes.HasSuffix(b, []byte(marker[:k])) {
			return k
		}
	}
	return 0
}

func trimRightCopy(b []byte) []byte {
	return append([]byte(nil), bytes.TrimRight(b, " \t\r\n")...)
}
