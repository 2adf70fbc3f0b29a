package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
)

// contentTypeSSE is every stream's Content-Type: the charset is named, so
// clients that do not assume UTF-8 read non-ASCII text right.
const contentTypeSSE = "text/event-stream; charset=utf-8"

// eventSink writes one streaming response's events under the stall
// bounds. The first failed write cancels the request (its KV blocks are
// freed within one iteration) and is counted when the client stopped
// reading; later sends do nothing.
type eventSink struct {
	s      *Server
	sw     *streamWriter
	id     string
	cancel func()
	err    error
}

// startEvents sends a stream's headers; cancel cancels the request's
// sequences.
func (s *Server) startEvents(w http.ResponseWriter, r *http.Request, id string, cancel func()) *eventSink {
	h := w.Header()
	h.Set("Content-Type", contentTypeSSE)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering (nginx)
	w.WriteHeader(http.StatusOK)
	return &eventSink{s: s, sw: s.newStreamWriter(w, r, cancel), id: id, cancel: cancel}
}

// send writes ev (and flushes); it reports false once a write failed.
func (k *eventSink) send(ev []byte, flush bool) bool {
	if k.err != nil {
		return false
	}
	if k.err = k.sw.write(ev, flush); k.err != nil {
		k.cancel()
		var stalled *errStalled
		if errors.As(k.err, &stalled) {
			k.s.stalled.WithLabelValues(stalled.reason).Inc()
			k.s.log.Info("client stopped reading; request cancelled", "id", k.id, "reason", stalled.reason, "err", k.err)
		} else {
			k.s.log.Debug("stream write failed; request cancelled", "id", k.id, "err", k.err)
		}
		return false
	}
	return true
}

// done stops watching the client and clears the write deadline.
func (k *eventSink) done() { k.sw.done() }

// stream writes a job's output as server-sent events: for chat a role
// chunk per choice first, then one event per batch of new text of a
// choice (whatever the engine produced since the previous one), each
// choice's finish reason, the usage when asked for, and "data: [DONE]". A
// failed write cancels every sequence. Each sequence's final chunk and
// tokens are left in it (final nil if the client went away).
//
// One sequence is read directly, which allocates nothing per token; more
// are read by one goroutine each into a channel.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, c *openai.Common, j *job, seqs []*seq, id string) {
	ctx := r.Context()
	cancelAll := func() {
		for _, q := range seqs {
			q.st.Cancel()
		}
	}
	sink := s.startEvents(w, r, id, cancelAll)
	defer sink.done()
	send := sink.send

	includeUsage := c.IncludeUsage()
	enc := openai.NewChunkEncoder(id, s.cfg.ModelName, time.Now().Unix(), j.chat, includeUsage)
	// The headers go out at once (with the role chunks of a chat), so the
	// client knows its request was accepted before the first token.
	if j.chat {
		for i := range seqs {
			if !send(enc.RoleOf(i), i == len(seqs)-1) {
				return
			}
		}
	} else if !send(nil, true) {
		return
	}
	keepTokens := c.ReturnTokenIDs || s.cfg.Programs != nil || len(c.StopTokenIDs) > 0
	var lpBuf []byte
	errorSent := false
	ev := openai.ChoiceEvent{}
	if j.echo {
		for i, q := range seqs {
			ev = openai.ChoiceEvent{Index: i, Text: []byte(s.cfg.Codec.Decode(j.prompts[q.prompt]))}
			if !send(enc.Choice(&ev), false) {
				return
			}
		}
	}
	// With tools, each choice's text is read for tool calls as it arrives:
	// content streams as content, calls as delta.tool_calls pieces, and the
	// finish reason of an output that called tools is tool_calls.
	var readers []*openai.ToolStreamer
	if j.tools != nil {
		readers = make([]*openai.ToolStreamer, len(seqs))
		for i := range readers {
			readers[i] = j.tools.reader()
		}
	}
	// write sends one engine chunk of choice i; it reports false when the
	// stream must end (a failed write).
	write := func(i int, q *seq, ch *engine.Chunk) bool {
		if keepTokens {
			q.tokens = append(q.tokens, ch.TokenIDs...)
		}
		ev = openai.ChoiceEvent{Index: i, Text: ch.Text, TokenIDs: ch.TokenIDs, HasTokenIDs: c.ReturnTokenIDs}
		if j.lp.On && len(ch.Logprobs) > 0 {
			lpBuf = s.appendLogprobs(lpBuf[:0], j, q, ch)
			ev.Logprobs = lpBuf
		}
		finishing := ch.Done && (ch.FinishReason == completion.Stop || ch.FinishReason == completion.Length)
		if readers != nil && (!ch.Done || finishing) {
			pc := readers[i].Read(ch.Text)
			called := false
			if finishing {
				var end openai.Piece
				end, called = j.tools.finishRead(readers[i])
				pc.Content, pc.Reasoning, pc.Deltas = append(pc.Content, end.Content...), append(pc.Reasoning, end.Reasoning...), append(pc.Deltas, end.Deltas...)
			}
			content, deltas := pc.Content, pc.Deltas
			ev.Text, ev.Reasoning = content, pc.Reasoning
			if len(deltas) > 0 {
				// The content (and the tokens' logprobs and ids) go first,
				// then the call pieces, then the finish reason alone.
				if (len(ev.Text) > 0 || len(ev.Reasoning) > 0 || len(ev.Logprobs) > 0 || ev.HasTokenIDs) && !send(enc.Choice(&ev), false) {
					return false
				}
				if !send(enc.ToolCallChunk(i, mergeDeltas(deltas), j.tools.legacy), !ch.Done) {
					return false
				}
				// What is left is the finish event (token ids already sent).
				ev = openai.ChoiceEvent{Index: i, HasTokenIDs: c.ReturnTokenIDs && ch.Done}
			}
			if called && ch.FinishReason == completion.Stop {
				final := *ch
				final.TokenIDs, final.Text, final.Logprobs = nil, nil, nil
				q.final = &final
				ev.FinishReason = j.tools.finishReason()
				ev.StopReason = appendStopReason(nil, q, c)
				return send(enc.Choice(&ev), len(seqs) > 1)
			}
		}
		if !ch.Done {
			if len(ev.Text) == 0 && len(ev.Reasoning) == 0 && len(ev.Logprobs) == 0 && !ev.HasTokenIDs {
				return true
			}
			return send(enc.Choice(&ev), true)
		}
		final := *ch
		final.TokenIDs, final.Text, final.Logprobs = nil, nil, nil
		q.final = &final
		switch ch.FinishReason {
		case completion.Stop, completion.Length:
			ev.FinishReason = ch.FinishReason.String()
			ev.StopReason = appendStopReason(nil, q, c)
			return send(enc.Choice(&ev), len(seqs) > 1)
		default:
			// Aborted: the choice ends with its text so far and
			// finish_reason "abort", and the stream gets one error event.
			ev.FinishReason = finishReasonAbort
			ev.StopReason = jsonNull
			if !send(enc.Choice(&ev), false) {
				return false
			}
			if errorSent {
				return true
			}
			errorSent = true
			return send(enc.Error(s.finishError(*ch)), len(seqs) > 1)
		}
	}

	if len(seqs) == 1 {
		q := seqs[0]
		for {
			ch, err := q.st.Next(ctx)
			if err != nil { // the client went away
				q.st.Cancel()
				return
			}
			if !write(0, q, &ch) {
				return
			}
			if ch.Done {
				break
			}
		}
	} else if !s.fanIn(ctx, seqs, write) {
		cancelAll()
		return
	}
	s.observeGroups(j, seqs)
	if includeUsage {
		if !send(enc.Usage(s.usageOf(sumUsage(seqs))), false) {
			return
		}
	}
	send(openai.Done, true)
}

