package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// HeaderToolsDropped lists, on a Responses answer, the built-in tools the
// request listed that the model did not see (they do not run here), as
// "type" or "type:name", comma-separated.
const HeaderToolsDropped = "X-Kvpilot-Tools-Dropped"

// responses answers POST /v1/responses (OpenAI's Responses API): the
// request is translated into a chat request (instructions, the stored
// conversation it continues, its input items), run through the chat
// path, and its reply written as a Responses response or event stream.
// A response asked to be stored (store, default true) is kept in the
// bounded response store once it completes, as the request's owner's:
// only requests with the same API key can read, continue or delete it.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, req, ok := readRequest(s, w, r, openai.ParseResponses, func(q *openai.ResponsesRequest) string { return q.Model })
	if !ok {
		return
	}
	owner := ownerOf(r)
	turn, apiErr := req.ChatRequest(s.store.history(owner))
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	if len(turn.Dropped) > 0 {
		// Clients list built-in tools by default (Codex its web_search):
		// the request runs without them, and says so.
		w.Header().Set(HeaderToolsDropped, strings.Join(turn.Dropped, ", "))
		s.log.Info("responses: built-in tools left out of the tools the model sees", "tools", turn.Dropped,
			"request_id", r.Header.Get("X-Request-Id"))
	}
	j, apiErr := s.chatJob(r.Context(), w.Header(), turn.Chat, "input", "max_output_tokens")
	if apiErr != nil {
		// Errors about the chat field text.format became name text.format.
		rename := strings.NewReplacer("response_format.json_schema", "text.format", "response_format", "text.format")
		apiErr.Param, apiErr.Message = rename.Replace(apiErr.Param), rename.Replace(apiErr.Message)
		s.writeError(w, apiErr)
		return
	}
	// A client that sends one X-Request-Id for a whole session must not
	// give two stored responses one id.
	j.idPrefix, j.uniqueID = "resp_", true
	j.shape = func(id string) turnWriter {
		shape := openai.NewResponseShape(id, time.Now().Unix(), s.cfg.ModelName, req)
		if req.StoreResponse() {
			// Stored before the client has the response, so a next turn
			// sent the moment it arrives finds it.
			shape.OnComplete = func(resp *openai.Response) { s.storeResponse(owner, resp, req.PreviousResponseID, turn.Input) }
		}
		return shape
	}
	s.generate(w, r, body, &turn.Chat.Common, j)
}

// storeResponse keeps a completed (or incomplete) response of owner.
func (s *Server) storeResponse(owner programs.Owner, resp *openai.Response, parent string, input []openai.Message) {
	b, err := json.Marshal(resp)
	if err != nil {
		s.log.Error("encoding a stored response", "id", resp.ID, "err", err)
		return
	}
	if !s.store.put(&storedResponse{owner: owner, id: resp.ID, parent: parent, input: input, output: resp.Output, body: b}) {
		s.log.Info("response not stored: larger than the store, or than its owner's share of it", "id", resp.ID, "bytes", len(b))
	}
}

// storedResponse answers GET and DELETE /v1/responses/{id}: of the
// request's owner's responses only. Another key's response is answered as
// an id never stored, so that existence is not revealed.
func (s *Server) storedResponse(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, routeResponses+"/"), "/")
	owner := ownerOf(r)
	notFound := &openai.Error{Status: http.StatusNotFound, Type: openai.TypeNotFound, Param: "response_id",
		Message: fmt.Sprintf("response %q not found (never stored, store was false, or evicted from the bounded store)", id)}
	if r.Method == http.MethodDelete {
		if !s.store.remove(owner, id) {
			s.writeError(w, notFound)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": openai.ObjectResponse, "deleted": true})
		return
	}
	b, ok := s.store.get(owner, id)
	if !ok {
		s.writeError(w, notFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
