package openai

import (
	"math/rand/v2"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/chatformat"
)

// Tool-call output formats (how the model writes calls; the server reads
// the format from the chat template). chatformat has them all; these are
// the names the older callers use.
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

// Piece is what one piece of output releases: answer text, reasoning
// text and call pieces, in that order within the piece.
type Piece struct {
	Content, Reasoning []byte
	Deltas             []ToolCallDelta
}

// ToolStreamer separates a model's output into content, reasoning and
// tool calls as it arrives, with the model's chat format (chatformat), so
// content streams at once and calls stream as delta.tool_calls pieces (id
// and name first, then argument fragments), the way the official clients
// assemble them. The whole-response path feeds all the text at once: both
// paths agree by construction.
type ToolStreamer struct {
	p     chatformat.Parser
	idLen int
	calls []ToolCall
	// reasoning is all the reasoning read so far.
	reasoning strings.Builder
}

// NewToolStreamer starts reading one output written in the tool-call
// format named format (no reasoning); an unknown or empty format reads
// everything as content.
func NewToolStreamer(format string) *ToolStreamer {
	var spec chatformat.Spec
	if f, err := chatformat.Lookup(format); err == nil {
		spec.Tools = f
	}
	return NewOutputReader(spec, chatformat.Options{Calls: true})
}

// NewOutputReader starts reading one output in spec's formats.
func NewOutputReader(spec chatformat.Spec, o chatformat.Options) *ToolStreamer {
	idLen := 24
	if spec.Tools != nil && spec.Tools.CallIDLen > 0 {
		idLen = spec.Tools.CallIDLen
	}
	return &ToolStreamer{p: spec.NewParser(o), idLen: idLen}
}

// Read takes new output text and returns what it releases.
func (t *ToolStreamer) Read(text []byte) Piece {
	return t.piece(t.p.Feed(text))
}

// FinishRead ends the output: what was held back, and whether any call
// was found.
func (t *ToolStreamer) FinishRead() (Piece, bool) {
	pc := t.piece(t.p.Finish())
	return pc, len(t.calls) > 0
}

// Feed is Read without the reasoning (kept in Reasoning).
func (t *ToolStreamer) Feed(text []byte) (content []byte, deltas []ToolCallDelta) {
	pc := t.Read(text)
	return pc.Content, pc.Deltas
}

// Finish is FinishRead without the reasoning.
func (t *ToolStreamer) Finish() (content []byte, deltas []ToolCallDelta, called bool) {
	pc, called := t.FinishRead()
	return pc.Content, pc.Deltas, called
}

// Reasoning is all the reasoning read so far.
func (t *ToolStreamer) Reasoning() string { return t.reasoning.String() }

func (t *ToolStreamer) piece(evs []chatformat.Event) Piece {
	var pc Piece
	for _, e := range evs {
		switch e.Kind {
		case chatformat.EventText:
			pc.Content = append(pc.Content, e.Text...)
		case chatformat.EventReasoning:
			pc.Reasoning = append(pc.Reasoning, e.Text...)
			t.reasoning.Write(e.Text)
		case chatformat.EventCallStart:
			id := newCallID(t.idLen)
			t.calls = append(t.calls, ToolCall{ID: id, Type: "function", Function: ToolCallFunction{Name: e.Name}})
			pc.Deltas = append(pc.Deltas, ToolCallDelta{Index: e.Index, ID: id, Name: e.Name, First: true})
		case chatformat.EventCallArgs:
			if e.Index < len(t.calls) {
				t.calls[e.Index].Function.Arguments += string(e.Text)
			}
			pc.Deltas = append(pc.Deltas, ToolCallDelta{Index: e.Index, Arguments: string(e.Text)})
		}
	}
	return pc
}

// Calls returns the calls parsed (after Finish).
func (t *ToolStreamer) Calls() []ToolCall {
	out := make([]ToolCall, len(t.calls))
	for i, c := range t.calls {
		out[i] = c
		if out[i].Function.Arguments == "" {
			out[i].Function.Arguments = "{}"
		}
	}
	return out
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
