package server

import (
	"encoding/json"
	"net/http"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// tokenize answers POST /tokenize as vLLM does: the token ids of a prompt
// (with the model's special tokens unless add_special_tokens is false), or
// of chat messages rendered through the chat template exactly as a chat
// completion would render them.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	body, apiErr := s.readBody(w, r)
	var req openai.TokenizeRequest
	if apiErr == nil {
		apiErr = decodeBody(body, &req)
	}
	if apiErr == nil {
		apiErr = s.checkModel(req.Model)
	}
	if apiErr == nil && (req.Prompt == nil) == (len(req.Messages) == 0) {
		apiErr = openai.BadRequest("prompt", "give exactly one of prompt and messages")
	}
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	var toks []int32
	if req.Prompt != nil {
		toks = s.cfg.Codec.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	} else {
		var err error
		toks, err = s.cfg.Codec.EncodeChat(&model.Chat{Messages: chatMessages(req.Messages),
			AddGenerationPrompt:  req.AddGenerationPrompt == nil || *req.AddGenerationPrompt,
			ContinueFinalMessage: req.ContinueFinalMessage,
		})
		if err != nil {
			s.writeError(w, openai.BadRequest("messages", "rendering the conversation with the model's chat template: %v", err))
			return
		}
	}
	resp := openai.TokenizeResponse{Count: len(toks), MaxModelLen: s.maxModelLen, Tokens: nonNil(toks)}
	if req.ReturnTokenStrs {
		resp.TokenStrs = make([]string, len(toks))
		for i, id := range toks {
			resp.TokenStrs[i], _ = s.tokenText(id)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// detokenize answers POST /detokenize: the text of token ids.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	body, apiErr := s.readBody(w, r)
	var req openai.DetokenizeRequest
	if apiErr == nil {
		apiErr = decodeBody(body, &req)
	}
	if apiErr == nil {
		apiErr = s.checkModel(req.Model)
	}
	if apiErr == nil {
		vocab := s.eng.Config().VocabSize
		for _, id := range req.Tokens {
			if id < 0 || (vocab > 0 && int(id) >= vocab) {
				apiErr = openai.BadRequest("tokens", "token id %d outside the vocabulary [0, %d)", id, vocab)
				break
			}
		}
	}
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	writeJSON(w, http.StatusOK, openai.DetokenizeResponse{Prompt: s.cfg.Codec.Decode(req.Tokens)})
}

// decodeBody decodes a JSON object body into v, answering 400 on failure.
func decodeBody(body []byte, v any) *openai.Error {
	if err := json.Unmarshal(body, v); err != nil {
		var apiErr *openai.Error
		if e, ok := err.(*openai.Error); ok {
			apiErr = e
		} else {
			apiErr = openai.BadRequest("", "invalid request body: %v", err)
		}
		return apiErr
	}
	return nil
}
