package server

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
)

// readRequest reads and parses a generation request and checks its model;
// on failure it has written the error and returns ok false.
func readRequest[T any](s *Server, w http.ResponseWriter, r *http.Request, parse func([]byte) (*T, *openai.Error), model func(*T) string) (body []byte, req *T, ok bool) {
	body, apiErr := s.readBody(w, r)
	if apiErr == nil {
		req, apiErr = parse(body)
	}
	if apiErr == nil {
		apiErr = s.checkModel(model(req))
	}
	if apiErr != nil {
		s.writeError(w, apiErr)
		return nil, nil, false
	}
	return body, req, true
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	body, req, ok := readRequest(s, w, r, openai.ParseCompletion, func(c *openai.CompletionRequest) string { return c.Model })
	if !ok {
		return
	}
	gen := generation{chat: false, promptParam: "prompt", maxParam: "max_tokens"}
	if !s.outputGrammar(w, &req.Common, &gen) {
		return
	}
	prompt := req.Prompt.Tokens
	if !req.Prompt.IsTokens {
		prompt = s.cfg.Codec.EncodePrompt(req.Prompt.Text)
	}
	s.generate(w, r, body, &req.Common, prompt, gen)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, req, ok := readRequest(s, w, r, openai.ParseChat, func(c *openai.ChatRequest) string { return c.Model })
	if !ok {
		return
	}
	msgs := make([]model.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = model.Message{Role: m.Role, Content: m.Content.Text}
	}
	maxParam := "max_tokens"
	if req.MaxCompletionTokens != nil {
		maxParam = "max_completion_tokens"
	}
	gen := generation{chat: true, promptParam: "messages", maxParam: maxParam}
	if !s.outputGrammar(w, &req.Common, &gen) {
		return
	}
	s.generate(w, r, body, &req.Common, s.cfg.Codec.EncodeChat(msgs), gen)
}

// outputGrammar compiles the request's structured-output constraint into
// gen; on a field it cannot honour it writes the 400 and returns false.
func (s *Server) outputGrammar(w http.ResponseWriter, c *openai.Common, gen *generation) bool {
	oc, apiErr := c.Constraint()
	if apiErr == nil && oc != nil {
		gen.grammar, apiErr = s.grammars.compileOutput(oc)
	}
	if apiErr != nil {
		s.writeError(w, apiErr)
		return false
	}
	return true
}

// readBody reads the body within the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *openai.Error) {
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, openai.TooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, openai.TooLarge(limit)
		}
		return nil, openai.BadRequest("", "reading the request body: %v", err)
	}
	return body, nil
}

func (s *Server) checkModel(name string) *openai.Error {
	if name != "" && name != s.cfg.ModelName {
		return openai.ModelNotFound(name)
	}
	return nil
}

// generation says how a request's fields are named in errors and how its
// response is shaped.
type generation struct {
	chat                  bool
	promptParam, maxParam string
	// grammar, when set, constrains the output (structured outputs).
	grammar *grammar.Grammar
}

// maxTokens resolves the output limit: the request's, or the default capped
// by the room left in the context.
func (s *Server) maxTokens(c *openai.Common, promptLen int, g generation) (int, *openai.Error) {
	room := s.maxModelLen - promptLen
	if c.MaxTokens == nil {
		if room <= 0 {
			return 0, s.contextError(g.promptParam, promptLen, 1)
		}
		if d := s.cfg.DefaultMaxTokens; d > 0 && d < room {
			return d, nil
		}
		return room, nil
	}
	if *c.MaxTokens > room {
		return 0, s.contextError(g.maxParam, promptLen, *c.MaxTokens)
	}
	return *c.MaxTokens, nil
}

func (s *Server) contextError(param string, promptLen, maxTokens int) *openai.Error {
	e := openai.BadRequest(param,
		"this model's maximum context length is %d tokens; the request needs %d (%d in the prompt, %d for the completion)",
		s.maxModelLen, promptLen+maxTokens, promptLen, maxTokens)
	e.Code = openai.CodeContextLength
	return e
}

