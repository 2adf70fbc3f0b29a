package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/chatformat"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
	"github.com/kvpilot/kvpilot/internal/util/membudget"
)

// readRequest reads and parses a request and checks its model; on failure
// it has written the error and returns ok false.
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
	all := req.Prompt.All()
	j := job{chat: false, idPrefix: "cmpl-", promptParam: "prompt", maxParam: "max_tokens",
		n: req.Choices(), candidates: req.Candidates(), lp: req.LogprobSettings(), echo: req.Echo}
	if apiErr := s.outputGrammar(r.Context(), w.Header(), &req.Common, &j); apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	for i, p := range all {
		if i > 0 && r.Context().Err() != nil {
			w.WriteHeader(statusClientClosed) // the client left: tokenize no more of its prompts
			return
		}
		toks := p.Tokens
		switch {
		case p.IsTokens:
		case req.SpecialTokens():
			toks = s.cfg.Codec.EncodePrompt(p.Text)
		default:
			toks = s.cfg.Codec.Encode(p.Text, false)
		}
		j.prompts = append(j.prompts, toks)
	}
	s.generate(w, r, body, &req.Common, j)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, req, ok := readRequest(s, w, r, openai.ParseChat, func(c *openai.ChatRequest) string { return c.Model })
	if !ok {
		return
	}
	maxParam := "max_tokens"
	if req.MaxCompletionTokens != nil {
		maxParam = "max_completion_tokens"
	}
	j, apiErr := s.chatJob(r.Context(), w.Header(), req, "messages", maxParam)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	j.idPrefix = "chatcmpl-"
	s.generate(w, r, body, &req.Common, j)
}

// chatJob turns a chat request into a job: its output constraint, its
// tools and its prompt rendered with the chat template. The Responses and
// Messages endpoints translate their requests into a ChatRequest and come
// through here too, so all three API shapes render, constrain, sample,
// stop and read tool calls with the same code. promptParam and maxParam
// are the names errors give the conversation and the output limit.
func (s *Server) chatJob(ctx context.Context, h http.Header, req *openai.ChatRequest, promptParam, maxParam string) (job, *openai.Error) {
	j := job{chat: true, promptParam: promptParam, maxParam: maxParam,
		n: req.Choices(), candidates: req.Candidates(), lp: req.LogprobSettings()}
	if apiErr := s.outputGrammar(ctx, h, &req.Common, &j); apiErr != nil {
		return j, apiErr
	}
	prompt, apiErr := s.renderChat(ctx, h, req, &j)
	if apiErr != nil {
		return j, apiErr
	}
	j.prompts = [][]int32{prompt}
	j.thinkingBudget = req.ThinkingBudget
	return j, nil
}

// renderChat renders the request's conversation, with its tools and
// template variables, and tokenizes it; tool calling is planned into j.
// /tokenize renders through it too, so its count is the chat request's.
func (s *Server) renderChat(ctx context.Context, h http.Header, req *openai.ChatRequest, j *job) ([]int32, *openai.Error) {
	chat := &model.Chat{Messages: chatMessages(req.Messages), AddGenerationPrompt: req.GenerationPrompt(),
		ContinueFinalMessage: req.ContinueFinalMessage, Kwargs: req.ChatTemplateKwargs,
		Charge: func(n int64) error { return membudget.Charge(ctx, n) }}
	if apiErr := s.planTools(ctx, h, req, chat, j); apiErr != nil {
		return nil, apiErr
	}
	prompt, err := s.cfg.Codec.EncodeChat(chat, req.SpecialTokens())
	if err != nil {
		return nil, memoryError(j.promptParam, err, "rendering the conversation with the model's chat template")
	}
	s.planReading(j, prompt)
	return prompt, nil
}

// planReading sets how the output of a chat job is read: for reasoning
// whenever the model writes it (tool calls only when the request offers
// tools, planTools). The output starts inside reasoning when the rendered
// prompt ends by opening it (Qwen3.5's, GLM 4.7's and DeepSeek-R1's
// generation prompts write <think>; Qwen3's writes an empty block when
// thinking is off).
func (s *Server) planReading(j *job, prompt []int32) {
	if j.tools == nil && !s.format.Thinks() {
		return
	}
	if j.tools == nil {
		j.tools = &toolCalling{spec: s.format}
	}
	if s.format.Reasoning == chatformat.ReasoningThink {
		j.tools.opts.Reasoning = true
		tail := prompt[max(0, len(prompt)-8):]
		j.tools.opts.InReasoning = strings.HasSuffix(strings.TrimRight(s.cfg.Codec.Decode(tail), " \t\r\n"), "<think>")
	}
	if s.format.Reasoning == chatformat.ReasoningHarmony {
		j.tools.opts.Reasoning = true
	}
}

