package chatformat

import (
	"bytes"
	"strings"
)

// delimitedSyntax is a format whose calls sit between special-token
// delimiters, a name and then the JSON arguments (DeepSeek V3.1, Kimi K2):
//
//	SECTION_BEGIN (CALL_BEGIN name ARGS_BEGIN {…} CALL_END)+ SECTION_END
type delimitedSyntax struct {
	sectionBegin, sectionEnd string
	callBegin, argsBegin     string
	callEnd                  string
	// name reads the function's name from what the model wrote between
	// callBegin and argsBegin ("" when it names none).
	name func(string) string
}

// delimitedCalls reads calls in a delimitedSyntax. Content before the
// section is the answer, as it streamed (the server trims the content of an answer that called); the arguments of a
// call are all its text up to its end marker, streamed as they come (a
// cut marker held back). Markup that names no function is text.
type delimitedCalls struct {
	syn   *delimitedSyntax
	state int // 0 content, 1 section (between calls), 2 name, 3 arguments
	buf   []byte
	calls int
	args  bool // some arguments of the open call were sent
	raw   []byte
}

func (p *delimitedCalls) Feed(text []byte) []Event {
	p.buf = append(p.buf, text...)
	return p.run(nil, false)
}

func (p *delimitedCalls) Finish() []Event {
	evs := p.run(nil, true)
	switch p.state {
	case 0:
		evs = textEvent(evs, EventText, p.buf)
	case 3:
		evs = p.sendArgs(evs, p.buf)
		evs = p.endCall(evs)
	}
	p.buf = nil
	return evs
}

func (p *delimitedCalls) sendArgs(evs []Event, b []byte) []Event {
	if !p.args {
		b = bytes.TrimLeft(b, " \t\r\n")
	}
	if len(b) == 0 {
		return evs
	}
	p.args = true
	return append(evs, Event{Kind: EventCallArgs, Index: p.calls - 1, Text: append([]byte(nil), b...)})
}

func (p *delimitedCalls) endCall(evs []Event) []Event {
	if !p.args {
		evs = append(evs, Event{Kind: EventCallArgs, Index: p.calls - 1, Text: []byte("{}")})
	}
	return append(evs, Event{Kind: EventCallEnd, Index: p.calls - 1})
}

func (p *delimitedCalls) run(evs []Event, final bool) []Event {
	s := p.syn
	for {
		switch p.state {
		case 0:
			at, _ := firstMarker(p.buf, s.sectionBegin, s.callBegin)
			if at < 0 {
				keep := partialSuffix(p.buf, s.sectionBegin, s.callBegin)
				evs = textEvent(evs, EventText, p.buf[:len(p.buf)-keep])
				p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
				return evs
			}
			evs = textEvent(evs, EventText, p.buf[:at])
			p.raw = p.raw[:0]
			if bytes.HasPrefix(p.buf[at:], []byte(s.sectionBegin)) {
				p.raw = append(p.raw, s.sectionBegin...)
			}
			p.buf = p.buf[at+len(p.raw):]
			p.state = 1
		case 1:
			t := bytes.TrimLeft(p.buf, " \t\r\n")
			switch {
			case bytes.HasPrefix(t, []byte(s.callBegin)):
				p.raw = append(p.raw, p.buf[:len(p.buf)-len(t)+len(s.callBegin)]...)
				p.buf = t[len(s.callBegin):]
				p.state = 2
			case bytes.HasPrefix(t, []byte(s.sectionEnd)):
				p.buf = t[len(s.sectionEnd):]
				p.state = 0
			case !final && (len(t) == 0 || bytes.HasPrefix([]byte(s.callBegin), t) || bytes.HasPrefix([]byte(s.sectionEnd), t)):
				return evs
			default:
				p.state = 0 // text after the calls is the answer's
			}
		case 2:
			at := bytes.Index(p.buf, []byte(s.argsBegin))
			if at < 0 {
				if !final && len(p.buf) < maxNameLen {
					return evs
				}
				evs = textEvent(evs, EventText, append(p.raw, p.buf...))
				p.buf, p.state = p.buf[:0], 0
				return evs
			}
			name := s.name(strings.TrimSpace(string(p.buf[:at])))
			if name == "" {
				evs = textEvent(evs, EventText, append(p.raw, p.buf[:at+len(s.argsBegin)]...))
				p.buf, p.state = p.buf[at+len(s.argsBegin):], 0
				continue
			}
			evs = append(evs, Event{Kind: EventCallStart, Index: p.calls, Name: name})
			p.calls++
			p.args, p.raw = false, p.raw[:0]
			p.buf, p.state = p.buf[at+len(s.argsBegin):], 3
		case 3:
			at := bytes.Index(p.buf, []byte(s.callEnd))
			if at < 0 {
				keep := partialSuffix(p.buf, s.callEnd)
				evs = p.sendArgs(evs, bytes.TrimRight(p.buf[:len(p.buf)-keep], " \t\r\n"))
				// Trailing blanks wait: they end the arguments or not.
				rest := p.buf[len(bytes.TrimRight(p.buf[:len(p.buf)-keep], " \t\r\n")):]
				p.buf = append(p.buf[:0], rest...)
				return evs
			}
			evs = p.sendArgs(evs, bytes.TrimRight(p.buf[:at], " \t\r\n"))
			evs = p.endCall(evs)
			p.buf, p.state = p.buf[at+len(s.callEnd):], 1
		}
	}
}
