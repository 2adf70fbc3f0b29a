// Package chatformat is the one place that knows how each model family
// writes tool calls and reasoning in its output: detection from the chat
// template's source, a streaming parser (text in, events out), the tokens
// that end a generation and the shape a forced call is constrained to.
// Each format is one file; vLLM's tool and reasoning parser registries and
// llama.cpp's common/chat.cpp are the anchors.
package chatformat

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// EventKind says what an Event carries.
type EventKind uint8

// Event kinds.
const (
	// EventText is answer text (content).
	EventText EventKind = iota
	// EventReasoning is reasoning text, outside the answer.
	EventReasoning
	// EventCallStart opens call Index with its Name.
	EventCallStart
	// EventCallArgs appends Text to call Index's JSON arguments.
	EventCallArgs
	// EventCallEnd closes call Index: its arguments are complete.
	EventCallEnd
)

// Event is one piece of parsed output.
type Event struct {
	Kind EventKind
	// Index is the call's position among the output's calls.
	Index int
	// Name is the called function (EventCallStart).
	Name string
	// Text is the text, reasoning or arguments fragment; the parser does
	// not keep it.
	Text []byte
}

// Parser reads one generation as it arrives. Feed takes the next piece of
// output and returns what it completes; a marker cut by the piece's end is
// held back until the next piece decides it. Finish ends the output and
// flushes what is held. Markup that does not parse is returned as text;
// a parser never fails. A Parser serves one output and is not safe for
// concurrent use.
type Parser interface {
	Feed(text []byte) []Event
	Finish() []Event
}

// Tool is a tool the request offers: values written as untyped text
// (Qwen3-Coder's and GLM's XML) are converted with its parameters schema.
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// Options configure a parser for one request.
type Options struct {
	// Calls: the request offers tools, so call markup is read as calls.
	// Without it a tool-call format's markup is text.
	Calls bool
	// Tools are the offered tools (for typed values).
	Tools []Tool
	// Reasoning: reasoning markup is read as reasoning.
	Reasoning bool
	// InReasoning: the prompt ended inside an opened reasoning block
	// (the template's generation prompt wrote "<think>"), so the output
	// starts as reasoning.
	InReasoning bool
}

// Forced is the shape the constrained decoder writes a call in, for
// tool_choice required or a named function.
type Forced struct {
	// JSON: each call is Prefix + {"name": …, "<ArgsKey>": {…}} + Suffix,
	// joined by Separator, the list inside Open and Close.
	JSON *JSONShape
	// XML: each call is written with one tag pair per argument.
	XML *XMLShape
	// Header: the name in a header, the JSON arguments as the body.
	Header *HeaderShape
	// Pythonic: a Python call list with keyword arguments.
	Pythonic *PythonicShape
	// SpecialTokens are the special tokens the shape's markup is made
	// of: the constrained decoder may write each as its one token.
	SpecialTokens []string
}

// HeaderShape is a call written as Open + name + NameEnd + {arguments} +
// Close, calls joined by Separator, the list between Begin and End.
type HeaderShape struct {
	Begin, End                      string
	Open, NameEnd, Close, Separator string
}

// JSONShape is a call written as a JSON object.
type JSONShape struct {
	Open, Close, Prefix, Suffix, Separator, ArgsKey string
}

// XMLShape is a call written as Open + name + NameEnd, then per argument
// ArgOpen + key + ArgKeyEnd + value + ArgClose, then Close; calls are
// joined by Separator. String values are the raw text (never containing
// ArgClose's tag); other values are JSON.
type XMLShape struct {
	Open, NameEnd, ArgOpen, ArgKeyEnd, ArgClose, Close, Separator string
	// ValueTag is the closing tag a string value may not contain.
	ValueTag string
}

// Format is how one model family writes tool calls (and, for harmony,
// reasoning).
type Format struct {
	// Name is the format's name (the --tool-call-parser value).
	Name string
	// detect reports whether a template's source writes this format.
	detect func(src string) bool
	// calls starts the call parser of a request's content.
	calls func(o *Options) Parser
	// callOpen are the markers that start a call in content: an output
	// that opened reasoning in the prompt leaves it at one (Qwen3.5 may
	// call a tool without closing its reasoning).
	callOpen []string
	// ownsReasoning: the format's parser reads reasoning itself (harmony).
	ownsReasoning bool
	// EndTokens are tokens that end a generation in this format, besides
	// the vocabulary's EOS; NotEndTokens must not (gpt-oss's <|end|> ends
	// a message, not the turn).
	EndTokens, NotEndTokens []string
	// KeepSpecialTokens: the markup is special tokens, so the output must
	// keep their text to be parsed.
	KeepSpecialTokens bool
	// CallIDLen is the length of the random part of call ids (Mistral's
	// template requires 9 characters and no "call_" prefix).
	CallIDLen int
	// Forced is the shape of forced calls; nil when they cannot be
	// enforced in this format.
	Forced *Forced
}

// Reasoning parser names.
const (
	// ReasoningNone: the model writes no reasoning markup.
	ReasoningNone = ""
	// ReasoningThink: <think>…</think> (Qwen3, DeepSeek-R1, GLM, …).
	ReasoningThink = "think"
	// ReasoningHarmony: gpt-oss's analysis channel (read by the harmony
	// format's parser).
	ReasoningHarmony = "harmony"
)

