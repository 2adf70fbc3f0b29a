package server

import (
	"errors"
	"net/http"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
)

// statusClientClosed is recorded (never sent: nobody listens) for requests
// whose client went away, as nginx does.
const statusClientClosed = 499

// writeError sends an OpenAI-shaped error.
func (s *Server) writeError(w http.ResponseWriter, e *openai.Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) && h.Get("Retry-After") == "" {
		// Every 429 and 503 is retryable: say when (the default unless
		// the caller knows better).
		h.Set("Retry-After", s.retryAfter)
	}
	w.WriteHeader(e.Status)
	b := e.JSON()
	b = append(b, '\n')
	_, _ = w.Write(b)
	if e.Status >= 500 {
		s.log.Warn("request failed", "status", e.Status, "err", e.Message)
	}
}

// submitError maps an engine.Submit error to its HTTP status.
func submitError(err error, promptParam string) *openai.Error {
	var inv *engine.InvalidRequestError
	switch {
	case errors.As(err, &inv):
		param := inv.Field
		if param == "prompt" {
			param = promptParam
		}
		return openai.BadRequest(param, "%s", err.Error())
	case errors.Is(err, engine.ErrQueueFull):
		return openai.QueueFull()
	case errors.Is(err, engine.ErrDraining):
		return openai.Unavailable("the server is shutting down; retry on another replica")
	case errors.Is(err, engine.ErrNotRunning):
		return openai.Unavailable("the engine is not running")
	}
	return openai.Internal(err.Error())
}

// finishError is the error of a request the engine ended without a result:
// aborted at the drain deadline, cancelled, failed by its own output
// constraint (a 400: the request's grammar is at fault, not the model), or
// failed by the executor.
func (s *Server) finishError(c engine.Chunk) *openai.Error {
	switch {
	case c.FinishReason == completion.Error && errors.Is(c.Err, grammar.ErrTooLarge):
		return openai.BadRequest("", "%v", c.Err)
	case c.FinishReason == completion.Cancelled && errors.Is(c.Err, engine.ErrStopped):
		return openai.Unavailable("the server shut down before the request finished")
	case c.FinishReason == completion.Cancelled && errors.Is(c.Err, engine.ErrDraining):
		return drainedError()
	case c.FinishReason == completion.Cancelled:
		return cancelled()
	}
	msg := "the model failed to generate a response"
	if c.Err != nil {
		msg += ": " + c.Err.Error()
	}
	return openai.Internal(msg)
}

// drainedError is the error of a request the pod had not begun when it
// began to drain.
func drainedError() *openai.Error {
	return openai.Unavailable("this pod is shutting down and the request had not started; retry")
}

// finishReasonAbort is the finish_reason of a streamed choice the server
// ended without a result (vLLM's name); its error event follows.
const finishReasonAbort = "abort"

// jsonNull is the stop_reason of an aborted choice.
var jsonNull = []byte("null")

// cancelled is the error of a request whose client went away (recorded,
// never read).
func cancelled() *openai.Error {
	return &openai.Error{Status: statusClientClosed, Type: openai.TypeInvalidRequest, Message: "request cancelled"}
}
