package chatformat

import "bytes"

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkParser reads <think>…</think> reasoning (Qwen3, QwQ, DeepSeek-R1,
// GLM 4.5+, MiniMax-M2, Kimi K2 Thinking) ahead of a call parser: the
// output starts in reasoning when the prompt opened it or when its first
// non-blank text is <think>; the reasoning ends at </think> or, when the
// prompt opened it, at the start of a tool call (Qwen3.5 and GLM may call
// without closing it). Everything after is the inner parser's. Reasoning
// and the answer are trimmed of the blanks around them, as vLLM and
// llama.cpp return them.
type thinkParser struct {
	inner    Parser
	callOpen []string
	state    thinkState
	held     []byte
	trim     trimmer
	after    trimmer // the answer's leading blanks after reasoning
	forced   bool
}

type thinkState uint8

const (
	thinkStart thinkState = iota // before the first non-blank text
	thinkIn
	thinkAfter // reasoning closed: the answer's leading blanks go
	thinkDone
)

func newThinkParser(inner Parser, inReasoning bool, callOpen []string) *thinkParser {
	p := &thinkParser{inner: inner, callOpen: callOpen, forced: inReasoning}
	if inReasoning {
		p.state = thinkIn
	}
	return p
}

func (p *thinkParser) Feed(text []byte) []Event {
	buf := append(p.held, text...)
	p.held = nil
	var evs []Event
	for len(buf) > 0 {
		switch p.state {
		case thinkStart:
			t := bytes.TrimLeft(buf, " \t\r\n")
			switch {
			case bytes.HasPrefix(t, []byte(thinkOpen)):
				p.state, buf = thinkIn, t[len(thinkOpen):]
			case len(t) < len(thinkOpen) && bytes.HasPrefix([]byte(thinkOpen), t):
				p.held = append([]byte(nil), buf...)
				return evs
			default:
				p.state = thinkDone
			}
		case thinkIn:
			markers := []string{thinkClose}
			if p.forced {
				markers = append(markers, p.callOpen...)
			}
			at, which := firstMarker(buf, markers...)
			if at < 0 {
				keep := partialSuffix(buf, markers...)
				evs = textEvent(evs, EventReasoning, p.trim.feed(buf[:len(buf)-keep]))
				p.held = append([]byte(nil), buf[len(buf)-keep:]...)
				return evs
			}
			evs = textEvent(evs, EventReasoning, p.trim.feed(buf[:at]))
			if which == thinkClose {
				buf = buf[at+len(thinkClose):]
				p.state = thinkAfter
			} else {
				buf = buf[at:]
				p.state = thinkDone
			}
		case thinkAfter:
			t := p.after.feed(buf)
			if !p.after.started {
				return evs
			}
			// What follows the reasoning goes on whole: only its start
			// is trimmed.
			p.state = thinkDone
			buf = append(t, p.after.blanks...)
		case thinkDone:
			return append(evs, p.inner.Feed(buf)...)
		}
	}
	return evs
}

func (p *thinkParser) Finish() []Event {
	var evs []Event
	if len(p.held) > 0 {
		switch p.state {
		case thinkIn:
			// A cut marker at the end is reasoning text after all.
			evs = textEvent(evs, EventReasoning, p.trim.feed(p.held))
		default:
			evs = append(evs, p.inner.Feed(p.held)...)
		}
		p.held = nil
	}
	return append(evs, p.inner.Finish()...)
}