// fanIn reads several sequences at once, handing their chunks to write in
// arrival order from this goroutine. It reports false when the client went
// away or a write failed.
func (s *Server) fanIn(ctx context.Context, seqs []*seq, write func(int, *seq, *engine.Chunk) bool) bool {
	type event struct {
		i   int
		ch  engine.Chunk
		err error
	}
	events := make(chan event)
	stop := make(chan struct{})
	defer close(stop)
	for i, q := range seqs {
		go func() {
			for {
				ch, err := q.st.Next(ctx)
				if err == nil {
					// The engine reuses the chunk's buffers on the next call.
					ch.TokenIDs, ch.Text, ch.Logprobs = slices.Clone(ch.TokenIDs), slices.Clone(ch.Text), slices.Clone(ch.Logprobs)
				}
				select {
				case events <- event{i, ch, err}:
				case <-stop:
					return
				}
				if err != nil || ch.Done {
					return
				}
			}
		}()
	}
	for left := len(seqs); left > 0; {
		e := <-events
		if e.err != nil {
			return false
		}
		if !write(e.i, seqs[e.i], &e.ch) {
			return false
		}
		if e.ch.Done {
			left--
		}
	}
	return true
}

// appendStopReason appends the choice's stop_reason as JSON (null when
// none).
func appendStopReason(b []byte, q *seq, c *openai.Common) []byte {
	switch v := stopReason(q, c).(type) {
	case string:
		return openai.AppendJSONString(b, v)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	}
	return append(b, "null"...)
}

// appendLogprobs renders a chunk of sequence q as the choice's
// "logprobs" JSON value; text offsets go on from q's earlier chunks.
func (s *Server) appendLogprobs(b []byte, j *job, q *seq, ch *engine.Chunk) []byte {
	var v any
	if j.chat {
		v = openai.ChatLogprobs{Content: s.chatLogprobs(ch.Logprobs, j.lp)}
	} else {
		v = s.completionLogprobs(ch.Logprobs, j.lp, &q.offsets)
	}
	out, err := json.Marshal(v)
	if err != nil { // cannot happen: finite numbers and strings
		return append(b, "null"...)
	}
	return append(b, out...)
}