// outputGrammar compiles the request's structured-output constraint into
// j; the error is a 400 naming the field it cannot honour. The compile
// stops when ctx ends (the client left); keywords dropped from a lenient
// schema are named in h.
func (s *Server) outputGrammar(ctx context.Context, h http.Header, c *openai.Common, j *job) *openai.Error {
	oc, apiErr := c.Constraint()
	if apiErr == nil && oc != nil {
		var out compiled
		if out, apiErr = s.grammars.compileOutput(ctx, oc); apiErr == nil {
			j.grammar = out.g
			s.reportDropped(h, oc.Param, out.dropped)
		}
	}
	return apiErr
}

// cacheSalt is the prefix-cache salt of r: the request's cache_salt,
// prefixed with its API key's owner unless the pod shares prefixes across
// keys (Config.SharePrefixCacheAcrossKeys). The owner is a keyed digest of
// the key, the same on every pod of the pool, so a program's context moved
// or restored elsewhere keeps its hits.
func (s *Server) cacheSalt(r *http.Request, salt string) string {
	owner := ownerOf(r)
	if owner == "" || s.cfg.SharePrefixCacheAcrossKeys {
		return salt
	}
	return "key:" + string(owner) + "\x00" + salt
}

// BodyMemoryFactor is what a request body costs the pod's preprocessing
// budget, in multiples of its size: the bytes read, the request decoded
// from them, and its prompt tokenized (the built-in model's byte-level
// vocabulary makes a token of each byte, four bytes each in []int32), at
// the process's peak resident memory, the collector's lag included: 12
// admitted 4 MiB bodies peaked 429-433 MiB over the baseline (8.9-9.0×),
// 32 admitted at once 879 MiB (6.9×). Measured in
// docs/notes/benchmarks-journal.md ("Request body amplification").
const BodyMemoryFactor = 10

// bodyRetainedFactor is what a request keeps drawn on the budget once it
// is preprocessed, in multiples of its body's size: the bytes and the
// request decoded from them, both referenced until it ends.
const bodyRetainedFactor = 2

// readBody reads the body within the size limit, drawing BodyMemoryFactor
// times its size on the request's memory claim first (as it reads, when
// the length is not announced).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *openai.Error) {
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, openai.TooLarge(limit)
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength > 0 {
		if err := membudget.Charge(r.Context(), BodyMemoryFactor*r.ContentLength); err != nil {
			// Read and dropped through a small buffer, so that the client,
			// still sending, reads the 503 instead of a reset connection.
			_, _ = io.Copy(io.Discard, src)
			if errors.Is(err, membudget.ErrOverBudget) {
				return nil, openai.TooLarge(s.budget.Limit() / BodyMemoryFactor)
			}
			return nil, busy("", "a body of %d bytes: %v", r.ContentLength, err)
		}
	} else {
		src = &chargingReader{ctx: r.Context(), r: src}
	}
	body, err := io.ReadAll(src)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return nil, openai.TooLarge(limit)
		case errors.Is(err, membudget.ErrOverBudget):
			return nil, openai.TooLarge(s.budget.Limit() / BodyMemoryFactor)
		case errors.Is(err, membudget.ErrExhausted):
			return nil, busy("", "reading the request body: %v", err)
		}
		return nil, openai.BadRequest("", "reading the request body: %v", err)
	}
	requestRead(r)
	return body, nil
}

// chargingReader draws BodyMemoryFactor times each read on the claim ctx
// carries: a body of unannounced length (chunked) is charged as it
// arrives, and its read stops at the first charge the budget refuses.
type chargingReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *chargingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		if cerr := membudget.Charge(c.ctx, BodyMemoryFactor*int64(n)); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

// busy is the 503 of work the pod's preprocessing budget cannot take now.
func busy(param, format string, args ...any) *openai.Error {
	return openai.MemoryBusy(param, format, args...)
}

func (s *Server) checkModel(name string) *openai.Error {
	if name != "" && name != s.cfg.ModelName {
		return openai.ModelNotFound(name)
	}
	return nil
}

