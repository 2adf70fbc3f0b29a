package chatformat

import (
	"bytes"
	"strings"
)

// maxNameLen bounds the text read as a function's name before markup
// that names none is taken as text.
const maxNameLen = 256

// xmlSyntax is the tags of a format that writes each argument in a tag
// pair of its own; xmlCalls reads them.
//
// Qwen3-Coder / Qwen3.5:
//
//	<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
//
// GLM 4.5 / 4.6 / 4.7:
//
//	<tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call>
type xmlSyntax struct {
	// block and blockEnd wrap calls; blockOptional: a call may start at
	// funcOpen without block (Qwen3-Coder models sometimes skip it).
	block, blockEnd string
	blockOptional   bool
	// funcOpen starts a call, nameEnd ends its name; funcEnd ends the
	// call (blockEnd does too when funcEnd is "").
	funcOpen, nameEnd, funcEnd string
	// argOpen + key + keyEnd + valueOpen + value + argEnd is one
	// argument (blanks between keyEnd and valueOpen allowed).
	argOpen, keyEnd, valueOpen, argEnd string
	// trimValue: one newline after keyEnd and one before argEnd belong to
	// the markup, not the value.
	trimValue bool
}

// xmlCalls reads calls written in an xmlSyntax. Text before a call is
// content, as it streamed (the server trims the content of an answer that called); text after a call that starts
// no new one is content too. Markup that does not parse as a call is
// returned as text; a call the output cut short keeps the arguments it
// completed.
type xmlCalls struct {
	syn   *xmlSyntax
	tools []Tool

	state   xmlState
	buf     []byte // unread output
	block   []byte // the markup of the current block, until a call opens in it
	calls   int
	args    argsWriter
	key     []byte
	inBlock bool
}

type xmlState uint8

const (
	xmlContent   xmlState = iota
	xmlBlock              // inside a block, before a call
	xmlName               // after funcOpen, reading the name
	xmlArgs               // inside a call, between arguments
	xmlKey                // after argOpen, reading the key
	xmlValue              // reading a value
	xmlArgsClose          // after a call's end, before its block's end
	xmlValueOpen          // after a key, before the value's tag
)

func newXMLCalls(syn *xmlSyntax, o *Options) *xmlCalls {
	return &xmlCalls{syn: syn, tools: o.Tools}
}

func (p *xmlCalls) Feed(text []byte) []Event {
	p.buf = append(p.buf, text...)
	return p.run(nil, false)
}

func (p *xmlCalls) Finish() []Event {
	evs := p.run(nil, true)
	switch p.state {
	case xmlContent:
		evs = textEvent(evs, EventText, p.buf)
	case xmlBlock, xmlName:
		// A block cut before its call's name is the template's markup,
		// not text; a block with other text in it is text.
		if len(bytes.TrimSpace(p.buf)) > 0 && !bytes.HasPrefix([]byte(p.syn.funcOpen), bytes.TrimSpace(p.buf)) && p.state == xmlBlock {
			evs = textEvent(evs, EventText, append(p.block, p.buf...))
		}
	case xmlKey, xmlArgs, xmlValueOpen:
		evs = p.endCall(evs)
	case xmlValue:
		v := p.buf
		if p.syn.trimValue {
			v = bytes.TrimPrefix(v, []byte("\n"))
		}
		evs = append(evs, Event{Kind: EventCallArgs, Index: p.calls - 1, Text: p.args.arg(string(p.key), string(v))})
		evs = p.endCall(evs)
	}
	p.buf = nil
	return evs
}

func (p *xmlCalls) endCall(evs []Event) []Event {
	evs = append(evs, Event{Kind: EventCallArgs, Index: p.calls - 1, Text: p.args.end()})
	return append(evs, Event{Kind: EventCallEnd, Index: p.calls - 1})
}