// formats in detection order: the first whose detect matches a template
// wins, so more specific markup comes before the markers it contains
// (Qwen3-Coder's XML and GLM's calls are inside <tool_call> too).
var formats = []*Format{harmony, qwen3Coder, glm45, minimaxM2, deepseekR1, deepseekV31, kimiK2, mistralArgs, mistral, lfm2, pythonic, hermes, llama3JSON}

// Names lists the tool-call formats, sorted.
func Names() []string {
	out := make([]string, 0, len(formats))
	for _, f := range formats {
		out = append(out, f.Name)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the format named name.
func Lookup(name string) (*Format, error) {
	for _, f := range formats {
		if f.Name == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("unknown tool-call format %q (known: %s)", name, strings.Join(Names(), ", "))
}

// ReasoningNames lists the reasoning parsers.
func ReasoningNames() []string { return []string{ReasoningThink, ReasoningHarmony} }

// Spec is the formats a model's output is read with.
type Spec struct {
	// Tools is the tool-call format; nil when the template knows none.
	Tools *Format
	// Reasoning is the reasoning parser (Reasoning* constants).
	Reasoning string
}

// ToolsName is the tool-call format's name, "" for none.
func (s Spec) ToolsName() string {
	if s.Tools == nil {
		return ""
	}
	return s.Tools.Name
}

// Detect reads a chat template's source for the formats its model writes.
func Detect(src string) Spec {
	var s Spec
	for _, f := range formats {
		if f.detect(src) {
			s.Tools = f
			break
		}
	}
	switch {
	case s.Tools != nil && s.Tools.ownsReasoning:
		s.Reasoning = ReasoningHarmony
	case strings.Contains(src, "<think>") && strings.Contains(src, "</think>"):
		s.Reasoning = ReasoningThink
	}
	return s
}

// Override replaces the detected formats by the ones named (the runtime's
// --tool-call-parser and --reasoning-parser); "" keeps the detected one,
// "none" removes it.
func (s Spec) Override(tools, reasoning string) (Spec, error) {
	switch tools {
	case "":
	case "none":
		s.Tools = nil
	default:
		f, err := Lookup(tools)
		if err != nil {
			return s, err
		}
		s.Tools = f
	}
	switch reasoning {
	case "":
	case "none":
		s.Reasoning = ReasoningNone
	default:
		if !slices.Contains(ReasoningNames(), reasoning) {
			return s, fmt.Errorf("unknown reasoning parser %q (known: %s)", reasoning, strings.Join(ReasoningNames(), ", "))
		}
		s.Reasoning = reasoning
	}
	harmonyTools := s.Tools != nil && s.Tools.ownsReasoning
	if (s.Reasoning == ReasoningHarmony && !harmonyTools) || (harmonyTools && s.Reasoning == ReasoningThink) {
		return s, fmt.Errorf("reasoning parser %q and tool-call format %q do not go together: harmony reasoning is read only with harmony tool calls", s.Reasoning, s.ToolsName())
	}
	return s, nil
}

// Thinks reports whether the model writes reasoning.
func (s Spec) Thinks() bool { return s.Reasoning != ReasoningNone }

// EndTokens are the texts of the tokens that end a generation in the
// spec's formats; NotEndTokens those that must not.
func (s Spec) EndTokens() (end, notEnd []string) {
	if s.Tools == nil {
		return nil, nil
	}
	return s.Tools.EndTokens, s.Tools.NotEndTokens
}

// NewParser starts reading one output.
func (s Spec) NewParser(o Options) Parser {
	if s.Tools != nil && s.Tools.ownsReasoning {
		return s.Tools.calls(&o)
	}
	var inner Parser = &plainText{}
	var callOpen []string
	if s.Tools != nil && o.Calls {
		inner = s.Tools.calls(&o)
		callOpen = s.Tools.callOpen
	}
	if s.Reasoning == ReasoningThink && o.Reasoning {
		return newThinkParser(inner, o.InReasoning, callOpen)
	}
	return inner
}

// plainText is the parser of output with no markup to read.
type plainText struct{}

func (*plainText) Feed(text []byte) []Event {
	if len(text) == 0 {
		return nil
	}
	return []Event{{Kind: EventText, Text: text}}
}

func (*plainText) Finish() []Event { return nil }

// Result is a whole output, parsed.
type Result struct {
	Content, Reasoning string
	Calls              []Call
}

// Call is one complete call.
type Call struct {
	Name string
	// Arguments is the JSON text of the arguments.
	Arguments string
}

// Collect gathers events into a Result.
func (r *Result) Collect(evs []Event) {
	for _, e := range evs {
		switch e.Kind {
		case EventText:
			r.Content += string(e.Text)
		case EventReasoning:
			r.Reasoning += string(e.Text)
		case EventCallStart:
			r.Calls = append(r.Calls, Call{Name: e.Name})
		case EventCallArgs:
			if e.Index < len(r.Calls) {
				r.Calls[e.Index].Arguments += string(e.Text)
			}
		}
	}
}

// Parse reads a whole output with p.
func Parse(p Parser, out string) Result {
	var r Result
	r.Collect(p.Feed([]byte(out)))
	r.Collect(p.Finish())
	return r
}
