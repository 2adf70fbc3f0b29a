package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
)

// stream writes a request's output as server-sent events: for chat a role
// chunk first, then one event per batch of new text (whatever the engine
// produced since the previous one), the finish reason, the usage when asked
// for, and "data: [DONE]". A failed write cancels the request. It returns
// the final chunk when the request finished (nil if the client went away)
// and, when keepTokens is set, the output token ids.
//
// With tc set, the text is read for tool calls as it arrives: content
// streams as content, calls as delta.tool_calls pieces, and the finish
// reason of an output that called tools is tool_calls.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, st *engine.Stream, id string, includeUsage, chat, keepTokens bool, tc *toolCalling) (final *engine.Chunk, tokens []int32) {
	ctx := r.Context()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering (nginx)
	w.WriteHeader(http.StatusOK)

	sw := s.newStreamWriter(w, r)
	defer sw.done()
	var werr error
	send := func(ev []byte, flush bool) bool {
		if werr != nil {
			return false
		}
		if werr = sw.write(ev, flush); werr != nil {
			// Its KV blocks are freed within one iteration.
			st.Cancel()
			var stalled *errStalled
			if errors.As(werr, &stalled) {
				s.stalled.WithLabelValues(stalled.reason).Inc()
				s.log.Info("client stopped reading; request cancelled", "id", id, "reason", stalled.reason, "err", werr)
			} else {
				s.log.Debug("stream write failed; request cancelled", "id", id, "err", werr)
			}
			return false
		}
		return true
	}

	enc := openai.NewChunkEncoder(id, s.cfg.ModelName, time.Now().Unix(), chat, includeUsage)
	// The headers go out at once (with the role chunk of a chat), so the
	// client knows its request was accepted before the first token.
	var first []byte
	if chat {
		first = enc.Role()
	}
	if !send(first, true) {
		return nil, nil
	}
	var ts *openai.ToolStreamer
	if tc != nil {
		ts = openai.NewToolStreamer(tc.format)
	}
	// sendText sends content and tool-call pieces; finishing ends the
	// tool reading and returns whether the output called tools.
	sendText := func(text []byte, finishing bool) (called, ok bool) {
		if ts == nil {
			return false, len(text) == 0 || send(enc.Chunk(text, ""), true)
		}
		content, deltas := ts.Feed(text)
		if finishing {
			c2, d2, fin := ts.Finish()
			content, deltas, called = append(content, c2...), append(deltas, d2...), fin
		}
		if len(content) > 0 && !send(enc.Chunk(content, ""), true) {
			return called, false
		}
		if len(deltas) > 0 && !send(enc.ToolCallChunk(mergeDeltas(deltas), tc.legacy), true) {
			return called, false
		}
		return called, true
	}
	for {
		c, err := st.Next(ctx)
		if err != nil { // the client went away
			st.Cancel()
			return nil, nil
		}
		if keepTokens {
			tokens = append(tokens, c.TokenIDs...)
		}
		if !c.Done {
			if len(c.Text) > 0 {
				if _, ok := sendText(c.Text, false); !ok {
					return nil, nil
				}
			}
			continue
		}
		final = &c
		switch c.FinishReason {
		case completion.Stop, completion.Length:
			reason := c.FinishReason.String()
			text := c.Text
			if ts != nil {
				called, ok := sendText(c.Text, true)
				if !ok {
					return final, tokens
				}
				if called && c.FinishReason == completion.Stop {
					reason = tc.finishReason()
				}
				text = nil
			}
			if !send(enc.Chunk(text, reason), false) {
				return final, tokens
			}
		default:
			if len(c.Text) > 0 && !send(enc.Chunk(c.Text, ""), false) {
				return final, tokens
			}
			if !send(enc.Error(s.finishError(c)), false) {
				return final, tokens
			}
		}
		if includeUsage && !send(enc.Usage(usageOf(c.Usage)), false) {
			return final, tokens
		}
		send(openai.Done, true)
		return final, tokens
	}
}
