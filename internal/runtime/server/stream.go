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
func (s *Server) stream(w http.ResponseWriter, r *http.Request, st *engine.Stream, id string, includeUsage, chat, keepTokens bool) (final *engine.Chunk, tokens []int32) {
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
			if len(c.Text) > 0 && !send(enc.Chunk(c.Text, ""), true) {
				return nil, nil
			}
			continue
		}
		final = &c
		switch c.FinishReason {
		case completion.Stop, completion.Length:
			if !send(enc.Chunk(c.Text, c.FinishReason.String()), false) {
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
