package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/chatformat"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
)

// toolCalling is how one chat request's output is read: for tool calls
// when the request offers tools, for reasoning when the model writes it,
// in the model's chat format (chatformat).
type toolCalling struct {
	spec chatformat.Spec
	opts chatformat.Options
	// calls: the request offers tools (else only reasoning is read).
	calls  bool
	legacy bool
	// forced: constrained decoding enforces a call (tool_choice required or
	// a named function), so the whole output is the template's call markup.
	forced bool
}

// reader starts reading one output.
func (tc *toolCalling) reader() *openai.ToolStreamer {
	return openai.NewOutputReader(tc.spec, tc.opts)
}

// forcedShape is the output shape the constrained decoder writes for
// tool_choice required or a named function, in the model's format: the
// form its template shows the model.
func forcedShape(f *chatformat.Format) func(ctx context.Context, tools []grammar.ToolSpec, parallel bool) (*grammar.Grammar, []string, error) {
	switch {
	case f.Forced == nil:
		return nil
	case f.Forced.JSON != nil:
		j := f.Forced.JSON
		shape := grammar.ToolCallFormat{Open: j.Open, Close: j.Close, Prefix: j.Prefix, Suffix: j.Suffix, Separator: j.Separator, ArgsKey: j.ArgsKey}
		return func(ctx context.Context, tools []grammar.ToolSpec, parallel bool) (*grammar.Grammar, []string, error) {
			return grammar.CompileToolCalls(ctx, shape, tools, parallel)
		}
	case f.Forced.XML != nil:
		x := f.Forced.XML
		shape := grammar.XMLToolCallFormat{Open: x.Open, NameEnd: x.NameEnd, ArgOpen: x.ArgOpen, ArgKeyEnd: x.ArgKeyEnd,
			ArgClose: x.ArgClose, Close: x.Close, Separator: x.Separator, ValueTag: x.ValueTag}
		return func(ctx context.Context, tools []grammar.ToolSpec, parallel bool) (*grammar.Grammar, []string, error) {
			return grammar.CompileXMLToolCalls(ctx, shape, tools, parallel)
		}
	case f.Forced.Pythonic != nil:
		shape := grammar.PythonicToolCallFormat{Begin: f.Forced.Pythonic.Begin, End: f.Forced.Pythonic.End}
		return func(ctx context.Context, tools []grammar.ToolSpec, parallel bool) (*grammar.Grammar, []string, error) {
			return grammar.CompilePythonicToolCalls(ctx, shape, tools, parallel)
		}
	case f.Forced.Header != nil:
		h := f.Forced.Header
		shape := grammar.HeaderToolCallFormat{Begin: h.Begin, End: h.End, Open: h.Open, NameEnd: h.NameEnd, Close: h.Close, Separator: h.Separator}
		return func(ctx context.Context, tools []grammar.ToolSpec, parallel bool) (*grammar.Grammar, []string, error) {
			return grammar.CompileHeaderToolCalls(ctx, shape, tools, parallel)
		}
	}
	return nil
}

