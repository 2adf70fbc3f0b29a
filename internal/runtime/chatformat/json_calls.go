package chatformat

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

// jsonCalls reads calls written as JSON objects {"name": …, "arguments"|
// "parameters": …}: Hermes's inside <tool_call> tags, Llama 3.x's as the
// whole message, Mistral's as a list after [TOOL_CALLS].
//
// Text is content until the format's start of a call: the open marker
// anywhere (hermes; a partial marker at the end is held back), or a first
// non-blank character "{" (llama3_json, after an optional <|python_tag|>)
// or "[" (mistral, after an optional [TOOL_CALLS]). From there on, the
// output is calls: each JSON object is one call; text between objects
// (markers, separators) is dropped. When that part of the output holds no
// call after all, it is returned as content at the end only if no marker
// opened it (a bare "{" or "[" may be a JSON answer); a part a marker
// opened is the template's call markup (a call max_tokens cut before its
// name, say), never content.
type jsonCalls struct {
	// open is the marker that starts calls anywhere (hermes), close the
	// one that ends each; leads are the optional markers before a leading
	// call (llama3_json, mistral) and first the characters that may start
	// one there.
	open, close string
	leads       []string
	first       string

	decided bool // llama3_json / mistral: the first non-blank byte was seen
	inCalls bool
	marked  bool   // a marker opened the calls
	pending []byte // content held back (a possible marker start)
	raw     []byte // the calls part
	scan    int    // bytes of raw consumed

	calls []*jsonCall
}

type jsonCall struct {
	name       string
	args       bytes.Buffer
	headerSent bool
	sentArgs   int
	argsStart  int // offset in raw of the arguments value, -1 unknown
	objStart   int
	done       bool
}

func (t *jsonCalls) Feed(text []byte) []Event {
	if t.inCalls {
		t.raw = append(t.raw, text...)
		return t.advance(nil, false)
	}
	buf := append(t.pending, text...)
	t.pending = nil
	if t.open != "" {
		if i := bytes.Index(buf, []byte(t.open)); i >= 0 {
			evs := textEvent(nil, EventText, bytes.TrimRight(buf[:i], " \t\r\n"))
			t.inCalls, t.marked = true, true
			t.raw = append(t.raw, buf[i:]...)
			return t.advance(evs, false)
		}
		keep := partialSuffix(buf, t.open)
		t.pending = append([]byte(nil), buf[len(buf)-keep:]...)
		return textEvent(nil, EventText, buf[:len(buf)-keep])
	}
	if t.decided {
		return textEvent(nil, EventText, buf)
	}
	trimmed := bytes.TrimLeft(buf, " \t\r\n")
	for _, p := range t.leads {
		if bytes.HasPrefix(trimmed, []byte(p)) {
			trimmed = bytes.TrimLeft(trimmed[len(p):], " \t\r\n")
			t.marked = true
		} else if len(trimmed) < len(p) && bytes.HasPrefix([]byte(p), trimmed) && len(trimmed) > 0 {
			t.pending = append([]byte(nil), buf...)
			return nil
		}
	}
	if len(trimmed) == 0 {
		t.pending = append([]byte(nil), buf...)
		return nil
	}
	t.decided = true
	if strings.IndexByte(t.first, trimmed[0]) >= 0 {
		t.inCalls = true
		t.raw = append(t.raw, trimmed...)
		return t.advance(nil, false)
	}
	return textEvent(nil, EventText, buf)
}

func (t *jsonCalls) Finish() []Event {
	if !t.inCalls {
		return textEvent(nil, EventText, t.pending)
	}
	evs := t.advance(nil, true)
	if len(t.calls) == 0 {
		if t.marked {
			// The template's markup of a call that never got a name:
			// not text the model meant for the reader.
			return nil
		}
		// No call after all: what looked like one is content.
		return textEvent(nil, EventText, t.raw)
	}
	return evs
}

var callHead = regexp.MustCompile(`^\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*`)

// advance scans t.raw for call objects and appends new pieces to out;
// final flushes what the end of the output completes.
func (t *jsonCalls) advance(out []Event, final bool) []Event {
	for {
		var c *jsonCall
		if n := len(t.calls); n > 0 && !t.calls[n-1].done {
			c = t.calls[n-1]
		} else {
			i := bytes.IndexByte(t.raw[t.scan:], '{')
			if i < 0 {
				return out
			}
			c = &jsonCall{objStart: t.scan + i, argsStart: -1}
			t.calls = append(t.calls, c)
		}
		idx := len(t.calls) - 1
		obj := t.raw[c.objStart:]
		// A marked call ends at its closing marker, whatever its JSON
		// says: nothing past it belongs to the call.
		closed := false
		if t.close != "" {
			if i := bytes.Index(obj, []byte(t.close)); i >= 0 {
				obj, closed = obj[:i], true
			} else {
				obj = obj[:len(obj)-partialSuffix(obj, t.close)]
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
			c.headerSent = true
			out = append(out, Event{Kind: EventCallStart, Index: idx, Name: c.name})
		}
		if c.argsStart >= 0 {
			args := obj[c.argsStart-c.objStart:]
			// The head may have matched before the blanks after its colon
			// arrived: they are not part of the arguments.
			for c.sentArgs == 0 && len(args) > 0 && isBlank(args[0]) {
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
					out = append(out, Event{Kind: EventCallArgs, Index: idx, Text: append([]byte(nil), frag...)})
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
			} else {
				out = append(out, Event{Kind: EventCallEnd, Index: idx})
			}
			c.done = true
			if closed {
				t.scan = c.objStart + len(obj) + len(t.close)
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
			} else {
				out = append(out, Event{Kind: EventCallEnd, Index: idx})
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
			c.name, c.headerSent = whole.Name, true
			out = append(out, Event{Kind: EventCallStart, Index: idx, Name: c.name})
		}
		if c.args.Len() == 0 && argText != "" {
			c.args.WriteString(argText)
			out = append(out, Event{Kind: EventCallArgs, Index: idx, Text: []byte(argText)})
		}
		out = append(out, Event{Kind: EventCallEnd, Index: idx})
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
