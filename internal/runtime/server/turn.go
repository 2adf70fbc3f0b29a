package server

import (
	"net/http"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
)

// turnWriter renders one generated reply in the shape of an API other
// than chat completions (OpenAI's Responses, Anthropic's Messages). The
// server reads the engine's output and its tool calls once, in runTurn,
// for every shape; a turnWriter only renders what happened.
//
// While a reply streams, each method appends the server-sent events it
// produces (possibly none) to b and returns it; Body is the whole reply
// of a request that does not stream. A turnWriter serves one request.
type turnWriter interface {
	// Start is the opening of the stream, before any output; the prompt
	// has promptTokens tokens.
	Start(b []byte, promptTokens int) []byte
	// Text is new content (never inside a tool call).
	Text(b, delta []byte) []byte
	// Reasoning is new reasoning text (before the content it leads to).
	Reasoning(b, delta []byte) []byte
	// Call is a piece of a tool call: a call's first piece has its id and
	// name, later ones add to its arguments.
	Call(b []byte, d openai.ToolCallDelta) []byte
	// Finish ends the stream with the whole reply.
	Finish(b []byte, t *openai.Turn) []byte
	// Fail ends the stream with an error (the reply was cut short).
	Fail(b []byte, err *openai.Error) []byte
	// Body is the reply of a request that does not stream.
	Body(t *openai.Turn) any
}

// runTurn runs a job's one sequence and writes its reply through shape,
// streamed or whole. It reports false when the client went away. The
// sequence's final chunk (and its tokens, when the program table needs
// them) are left in q, as stream and respond leave them.
func (s *Server) runTurn(w http.ResponseWriter, r *http.Request, c *openai.Common, j *job, shape turnWriter, q *seq, id string) bool {
	ctx := r.Context()
	var sink *eventSink
	var buf []byte
	// send writes what the shape appended to buf.
	send := func(flush bool) {
		if len(buf) > 0 {
			sink.send(buf, flush)
		}
		buf = buf[:0]
	}
	if c.Stream {
		sink = s.startEvents(w, r, id, q.st.Cancel)
		defer sink.done()
		buf = shape.Start(buf, len(j.prompts[0]))
		send(true)
	}
	failed := func() bool { return sink != nil && sink.err != nil }
	var ts *openai.ToolStreamer
	if j.tools != nil {
		ts = j.tools.reader()
	}
	keepTokens := s.cfg.Programs != nil || len(c.StopTokenIDs) > 0
	var content strings.Builder
	called := false
	for !failed() {
		ch, err := q.st.Next(ctx)
		if err != nil { // the client went away
			q.st.Cancel()
			if !c.Stream {
				w.WriteHeader(statusClientClosed)
			}
			return false
		}
		if keepTokens {
			q.tokens = append(q.tokens, ch.TokenIDs...)
		}
		finishing := ch.Done && (ch.FinishReason == completion.Stop || ch.FinishReason == completion.Length)
		text, deltas, reasoning := ch.Text, []openai.ToolCallDelta(nil), []byte(nil)
		if ts != nil && (!ch.Done || finishing) {
			pc := ts.Read(ch.Text)
			if finishing {
				var end openai.Piece
				end, called = j.tools.finishRead(ts)
				pc.Content, pc.Reasoning, pc.Deltas = append(pc.Content, end.Content...), append(pc.Reasoning, end.Reasoning...), append(pc.Deltas, end.Deltas...)
			}
			text, deltas, reasoning = pc.Content, pc.Deltas, pc.Reasoning
		}
		content.Write(text)
		if c.Stream {
			if len(reasoning) > 0 {
				buf = shape.Reasoning(buf, reasoning)
			}
			if len(text) > 0 {
				buf = shape.Text(buf, text)
			}
			for _, d := range deltas {
				buf = shape.Call(buf, d)
			}
			send(!ch.Done)
		}
		if !ch.Done {
			continue
		}
		final := ch
		final.TokenIDs, final.Text, final.Logprobs = nil, nil, nil
		q.final = &final
		break
	}
	if failed() {
		return true
	}
	s.observeGroups(j, []*seq{q})
	if f := q.final; f.FinishReason != completion.Stop && f.FinishReason != completion.Length {
		if c.Stream {
			buf = shape.Fail(buf, s.finishError(*f))
			send(true)
		} else {
			s.writeError(w, s.finishError(*f))
		}
		return true
	}
	// The shapes' cache-read fields stay, 0 when hits are not reported:
	// the official clients expect them.
	cached, _ := s.cachedTokens(q.final.Usage)
	t := &openai.Turn{Content: content.String(), Finish: q.final.FinishReason.String(), StopMatched: q.final.StopMatched,
		PromptTokens: q.final.Usage.PromptTokens, CompletionTokens: q.final.Usage.CompletionTokens,
		CachedTokens: cached}
	if ts != nil {
		t.Reasoning = ts.Reasoning()
		if t.Reasoning != "" {
			// The reasoning's tokens, counted by tokenizing its text (the
			// markup around it is not counted).
			t.ReasoningTokens = min(len(s.cfg.Codec.Encode(t.Reasoning, false)), t.CompletionTokens)
		}
	}
	if called {
		t.Content = strings.TrimSpace(t.Content)
		t.Calls = ts.Calls()
	}
	if c.Stream {
		buf = shape.Finish(buf, t)
		send(true)
		return true
	}
	writeJSON(w, http.StatusOK, shape.Body(t))
	return true
}