// generate passes the request through the program gate, submits it and
// writes its response.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, body []byte, c *openai.Common, prompt []int32, g generation) {
	pid := openai.ProgramID(r.Header.Get, c)
	if pid != "" {
		// The control API refuses such ids in placements: one accepted
		// here could never be placed.
		if err := programs.CheckID(pid); err != nil {
			s.writeError(w, openai.BadRequest("program_id", "%v", err))
			return
		}
	}
	if s.cfg.Programs != nil && pid != "" {
		if !s.admitProgram(w, r, pid, body) {
			return
		}
		s.cfg.Programs.Started(pid, int64(len(prompt)))
		out := &programOutcome{}
		defer s.programDone(pid, prompt, out)
		s.run(w, r, c, prompt, g, pid, out)
		return
	}
	s.run(w, r, c, prompt, g, pid, nil)
}

// programOutcome is what the program table learns from a request: set
// only when the request produced a result.
type programOutcome struct {
	final  *engine.Chunk
	tokens []int32
}

func (s *Server) programDone(pid string, prompt []int32, out *programOutcome) {
	if out.final == nil {
		s.cfg.Programs.Abandon(pid)
		return
	}
	u := out.final.Usage
	ctx := append(append(make([]int32, 0, len(prompt)+len(out.tokens)), prompt...), out.tokens...)
	s.cfg.Programs.End(pid, int64(u.PromptTokens+u.CompletionTokens), int64(u.SharedTokens), ctx)
}

// run submits the request and writes its response; out, when set,
// receives the result for the program table.
func (s *Server) run(w http.ResponseWriter, r *http.Request, c *openai.Common, prompt []int32, g generation, pid string, out *programOutcome) {
	maxTokens, apiErr := s.maxTokens(c, len(prompt), g)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	id := newID(g.chat)
	req := &engine.Request{
		ID:        id,
		ProgramID: pid,
		Prompt:    prompt,
		Params:    c.EngineParams(maxTokens, s.defaults),
		Priority:  c.Priority.Priority(),
	}
	if g.grammar != nil {
		ends := append(slices.Clone(s.eng.Config().EOS), req.Params.StopTokenIDs...)
		req.Constraint = s.grammars.matcher(g.grammar, ends)
	}
	st, err := s.eng.Submit(r.Context(), req)
	if err != nil {
		apiErr := submitError(err, g.promptParam)
		if apiErr.Param == "max_tokens" {
			apiErr.Param = g.maxParam
		}
		s.writeError(w, apiErr)
		return
	}
	w.Header().Set("X-Request-Id", id)
	if c.Stream {
		final, tokens := s.stream(w, r, st, id, c.IncludeUsage(), g.chat, out != nil)
		if out != nil && final != nil {
			out.final, out.tokens = final, tokens
		}
		return
	}
	tokens, text, final, err := st.Wait(r.Context())
	if out != nil && err == nil {
		out.final, out.tokens = &final, tokens
	}
	if err != nil { // the client went away
		st.Cancel()
		w.WriteHeader(statusClientClosed)
		return
	}
	if final.FinishReason != completion.Stop && final.FinishReason != completion.Length {
		s.writeError(w, s.finishError(final))
		return
	}
	reason := final.FinishReason.String()
	usage := usageOf(final.Usage)
	var resp any
	if g.chat {
		resp = openai.ChatResponse{
			ID: id, Object: openai.ObjectChatCompletion, Created: time.Now().Unix(), Model: s.cfg.ModelName,
			Choices: []openai.ChatChoice{{Message: openai.ChatMessage{Role: "assistant", Content: text}, FinishReason: &reason}},
			Usage:   &usage,
		}
	} else {
		resp = openai.CompletionResponse{
			ID: id, Object: openai.ObjectCompletion, Created: time.Now().Unix(), Model: s.cfg.ModelName,
			Choices: []openai.CompletionChoice{{Text: text, FinishReason: &reason}},
			Usage:   &usage,
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func usageOf(u engine.Usage) openai.Usage {
	return openai.Usage{
		PromptTokens:        u.PromptTokens,
		CompletionTokens:    u.CompletionTokens,
		TotalTokens:         u.TotalTokens(),
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: u.CachedTokens},
	}
}

// newID is a response id: "cmpl-" or "chatcmpl-" and 24 hex digits.
func newID(chat bool) string {
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	return fmt.Sprintf("%s%016x%08x", prefix, rand.Uint64(), rand.Uint32())
}
