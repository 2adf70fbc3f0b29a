package chatformat

import (
	"bytes"
	"strings"
)

// mistralArgs is Mistral's newer [TOOL_CALLS]NAME[ARGS]{…} (Mistral
// Small 3.2, Devstral, Ministral 3), each call after its own
// [TOOL_CALLS].
var mistralArgs = &Format{
	Name:     "mistral_args",
	detect:   func(src string) bool { return strings.Contains(src, "[TOOL_CALLS]") && strings.Contains(src, "[ARGS]") },
	calls:    func(*Options) Parser { return &mistralArgsCalls{} },
	callOpen: []string{"[TOOL_CALLS]"},
	// [TOOL_CALLS] and [ARGS] are special tokens of Mistral's
	// vocabularies: the output keeps them for the reader.
	KeepSpecialTokens: true,
	CallIDLen:         9,
	Forced: &Forced{
		Header:        &HeaderShape{Open: mistralCalls, NameEnd: mistralArgsT},
		SpecialTokens: []string{mistralCalls, mistralArgsT},
	},
}

const (
	mistralCalls = "[TOOL_CALLS]"
	mistralArgsT = "[ARGS]"
)

type mistralArgsCalls struct {
	state int // 0 content, 1 name, 2 args
	buf   []byte
	calls int
	sent  int
}

func (p *mistralArgsCalls) Feed(text []byte) []Event {
	p.buf = append(p.buf, text...)
	return p.run(nil)
}

func (p *mistralArgsCalls) run(evs []Event) []Event {
	for {
		switch p.state {
		case 0:
			at := bytes.Index(p.buf, []byte(mistralCalls))
			if at < 0 {
				keep := partialSuffix(p.buf, mistralCalls)
				evs = textEvent(evs, EventText, p.buf[:len(p.buf)-keep])
				p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
				return evs
			}
			evs = textEvent(evs, EventText, p.buf[:at])
			p.buf = p.buf[at+len(mistralCalls):]
			p.state = 1
		case 1:
			at := bytes.Index(p.buf, []byte(mistralArgsT))
			if at < 0 {
				if len(p.buf) > maxNameLen {
					evs = textEvent(evs, EventText, append([]byte(mistralCalls), p.buf...))
					p.buf, p.state = p.buf[:0], 0
				}
				return evs
			}
			name := strings.TrimSpace(string(p.buf[:at]))
			if name == "" || strings.ContainsAny(name, " \t\r\n{[") {
				evs = textEvent(evs, EventText, append([]byte(mistralCalls), p.buf[:at+len(mistralArgsT)]...))
				p.buf, p.state = p.buf[at+len(mistralArgsT):], 0
				continue
			}
			evs = append(evs, Event{Kind: EventCallStart, Index: p.calls, Name: name})
			p.calls++
			p.buf = bytes.TrimLeft(p.buf[at+len(mistralArgsT):], " \t\r\n")
			p.sent, p.state = 0, 2
		case 2:
			end := jsonValueEnd(p.buf)
			avail := len(p.buf)
			if end >= 0 {
				avail = end
			}
			if avail > p.sent {
				evs = append(evs, Event{Kind: EventCallArgs, Index: p.calls - 1, Text: append([]byte(nil), p.buf[p.sent:avail]...)})
				p.sent = avail
			}
			if end < 0 {
				return evs
			}
			evs = append(evs, Event{Kind: EventCallEnd, Index: p.calls - 1})
			p.buf = bytes.TrimLeft(p.buf[end:], " \t\r\n")
			p.state = 0
		}
	}
}

func (p *mistralArgsCalls) Finish() []Event {
	var evs []Event
	switch p.state {
	case 0:
		evs = textEvent(evs, EventText, p.buf)
	case 2:
		evs = append(evs, Event{Kind: EventCallEnd, Index: p.calls - 1})
	}
	p.buf = nil
	return evs
}