// job is a generation request as the server runs it: its prompts (one, or
// a batch) and how many sequences each gets.
type job struct {
	chat bool
	// idPrefix starts the response id ("chatcmpl-", "resp_", …);
	// uniqueID makes it random even for a request with an X-Request-Id.
	idPrefix              string
	uniqueID              bool
	promptParam, maxParam string
	prompts               [][]int32
	// n choices are returned per prompt, out of candidates generated (best_of).
	n, candidates int
	lp            openai.Logprob
	echo          bool
	// grammar, when set, constrains the output (structured outputs,
	// enforced tool calls); grammarSpecials are the special tokens it may
	// write as themselves (the format's markup: harmony's headers).
	grammar         *grammar.Grammar
	grammarSpecials []string
	// thinkingBudget caps <think> reasoning at that many tokens (0: no
	// cap), when no other constraint holds the output.
	thinkingBudget int
	// tools, when set, reads tool calls out of the output.
	tools *toolCalling
	// shape, when set, makes the writer of the one reply in an API's own
	// shape (Responses, Messages) instead of chat completions' (turn.go),
	// given the response id.
	shape func(id string) turnWriter
}

// maxTokens resolves the output limit: the request's, or the default capped
// by the room left in the context, and in the KV cache when the cache holds
// less than a context (a request without max_tokens would otherwise ask
// for more than the whole cache and be refused).
func (s *Server) maxTokens(c *openai.Common, promptLen int, j *job) (int, *openai.Error) {
	room := s.maxModelLen - promptLen
	if c.MaxTokens == nil && s.kvTokens > 0 && s.kvTokens < s.maxModelLen {
		room = s.kvTokens - promptLen
	}
	if room <= 0 {
		// The prompt alone fills the context: it is what must change.
		want := 1
		if c.MaxTokens != nil {
			want = *c.MaxTokens
		}
		return 0, s.contextError(j.promptParam, promptLen, want)
	}
	if c.MaxTokens == nil {
		if d := s.cfg.DefaultMaxTokens; d > 0 && d < room {
			return d, nil
		}
		return room, nil
	}
	if *c.MaxTokens > room {
		return 0, s.contextError(j.maxParam, promptLen, *c.MaxTokens)
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
func (s *Server) generate(w http.ResponseWriter, r *http.Request, body []byte, c *openai.Common, j job) {
	// Preprocessing is over: what its decoding and tokenizing took beyond
	// the body and the request decoded from it, which stay referenced
	// while the request runs, goes back to the pod's budget (the prompt's
	// tokens are the engine's now, bounded by the context and the KV
	// cache).
	if claim := membudget.FromContext(r.Context()); claim != nil {
		claim.ShrinkTo(bodyRetainedFactor * int64(len(body)))
	}
	if t := c.TruncatePromptTokens; t != nil {
		keep := *t
		if keep < 0 {
			keep = s.maxModelLen
		}
		for i, p := range j.prompts {
			if len(p) > keep {
				j.prompts[i] = p[len(p)-keep:]
			}
		}
	}
	prog, apiErr := s.programOf(r, c.BodyProgram())
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	pid := prog.ID
	if s.cfg.Programs != nil && pid != "" {
		tk, ok := s.admitProgram(w, r, prog, body)
		if !ok {
			return
		}
		prompt := j.prompts[0]
		s.cfg.Programs.Started(tk, int64(len(prompt)), s.cacheSalt(r, c.Salt()))
		out := &programOutcome{}
		defer s.programDone(tk, prompt, out)
		s.run(w, r, c, &j, pid, out)
		return
	}
	s.run(w, r, c, &j, pid, nil)
}

// programOutcome is what the program table learns from a request: set
// only when the request produced a result.
type programOutcome struct {
	final  *engine.Chunk
	tokens []int32
}

func (s *Server) programDone(tk programs.Ticket, prompt []int32, out *programOutcome) {
	if out.final == nil {
		s.cfg.Programs.Abandon(tk)
		return
	}
	u := out.final.Usage
	ctx := append(append(make([]int32, 0, len(prompt)+len(out.tokens)), prompt...), out.tokens...)
	s.cfg.Programs.End(tk, int64(u.PromptTokens+u.CompletionTokens), int64(u.SharedTokens), ctx)
}

// seq is one engine sequence of a job: candidate k of prompt p.
type seq struct {
	prompt, candidate int
	maxTokens         int
	st                *engine.Stream
	// Results, filled as the output arrives.
	tokens []int32
	text   []byte
	lps    []sampling.TokenLogprob
	final  *engine.Chunk
	// offsets counts the streamed text for text_offset.
	offsets textOffsets
}

// submit builds and submits the job's sequences. The first candidate of
// each prompt goes first; the others follow once its prompt is prefilled,
// so they find its KV blocks in the prefix cache instead of prefilling the
// same prompt again (one prefill for n or best_of choices). On failure
// everything submitted is cancelled and the error returned.
func (s *Server) submit(r *http.Request, c *openai.Common, j *job, id, pid string) ([]*seq, *openai.Error) {
	if total, limit := len(j.prompts)*j.candidates, s.eng.Config().MaxQueue; total > limit {
		// More sequences than the waiting queue holds: retrying cannot help.
		param := j.promptParam
		switch {
		case j.candidates > j.n:
			param = "best_of"
		case j.candidates > 1:
			param = "n"
		}
		return nil, openai.BadRequest(param, "the request needs %d sequences (%d prompts × %d choices); this server queues at most %d",
			total, len(j.prompts), j.candidates, limit)
	}
	badWords, apiErr := s.compileBadWords(r.Context(), c.BadWords)
	if apiErr != nil {
		return nil, apiErr
	}
	allowed, apiErr := s.allowedTokens(c, j)
	if apiErr != nil {
		return nil, apiErr
	}
	seqs := make([]*seq, 0, len(j.prompts)*j.candidates)
	fail := func(err *openai.Error) ([]*seq, *openai.Error) {
		for _, q := range seqs {
			q.st.Cancel()
		}
		return nil, err
	}
	params := make([]engine.Params, len(j.prompts))
	for i, p := range j.prompts {
		maxTokens, apiErr := s.maxTokens(c, len(p), j)
		if apiErr != nil {
			return fail(apiErr)
		}
		params[i] = c.EngineParams(maxTokens, s.defaults)
		if j.tools != nil && j.tools.spec.Tools != nil && j.tools.spec.Tools.KeepSpecialTokens {
			// The format's markup is special tokens: the output keeps
			// them for the reader, which takes them out.
			params[i].KeepSpecialTokens, params[i].SpecialTokenSpaces = true, false
		}
		params[i].BadWords = badWords
		// best_of ranks candidates by their cumulative logprob.
		params[i].Logprobs = j.lp.On || j.candidates > j.n
		params[i].TopLogprobs = j.lp.Top
	}
	if len(params) > 0 {
		seqs := int64(len(j.prompts) * j.candidates)
		if err := membudget.Charge(r.Context(), seqs*stopMemory(params[0].Stop)); err != nil {
			return nil, memoryError("stop", err, "matching stop strings in %d sequences", seqs)
		}
	}
	one := func(p, k int) *openai.Error {
		ep := params[p]
		if ep.HasSeed {
			ep.Seed += uint64(k) // each choice its own stream, reproducibly
		}
		rid := id
		if len(j.prompts) > 1 || j.candidates > 1 {
			rid = fmt.Sprintf("%s-%d", id, p*j.candidates+k)
		}
		req := &engine.Request{
			ID: rid, ProgramID: pid, Prompt: j.prompts[p], Params: ep, Priority: c.Priority.Priority(),
			CacheSalt: s.cacheSalt(r, c.Salt()),
		}
		switch {
		case j.grammar != nil:
			// A matcher per sequence: it tracks that sequence's output.
			ends := append(slices.Clone(s.eng.Config().EOS), ep.StopTokenIDs...)
			req.Constraint = s.grammars.matcher(j.grammar, ends, j.grammarSpecials)
		case allowed != nil:
			req.Constraint = allowed.constraint(ep.MinTokens)
		case j.thinkingBudget > 0 && j.tools != nil && j.tools.spec.Reasoning == chatformat.ReasoningThink:
			if closing := s.cfg.Codec.Encode("\n</think>\n\n", false); len(closing) > 0 {
				req.Constraint = newThinkingBudget(j.thinkingBudget, closing, s.eng.Config().Decoder, s.eng.Config().VocabSize, j.tools.opts.InReasoning)
			}
		}
		st, err := s.eng.Submit(r.Context(), req)
		if err != nil {
			apiErr := submitError(err, j.promptParam)
			if apiErr.Param == "max_tokens" {
				apiErr.Param = j.maxParam
			}
			return apiErr
		}
		seqs = append(seqs, &seq{prompt: p, candidate: k, maxTokens: ep.MaxTokens, st: st})
		return nil
	}
	for p := range j.prompts {
		if err := one(p, 0); err != nil {
			return fail(err)
		}
	}
	if j.candidates > 1 {
		firsts := slices.Clone(seqs)
		for p, q := range firsts {
			select {
			case <-q.st.Started():
			case <-r.Context().Done():
				return fail(cancelled())
			case <-s.drainCtx.Done():
				return fail(drainedError())
			}
			for k := 1; k < j.candidates; k++ {
				if err := one(p, k); err != nil {
					return fail(err)
				}
			}
		}
		// In index order: prompt × candidates + candidate.
		slices.SortFunc(seqs, func(a, b *seq) int {
			return cmp.Or(cmp.Compare(a.prompt, b.prompt), cmp.Compare(a.candidate, b.candidate))
		})
	}
	return seqs, nil
}

// compileBadWords tokenizes bad_words, each with and without a leading
// space (a word mid-text usually starts with one), and compiles them: in
// time linear in the words' length, each distinct word tokenized once, and
// stopped when the client leaves, between two words (a word is at most
// openai.MaxBadWordBytes, so that is soon).
//
// Each word is charged to the request's memory claim before it is
// tokenized (badWordMemory); once compiled, all but what the compiled
// words keep (compiledBadWordMemory) is given back.
func (s *Server) compileBadWords(ctx context.Context, words []string) (*sampling.BadWords, *openai.Error) {
	if len(words) == 0 {
		return nil, nil
	}
	seen := make(map[string]struct{}, len(words))
	toks := make([][]int32, 0, 2*len(words))
	var charged, tokens int64
	for _, w := range words {
		if ctx.Err() != nil {
			return nil, cancelled()
		}
		if _, dup := seen[w]; dup {
			continue
		}
		cost := badWordMemory * int64(len(w)+1)
		if err := membudget.Charge(ctx, cost); err != nil {
			return nil, memoryError("bad_words", err, "compiling bad_words")
		}
		charged += cost
		seen[w] = struct{}{}
		toks = append(toks, s.cfg.Codec.Encode(w, false), s.cfg.Codec.Encode(" "+w, false))
		tokens += int64(len(toks[len(toks)-2]) + len(toks[len(toks)-1]))
	}
	b, err := sampling.CompileBadWords(ctx, toks)
	if err != nil {
		return nil, cancelled()
	}
	membudget.Return(ctx, charged-min(charged, compiledBadWordMemory*tokens))
	return b, nil
}

// stopMemory is what matching stop strings costs a sequence for as long
// as it runs (completion's stop matcher): a failure table entry (four
// bytes, in a slice grown by doubling) per byte, and per string its
// header, offset and state. Every sequence of a request has its own (n,
// best_of, a batch of prompts), so a request with a few KiB of stop
// strings and many choices takes far more than its body: 8 requests of
// 128 choices with 64 KiB of stop strings each grew a runtime process by
// 444 MiB, 444 KiB a sequence (this charges 513 KiB).
func stopMemory(stops []string) int64 {
	var n int64
	for _, s := range stops {
		n += 8*int64(len(s)) + 64
	}
	return n
}

// badWordMemory is what a bad_words entry costs, per byte (one more for
// the entry itself), while it is tokenized with and without its leading
// space and compiled: the token ids, the trie's edges and the
// de-duplication. 1 MiB of short words (6 bytes on average) allocated 85
// bytes a byte, a 64 KiB word 101, on the built-in model's byte-level
// vocabulary (a token a byte, the worst case).
const badWordMemory = 128

// compiledBadWordMemory is what compiled bad_words keep per token for as
// long as the request runs (sampling.BadWords: two int32 arrays, by node
// and by ban, each at most a token).
const compiledBadWordMemory = 8

// run submits the request and writes its response; out, when set,
// receives the result for the program table.
func (s *Server) run(w http.ResponseWriter, r *http.Request, c *openai.Common, j *job, pid string, out *programOutcome) {
	id, clientID := s.responseID(r, j.idPrefix, j.uniqueID)
	seqs, apiErr := s.submit(r, c, j, id, pid)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	defer s.cancelQueuedOnDrain(seqs)()
	if clientID == "" {
		clientID = id
	}
	w.Header().Set("X-Request-Id", clientID)
	if j.shape != nil {
		if !s.runTurn(w, r, c, j, j.shape(id), seqs[0], id) {
			return
		}
	} else if c.Stream {
		s.stream(w, r, c, j, seqs, id)
	} else if !s.respond(w, r, c, j, seqs, id) {
		return
	}
	if out != nil && seqs[0].final != nil {
		out.final, out.tokens = seqs[0].final, seqs[0].tokens
	}
}

// cancelQueuedOnDrain makes the pod's drain (BeginDrain) cancel those of
// seqs still queued, never scheduled: a request the pod has not begun is
// answered at once, as retryable, and its client retries on a pod that
// stays instead of waiting for the drain deadline. What runs, runs on.
// Call the returned func when the request ends.
func (s *Server) cancelQueuedOnDrain(seqs []*seq) (stop func() bool) {
	return context.AfterFunc(s.drainCtx, func() {
		for _, q := range seqs {
			q.st.CancelQueued()
		}
	})
}

// observeGroups reports each prompt's sequences as one request (see
// RequestObserver) once every sequence has its final chunk.
func (s *Server) observeGroups(j *job, seqs []*seq) {
	if s.cfg.Requests == nil {
		return
	}
	for p := range j.prompts {
		maxTokens, maxGen := 0, 0
		for _, q := range seqs {
			if q.prompt != p {
				continue
			}
			maxTokens = max(maxTokens, q.maxTokens)
			maxGen = max(maxGen, q.final.Usage.CompletionTokens)
		}
		s.cfg.Requests.RequestGroupFinished(j.n, maxTokens, maxGen)
	}
}

// respond collects every sequence and writes the JSON response; it
// reports false when the client went away.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, c *openai.Common, j *job, seqs []*seq, id string) bool {
	for _, q := range seqs {
		tokens, text, lps, final, err := q.st.WaitAll(r.Context())
		if err != nil { // the client went away
			for _, q := range seqs {
				q.st.Cancel()
			}
			w.WriteHeader(statusClientClosed)
			return false
		}
		q.tokens, q.text, q.lps, q.final = tokens, []byte(text), lps, &final
	}
	// Before the answer is written, so a client that scrapes /metrics
	// after its answer finds its request counted.
	s.observeGroups(j, seqs)
	for _, q := range seqs {
		if f := q.final; f.FinishReason != completion.Stop && f.FinishReason != completion.Length {
			s.writeError(w, s.finishError(*f))
			return true
		}
	}
	usage := s.usageOf(sumUsage(seqs))
	chosen := s.best(j, seqs)
	created := time.Now().Unix()
	if j.chat {
		resp := openai.ChatResponse{ID: id, Object: openai.ObjectChatCompletion, Created: created, Model: s.cfg.ModelName, Usage: &usage}
		for i, q := range chosen {
			reason := q.final.FinishReason.String()
			msg := openai.ChatMessage{Role: "assistant", Content: string(q.text)}
			if j.tools != nil {
				// The content without the calls' markup, also when it holds
				// no call (a forced call max_tokens cut before its name).
				content, reasoning, calls := j.tools.readCalls(msg.Content)
				msg.Content = content
				msg.ReasoningContent, msg.Reasoning = reasoning, reasoning
				if len(calls) > 0 {
					if j.tools.legacy {
						msg.FunctionCall = &openai.FunctionCall{Name: calls[0].Function.Name, Arguments: calls[0].Function.Arguments}
					} else {
						msg.ToolCalls = calls
					}
					if q.final.FinishReason == completion.Stop {
						reason = j.tools.finishReason()
					}
				}
			}
			ch := openai.ChatChoice{Index: i, Message: msg, FinishReason: &reason, StopReason: stopReason(q, c)}
			if j.lp.On {
				ch.Logprobs = &openai.ChatLogprobs{Content: s.chatLogprobs(q.lps, j.lp)}
			}
			if c.ReturnTokenIDs {
				ch.TokenIDs = nonNil(q.tokens)
			}
			resp.Choices = append(resp.Choices, ch)
		}
		if c.ReturnTokenIDs {
			resp.PromptTokenIDs = j.prompts[0]
		}
		writeJSON(w, http.StatusOK, resp)
		return true
	}
	resp := openai.CompletionResponse{ID: id, Object: openai.ObjectCompletion, Created: created, Model: s.cfg.ModelName, Usage: &usage}
	for i, q := range chosen {
		reason := q.final.FinishReason.String()
		prefix := ""
		if j.echo {
			prefix = s.cfg.Codec.Decode(j.prompts[q.prompt])
		}
		ch := openai.CompletionChoice{Index: i, Text: prefix + string(q.text), FinishReason: &reason, StopReason: stopReason(q, c)}
		if j.lp.On {
			var off textOffsets
			off.addString(prefix)
			ch.Logprobs = s.completionLogprobs(q.lps, j.lp, &off)
		}
		if c.ReturnTokenIDs {
			ch.PromptTokenIDs, ch.TokenIDs = j.prompts[q.prompt], nonNil(q.tokens)
		}
		resp.Choices = append(resp.Choices, ch)
	}
	writeJSON(w, http.StatusOK, resp)
	return true
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// best picks the choices to return, in index order: per prompt all its
// sequences, or with best_of the n with the highest cumulative logprob
// (ties: the earlier candidate).
func (s *Server) best(j *job, seqs []*seq) []*seq {
	if j.candidates == j.n {
		return seqs
	}
	stride := 1 + j.lp.Top
	score := func(q *seq) float64 {
		sum := 0.0
		for i := 0; i < len(q.lps); i += stride {
			sum += float64(q.lps[i].Logprob)
		}
		return sum
	}
	var out []*seq
	for p := range j.prompts {
		var cands []*seq
		for _, q := range seqs {
			if q.prompt == p {
				cands = append(cands, q)
			}
		}
		slices.SortStableFunc(cands, func(a, b *seq) int { return cmp.Compare(score(b), score(a)) })
		out = append(out, cands[:j.n]...)
	}
	return out
}

// stopReason is vLLM's stop_reason: the stop string or stop token id that
// ended the choice, or nil (EOS, length).
func stopReason(q *seq, c *openai.Common) any {
	f := q.final
	if f == nil || f.FinishReason != completion.Stop {
		return nil
	}
	if f.StopMatched != "" {
		return f.StopMatched
	}
	if n := len(q.tokens); n > 0 && slices.Contains(c.StopTokenIDs, q.tokens[n-1]) {
		return q.tokens[n-1]
	}
	return nil
}

// responseID is the response id and the client's X-Request-Id: a request
// that names itself gets the prefix ("cmpl-", "chatcmpl-", …) plus its own
// id, so the client's logs and ours agree; others get a random id.
// With unique, the id is random even then (the client's id is still
// echoed): a stored response's id must not repeat.
func (s *Server) responseID(r *http.Request, prefix string, unique bool) (id, client string) {
	random := fmt.Sprintf("%s%016x%08x", prefix, rand.Uint64(), rand.Uint32())
	if v := strings.TrimSpace(r.Header.Get("X-Request-Id")); validRequestID(v) {
		if unique {
			return random, v
		}
		return prefix + v, v
	}
	return random, ""
}

// validRequestID accepts ids of up to 128 letters, digits and ._:- so a
// client's id is safe in a header, a log line and a JSON string.
func validRequestID(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for _, c := range []byte(v) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// sumUsage is the usage of a request's sequences: every candidate's
// output, each prompt once.
func sumUsage(seqs []*seq) engine.Usage {
	var u engine.Usage
	for _, q := range seqs {
		u.CompletionTokens += q.final.Usage.CompletionTokens
		if q.candidate == 0 {
			u.PromptTokens += q.final.Usage.PromptTokens
			u.CachedTokens += q.final.Usage.CachedTokens
		}
	}
	return u
}

// cachedTokens is the one rule for reporting prefix-cache hits, on every
// API: the count only with Config.PromptTokensDetails (reported reports
// it on); without it 0, since a client could otherwise tell from its own
// hits whether another client's prompt is cached.
func (s *Server) cachedTokens(u engine.Usage) (n int, reported bool) {
	if !s.cfg.PromptTokensDetails {
		return 0, false
	}
	return u.CachedTokens, true
}

// usageOf is a completions or chat response's usage: prompt_tokens_details
// only when cached tokens are reported (cachedTokens).
func (s *Server) usageOf(u engine.Usage) openai.Usage {
	out := openai.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens()}
	if n, ok := s.cachedTokens(u); ok {
		out.PromptTokensDetails = &openai.PromptTokensDetails{CachedTokens: n}
	}
	return out
}
