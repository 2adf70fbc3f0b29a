package chatformat

import (
	"bytes"
	"strings"
)

// harmony is gpt-oss's output: messages, each a header and a body.
//
//	<|channel|>analysis<|message|>REASONING<|end|>
//	<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{ARGS}<|call|>
//	<|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
//
// The analysis channel is reasoning, final (and commentary without a
// recipient, a preamble) is the answer, a message to functions.NAME is a
// call whose body is its JSON arguments. A message to another recipient
// (the built-in python or browser tools, which this server does not run)
// is left out, as llama.cpp does. The generation ends at <|call|> or
// <|return|>; <|end|> ends only a message. The markup is special tokens,
// so the output must keep them.
var harmony = &Format{
	Name: "harmony",
	detect: func(src string) bool {
		return strings.Contains(src, "<|channel|>") && strings.Contains(src, "<|message|>")
	},
	calls:             func(o *Options) Parser { return &harmonyParser{calls: o.Calls} },
	ownsReasoning:     true,
	EndTokens:         []string{"<|call|>", "<|return|>"},
	NotEndTokens:      []string{"<|end|>"},
	KeepSpecialTokens: true,
	CallIDLen:         24,
	// One call per generation: the generation prompt opened the
	// assistant's message, and a call ends the turn (<|call|>).
	Forced: &Forced{
		Header:        &HeaderShape{Open: hChannel + "commentary to=functions.", NameEnd: " " + hConstrain + "json" + hMessage},
		SpecialTokens: []string{hChannel, hConstrain, hMessage},
	},
}

const (
	hChannel   = "<|channel|>"
	hMessage   = "<|message|>"
	hStart     = "<|start|>"
	hEnd       = "<|end|>"
	hCall      = "<|call|>"
	hReturn    = "<|return|>"
	hConstrain = "<|constrain|>"
)

// harmonyBodyEnds end a message's body.
var harmonyBodyEnds = []string{hEnd, hCall, hReturn, hStart, hChannel}

// harmonyHeadStarts may begin a message's header.
var harmonyHeadStarts = []string{hChannel, hStart, hConstrain, " to=", "to="}

type harmonyParser struct {
	calls  bool
	inBody bool
	buf    []byte
	// The current message: its kind and, for a call, its index.
	kind  EventKind
	drop  bool
	index int
	n     int
}

func (p *harmonyParser) Feed(text []byte) []Event {
	p.buf = append(p.buf, text...)
	return p.run(nil, false)
}

func (p *harmonyParser) Finish() []Event {
	evs := p.run(nil, true)
	if p.inBody {
		evs = p.body(evs, p.buf)
		evs = p.endMessage(evs)
	} else if t := bytes.TrimSpace(p.buf); len(t) > 0 && !isHarmonyHeaderStart(t) {
		evs = textEvent(evs, EventText, p.buf)
	}
	p.buf = nil
	return evs
}

func isHarmonyHeaderStart(b []byte) bool {
	for _, m := range harmonyHeadStarts {
		if bytes.HasPrefix(b, []byte(m)) || bytes.HasPrefix([]byte(m), b) {
			return true
		}
	}
	return false
}

func (p *harmonyParser) run(evs []Event, final bool) []Event {
	for len(p.buf) > 0 {
		if !p.inBody {
			// Markup left between messages (the end tokens) goes.
			for _, m := range []string{hEnd, hCall, hReturn} {
				p.buf = bytes.TrimPrefix(p.buf, []byte(m))
			}
			if len(p.buf) == 0 {
				return evs
			}
			if !isHarmonyHeaderStart(p.buf) {
				// Text with no header: the answer.
				p.inBody, p.kind, p.drop = true, EventText, false
				continue
			}
			at := bytes.Index(p.buf, []byte(hMessage))
			if at < 0 {
				return evs
			}
			evs = p.header(evs, string(p.buf[:at]))
			p.buf = p.buf[at+len(hMessage):]
			p.inBody = true
			continue
		}
		at, which := firstMarker(p.buf, harmonyBodyEnds...)
		if at < 0 {
			keep := partialSuffix(p.buf, harmonyBodyEnds...)
			evs = p.body(evs, p.buf[:len(p.buf)-keep])
			p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
			return evs
		}
		evs = p.body(evs, p.buf[:at])
		evs = p.endMessage(evs)
		p.buf = p.buf[at:]
		if which != hStart && which != hChannel {
			p.buf = p.buf[len(which):]
		}
		p.inBody = false
	}
	return evs
}

// header reads a message's header: its channel and recipient.
func (p *harmonyParser) header(evs []Event, h string) []Event {
	channel, recipient := "", ""
	for _, part := range strings.Split(h, hChannel)[1:] {
		f := strings.Fields(strings.ReplaceAll(part, hConstrain, " "))
		if len(f) > 0 {
			channel = f[0]
		}
	}
	if i := strings.LastIndex(h, "to="); i >= 0 {
		r := h[i+len("to="):]
		if j := strings.IndexAny(r, " <"); j >= 0 {
			r = r[:j]
		}
		recipient = r
	}
	if recipient == "assistant" {
		recipient = "" // a message addressed back to the assistant
	}
	p.drop = false
	switch {
	case strings.HasPrefix(recipient, "functions.") && p.calls:
		p.kind, p.index = EventCallArgs, p.n
		p.n++
		evs = append(evs, Event{Kind: EventCallStart, Index: p.index, Name: strings.TrimPrefix(recipient, "functions.")})
	case recipient != "":
		p.drop = true
	case channel == "analysis":
		p.kind = EventReasoning
	default:
		p.kind = EventText
	}
	return evs
}

func (p *harmonyParser) body(evs []Event, b []byte) []Event {
	if p.drop || len(b) == 0 {
		return evs
	}
	if p.kind == EventCallArgs {
		return append(evs, Event{Kind: EventCallArgs, Index: p.index, Text: append([]byte(nil), b...)})
	}
	return textEvent(evs, p.kind, b)
}

func (p *harmonyParser) endMessage(evs []Event) []Event {
	if p.kind == EventCallArgs && !p.drop {
		evs = append(evs, Event{Kind: EventCallEnd, Index: p.index})
	}
	p.kind, p.drop = EventText, false
	return evs
}
