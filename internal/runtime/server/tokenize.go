package server

import (
	"net/http"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// tokenize answers POST /tokenize as vLLM does: the token ids of a prompt
// (with the model's special tokens unless add_special_tokens is false), or
// of chat messages (with their tools and chat_template_kwargs) rendered
// through the chat template exactly as a chat completion renders them.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	_, req, ok := readRequest(s, w, r, decodeBody[openai.TokenizeRequest], func(t *openai.TokenizeRequest) string { return t.Model })
	if !ok {
		return
	}
	if (req.Prompt == nil) == (len(req.Messages) == 0) {
		s.writeError(w, openai.BadRequest("prompt", "give exactly one of prompt and messages"))
		return
	}
	var toks []int32
	if req.Prompt != nil {
		toks = s.cfg.Codec.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	} else {
		// Rendered as a chat request with the same fields renders it: the
		// count is that request's prompt tokens.
		chat := &openai.ChatRequest{Common: openai.Common{AddSpecialTokens: req.AddSpecialTokens},
			Messages: req.Messages, AddGenerationPrompt: req.AddGenerationPrompt,
			ContinueFinalMessage: req.ContinueFinalMessage, ChatTemplateKwargs: req.ChatTemplateKwargs,
			ToolFields: openai.ToolFields{Tools: req.Tools}}
		apiErr := req.ChatTemplateKwargs.Check()
		if apiErr == nil {
			toks, apiErr = s.renderChat(r.Context(), w.Header(), chat, &job{promptParam: "messages"})
		}
		if apiErr != nil {
			s.writeError(w, apiErr)
			return
		}
	}
	resp := openai.TokenizeResponse{Count: len(toks), MaxModelLen: s.maxModelLen, Tokens: nonNil(toks)}
	if req.ReturnTokenStrs {
		resp.TokenStrs = make([]string, len(toks))
		for i, id := range toks {
			resp.TokenStrs[i], _ = s.tokenText(id, false)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// detokenize answers POST /detokenize: the text of token ids.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	_, req, ok := readRequest(s, w, r, decodeBody[openai.DetokenizeRequest], func(d *openai.DetokenizeRequest) string { return d.Model })
	if !ok {
		return
	}
	vocab := s.eng.Config().VocabSize
	for _, id := range req.Tokens {
		if id < 0 || (vocab > 0 && int(id) >= vocab) {
			s.writeError(w, openai.BadRequest("tokens", "token id %d outside the vocabulary [0, %d)", id, vocab))
			return
		}
	}
	writeJSON(w, http.StatusOK, openai.DetokenizeResponse{Prompt: s.cfg.Codec.Decode(req.Tokens)})
}

// decodeBody decodes a JSON object body into a T as the generation
// endpoints decode theirs (openai.Decode), answering 400 naming the field
// on failure (a parse function for readRequest).
func decodeBody[T any](body []byte) (*T, *openai.Error) {
	v := new(T)
	if err := openai.Decode(body, v); err != nil {
		return nil, err
	}
	return v, nil
}