// chatMessages converts the request's messages for the template.
func chatMessages(in []openai.Message) []model.Message {
	msgs := make([]model.Message, len(in))
	for i, m := range in {
		mm := model.Message{Role: m.Role, Content: m.Content.Text, ContentNull: m.Content.Null || (m.Content.Text == "" && (len(m.ToolCalls) > 0 || m.FunctionCall != nil)), Name: m.Name, ToolCallID: m.ToolCallID,
			ReasoningContent: m.ReasoningText()}
		for _, tc := range m.ToolCalls {
			mm.ToolCalls = append(mm.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if m.FunctionCall != nil {
			mm.ToolCalls = append(mm.ToolCalls, model.ToolCall{Name: m.FunctionCall.Name, Arguments: m.FunctionCall.Arguments})
		}
		if m.Role == "function" { // legacy function result
			mm.Role = "tool"
		}
		msgs[i] = mm
	}
	return msgs
}

// planTools resolves the request's tool fields into the chat to render,
// the output reading and, for required or named choices, the grammar
// that enforces a call. Errors are 400s naming the field.
//
// Tool parameters compile leniently: keywords the decoder cannot enforce
// are dropped, named in h's SchemaDroppedHeader and logged. The compile
// stops when ctx (the request's) ends.
func (s *Server) planTools(ctx context.Context, h http.Header, req *openai.ChatRequest, chat *model.Chat, gen *job) *openai.Error {
	plan, apiErr := req.ToolFields.Resolve()
	if apiErr != nil || plan == nil {
		return apiErr
	}
	param, field := "tool_choice", "tools"
	if plan.Legacy {
		param, field = "function_call", "functions"
	}
	if plan.Choice == openai.ToolChoiceNone {
		// The model is not to call tools: it is not shown them either.
		return nil
	}
	for _, t := range plan.Tools {
		chat.Tools = append(chat.Tools, t.Raw)
	}
	f := s.format.Tools
	if f == nil {
		return openai.BadRequest("tools", "the model's chat template has no tool-call format this server reads (known: %s; --tool-call-parser names one)", strings.Join(chatformat.Names(), ", "))
	}
	format := f.Name
	gen.tools = &toolCalling{spec: s.format, calls: true, legacy: plan.Legacy}
	for _, t := range plan.Tools {
		gen.tools.opts.Tools = append(gen.tools.opts.Tools, chatformat.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
	}
	gen.tools.opts.Calls = true
	if plan.Choice != openai.ToolChoiceRequired && plan.Choice != openai.ToolChoiceNamed {
		return nil
	}
	gen.tools.forced = true
	if gen.grammar != nil {
		return openai.BadRequest(param, "%s %s and a structured output format both constrain the output; give one", param, plan.Choice)
	}
	var specs []grammar.ToolSpec
	var names []string
	for _, t := range plan.Tools {
		if plan.Choice == openai.ToolChoiceNamed && t.Function.Name != plan.Named {
			continue
		}
		specs = append(specs, grammar.ToolSpec{Name: t.Function.Name, Parameters: t.Function.Parameters})
		params := string(t.Function.Parameters)
		if canon, err := grammar.CanonicalJSON(t.Function.Parameters); err == nil {
			params = canon // tool lists that differ only in spacing share an entry
		}
		names = append(names, t.Function.Name+"\x00"+params)
	}
	compile := forcedShape(f)
	if compile == nil {
		return openai.BadRequest(param, "%s %s: calls in the model's tool format %q cannot be enforced", param, plan.Choice, format)
	}
	parallel := plan.Parallel && plan.Choice == openai.ToolChoiceRequired
	key := "tools\x00" + format + "\x00" + map[bool]string{true: "p", false: "1"}[parallel] + "\x00" + strings.Join(names, "\x01")
	if s.grammars.size <= 0 {
		return openai.BadRequest(param, "enforcing tool calls needs the model's vocabulary size, which this server was not given")
	}
	specials := f.Forced.SpecialTokens
	if len(specials) > 0 {
		key += "\x00specials\x00" + strings.Join(specials, "\x01")
	}
	out, err := s.grammars.getWith(ctx, key, specials, func(ctx context.Context) (*grammar.Grammar, []string, error) {
		return compile(ctx, specs, parallel)
	})
	if err != nil {
		var te *grammar.ToolError
		if errors.As(err, &te) {
			return openai.BadRequest(field, "%s: enforcing %s %s: %v", field, param, plan.Choice, err)
		}
		return openai.BadRequest(param, "%s: %v", param, err)
	}
	gen.grammar = out.g
	gen.grammarSpecials = specials
	s.reportDropped(h, field, out.dropped)
	return nil
}

// finishReason is the finish reason of an output that called tools.
func (tc *toolCalling) finishReason() string {
	if tc.legacy {
		return "function_call"
	}
	return "tool_calls"
}

// readCalls splits a whole output into content, reasoning and calls.
func (tc *toolCalling) readCalls(text string) (content, reasoning string, calls []openai.ToolCall) {
	ts := tc.reader()
	c1, _ := ts.Feed([]byte(text))
	c2, _, called := tc.finish(ts)
	content = string(c1) + string(c2)
	if !called {
		if tc.forced {
			return "", ts.Reasoning(), nil
		}
		return content, ts.Reasoning(), nil
	}
	return strings.TrimSpace(content), ts.Reasoning(), ts.Calls()
}

// finish ends ts's reading of an output (ToolStreamer.Finish). An enforced
// call's output is all the template's markup: when it holds no call
// (max_tokens cut it, even inside its marker, which ts held back as a
// possible start of one) none of it is content.
func (tc *toolCalling) finish(ts *openai.ToolStreamer) (content []byte, deltas []openai.ToolCallDelta, called bool) {
	content, deltas, called = ts.Finish()
	if tc.forced && !called {
		content = nil
	}
	return content, deltas, called
}

// finishRead is finish with the reasoning held back to the end.
func (tc *toolCalling) finishRead(ts *openai.ToolStreamer) (openai.Piece, bool) {
	pc, called := ts.FinishRead()
	if tc.forced && !called {
		pc.Content = nil
	}
	return pc, called
}

// mergeDeltas joins consecutive pieces of the same call, so a chunk
// carries each call once.
func mergeDeltas(ds []openai.ToolCallDelta) []openai.ToolCallDelta {
	out := ds[:0]
	for _, d := range ds {
		if n := len(out); n > 0 && out[n-1].Index == d.Index && !d.First {
			out[n-1].Arguments += d.Arguments
			continue
		}
		out = append(out, d)
	}
	return out
}
