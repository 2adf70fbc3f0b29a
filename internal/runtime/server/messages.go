package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/anthropic"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// messages answers POST /v1/messages (Anthropic's Messages API): the
// request is translated into a chat request, run through the chat path,
// and its reply written as a Messages reply or event stream. Every error
// it writes, the shared path's included, is in Anthropic's shape: w is
// anthropicShaped (ServeHTTP, for every path under /v1/messages).
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, req, ok := readRequest(s, w, r, anthropic.Parse, func(q *anthropic.Request) string { return q.Model })
	if !ok {
		return
	}
	chat, apiErr := req.ChatRequest()
	if apiErr == nil {
		var j job
		if j, apiErr = s.chatJob(r.Context(), w.Header(), chat, "messages", "max_tokens"); apiErr == nil {
			j.idPrefix = "msg_"
			j.shape = func(id string) turnWriter {
				shape := anthropic.NewMessageShape(id, s.cfg.ModelName)
				shape.OmitThinking = req.OmitsThinking()
				return shape
			}
			s.generate(w, r, body, &chat.Common, j)
			return
		}
	}
	s.writeError(w, apiErr)
}

// countTokens answers POST /v1/messages/count_tokens: the prompt tokens
// of the Messages request, rendered as /v1/messages renders it (errors in
// Anthropic's shape, as for messages).
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	_, req, ok := readRequest(s, w, r, anthropic.ParseCountTokens, func(q *anthropic.Request) string { return q.Model })
	if !ok {
		return
	}
	chat, apiErr := req.ChatRequest()
	var toks []int32
	if apiErr == nil {
		toks, apiErr = s.renderChat(r.Context(), w.Header(), chat, &job{promptParam: "messages"})
	}
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(toks)})
}

// anthropicShaped wraps w in anthropicErrors; finish writes a held error
// (once: calling it again does nothing).
func anthropicShaped(w http.ResponseWriter) (http.ResponseWriter, func()) {
	aw := &anthropicErrors{ResponseWriter: w}
	return aw, aw.finish
}

// anthropicErrors rewrites the OpenAI-shaped JSON errors written through
// it ({"error": {"message", "type", …}}) into Anthropic's shape, keeping
// the status; everything else (replies, streams, errors already in
// Anthropic's shape, as a forwarded request's) passes through unchanged.
// An error body is held until finish.
type anthropicErrors struct {
	http.ResponseWriter
	status int // the held error's status, 0 when none
	buf    bytes.Buffer
}

func (a *anthropicErrors) WriteHeader(code int) {
	if code >= 400 && code != statusClientClosed && strings.HasPrefix(a.Header().Get("Content-Type"), "application/json") {
		a.status = code
		return
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *anthropicErrors) Write(b []byte) (int, error) {
	if a.status != 0 {
		return a.buf.Write(b)
	}
	return a.ResponseWriter.Write(b)
}

// Flush passes through, except while an error body is held.
func (a *anthropicErrors) Flush() {
	if a.status == 0 {
		_ = http.NewResponseController(a.ResponseWriter).Flush()
	}
}

// Unwrap exposes the writer to http.ResponseController.
func (a *anthropicErrors) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// finish writes the held error, translated.
func (a *anthropicErrors) finish() {
	if a.status == 0 {
		return
	}
	status := a.status
	a.status = 0
	body := a.buf.Bytes()
	var oe openai.ErrorResponse
	var probe struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Type != "error" && json.Unmarshal(body, &oe) == nil && oe.Error.Message != "" {
		if b, err := json.Marshal(anthropic.ErrorBody(&openai.Error{Status: status, Message: oe.Error.Message})); err == nil {
			body = append(b, '\n')
		}
	}
	a.Header().Del("Content-Length")
	a.ResponseWriter.WriteHeader(status)
	_, _ = a.ResponseWriter.Write(body)
}