// run reads what p.buf completes.
func (p *xmlCalls) run(evs []Event, final bool) []Event {
	s := p.syn
	for {
		switch p.state {
		case xmlContent:
			opens := []string{s.block}
			if s.blockOptional {
				opens = append(opens, s.funcOpen)
			}
			at, which := firstMarker(p.buf, opens...)
			if at < 0 {
				keep := partialSuffix(p.buf, opens...)
				evs = textEvent(evs, EventText, p.buf[:len(p.buf)-keep])
				p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
				return evs
			}
			evs = textEvent(evs, EventText, p.buf[:at])
			if which == s.block {
				p.block = append(p.block[:0], s.block...)
				p.buf = p.buf[at+len(s.block):]
				p.state = xmlBlock
			} else {
				p.block = p.block[:0]
				p.buf = p.buf[at+len(s.funcOpen):]
				p.state = xmlName
			}
		case xmlBlock:
			t := bytes.TrimLeft(p.buf, " \t\r\n")
			switch {
			case s.funcOpen != "" && bytes.HasPrefix(t, []byte(s.funcOpen)):
				p.block = append(p.block, p.buf[:len(p.buf)-len(t)+len(s.funcOpen)]...)
				p.buf = t[len(s.funcOpen):]
				p.state = xmlName
			case s.funcOpen == "" && len(t) > 0:
				// GLM: the name follows the block's tag directly.
				p.block = append(p.block, p.buf[:len(p.buf)-len(t)]...)
				p.buf = t
				p.state = xmlName
			case len(t) == 0 || bytes.HasPrefix([]byte(s.funcOpen), t):
				return evs // wait for more
			default:
				// Not a call: the block's markup is text.
				evs = textEvent(evs, EventText, p.block)
				p.block = p.block[:0]
				p.state = xmlContent
			}
		case xmlName:
			ends := []string{s.nameEnd}
			if s.funcOpen == "" {
				// GLM writes a call with no arguments as <tool_call>NAME</tool_call>,
				// and 4.7 puts the first <arg_key> right after the name.
				ends = append(ends, s.blockEnd, s.argOpen)
			}
			at, which := firstMarker(p.buf, ends...)
			if at < 0 && !final && len(p.buf) < maxNameLen {
				return evs
			}
			name := ""
			if at >= 0 {
				name = string(bytes.TrimSpace(p.buf[:at]))
			}
			if name == "" || strings.ContainsAny(name, "<> \t\r\n") {
				// No name: the markup is text.
				evs = textEvent(evs, EventText, p.block)
				p.block = p.block[:0]
				p.state = xmlContent
				continue
			}
			p.block = p.block[:0]
			p.args = argsWriter{types: paramTypes(p.tools, name)}
			evs = append(evs, Event{Kind: EventCallStart, Index: p.calls, Name: name})
			p.calls++
			if which == s.nameEnd {
				p.buf = p.buf[at+len(which):]
			} else {
				p.buf = p.buf[at:]
			}
			p.state = xmlArgs
		case xmlArgs:
			ends := []string{s.argOpen, s.blockEnd}
			if s.funcEnd != "" {
				ends = append(ends, s.funcEnd)
			}
			at, which := firstMarker(p.buf, ends...)
			if at < 0 {
				return evs
			}
			p.buf = p.buf[at+len(which):]
			switch which {
			case s.argOpen:
				p.state = xmlKey
			case s.funcEnd:
				evs = p.endCall(evs)
				p.state = xmlArgsClose // the block's end follows
			case s.blockEnd:
				evs = p.endCall(evs)
				p.state = xmlContent
			}
		case xmlArgsClose:
			// The block's end, or another call in the same block
			// (MiniMax writes all its invokes in one).
			t := bytes.TrimLeft(p.buf, " \t\r\n")
			prefixOf := func(m string) bool { return len(t) < len(m) && bytes.HasPrefix([]byte(m), t) }
			if (prefixOf(s.blockEnd) || prefixOf(s.funcOpen)) && !final {
				return evs
			}
			switch {
			case bytes.HasPrefix(t, []byte(s.blockEnd)):
				p.buf = t[len(s.blockEnd):]
				p.state = xmlContent
			case bytes.HasPrefix(t, []byte(s.funcOpen)):
				p.block = p.block[:0]
				p.buf = t[len(s.funcOpen):]
				p.state = xmlName
			default:
				p.state = xmlContent
			}
		case xmlKey:
			at := bytes.Index(p.buf, []byte(s.keyEnd))
			if at < 0 {
				return evs
			}
			p.key = append(p.key[:0], bytes.TrimSpace(p.buf[:at])...)
			p.buf = p.buf[at+len(s.keyEnd):]
			p.state = xmlValue
			if s.valueOpen != "" {
				p.state = xmlValueOpen
			}
		case xmlValueOpen:
			at := bytes.Index(p.buf, []byte(s.valueOpen))
			if at < 0 {
				return evs
			}
			p.buf = p.buf[at+len(s.valueOpen):]
			p.state = xmlValue
		case xmlValue:
			at := bytes.Index(p.buf, []byte(s.argEnd))
			if at < 0 {
				return evs
			}
			v := p.buf[:at]
			if s.trimValue {
				v = bytes.TrimPrefix(v, []byte("\n"))
				v = bytes.TrimSuffix(v, []byte("\n"))
			}
			evs = append(evs, Event{Kind: EventCallArgs, Index: p.calls - 1, Text: p.args.arg(string(p.key), string(v))})
			p.buf = p.buf[at+len(s.argEnd):]
			p.state = xmlArgs
		}
	}
}
