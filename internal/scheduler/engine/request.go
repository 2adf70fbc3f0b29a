// Package engine is the continuous-batching (iteration-level) scheduler that
// every runtime pod runs: a waiting queue with priority aging, a paged KV block
// manager with prefix caching, a batch planner with chunked prefill and
// preemption by recompute, completion detection with stop-string streaming,
// and the iteration loop that drives an executor.
//
// Nothing here knows about HTTP or Kubernetes; time comes from an injected
// clock, so the same code serves in real time and simulates in virtual time.
package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// Priority is a request's scheduling class.
type Priority int8

// Priorities, most urgent first. The values are the waiting queue's levels.
const (
	PriorityHigh   Priority = 0
	PriorityNormal Priority = 1
	PriorityLow    Priority = 2
)

// String returns the priority's name.
func (p Priority) String() string {
	switch p {
	case PriorityHigh:
		return "high"
	case PriorityNormal:
		return "normal"
	case PriorityLow:
		return "low"
	}
	return fmt.Sprintf("Priority(%d)", int8(p))
}

// ParsePriority parses "high", "normal" (or "") and "low".
func ParsePriority(s string) (Priority, error) {
	switch strings.ToLower(s) {
	case "high":
		return PriorityHigh, nil
	case "", "normal", "medium":
		return PriorityNormal, nil
	case "low":
		return PriorityLow, nil
	}
	return PriorityNormal, fmt.Errorf("priority %q: want high, normal or low", s)
}

// Params are a request's sampling and stopping parameters.
type Params struct {
	// MaxTokens is the output limit; it must be > 0.
	MaxTokens int
	// MinTokens is the number of output tokens before EOS, stop tokens and
	// stop strings are honoured.
	MinTokens int
	// Temperature 0 means greedy.
	Temperature float32
	// TopP in (0, 1]; 0 or 1 disables nucleus sampling.
	TopP float32
	// TopK > 0 keeps only the K most likely tokens; 0 disables it.
	TopK int
	// MinP in (0, 1] drops tokens less likely than MinP times the most
	// likely one; 0 disables it.
	MinP float32
	// RepetitionPenalty (> 0; 0 or 1 = off), FrequencyPenalty and
	// PresencePenalty penalise tokens already seen (see sampling.Params).
	RepetitionPenalty float32
	FrequencyPenalty  float32
	PresencePenalty   float32
	// LogitBias is added to the named tokens' logits.
	LogitBias []sampling.Bias
	// BadWords are token sequences never generated (compiled once per
	// request, shared by its sequences).
	BadWords *sampling.BadWords
	// Logprobs asks for each output token's log-probability under the
	// model's distribution, and TopLogprobs for that many most likely
	// alternatives too (Chunk.Logprobs).
	Logprobs    bool
	TopLogprobs int
	// Seed makes sampling deterministic when HasSeed is set.
	Seed    uint64
	HasSeed bool
	// Stop are stop strings; the output is truncated before the first one.
	Stop []string
	// StopTokenIDs end generation when sampled (their text is not emitted).
	StopTokenIDs []int32
	// IncludeStopStr keeps the stop string (or the stop token's text) that
	// ended the output in its text (vLLM's include_stop_str_in_output).
	IncludeStopStr bool
	// KeepSpecialTokens writes special tokens' text into the output (vLLM's
	// skip_special_tokens: false), when the Decoder is a SpecialDecoder;
	// SpecialTokenSpaces then puts a space between two special tokens in a
	// row (spaces_between_special_tokens).
	KeepSpecialTokens  bool
	SpecialTokenSpaces bool
	// IgnoreEOS keeps generating past the model's EOS token.
	IgnoreEOS bool
	// MaxResponseChars limits the output text in runes (0 = unlimited).
	MaxResponseChars int
}

// Request is one generation request.
type Request struct {
	// ID names the request in logs and events; the engine does not require
	// uniqueness.
	ID string
	// ProgramID is the agent program the request belongs to ("" = its own
	// one-step program).
	ProgramID string
	// Prompt are the prompt token ids; at least one.
	Prompt []int32
	// Params are sampling and stopping parameters.
	Params Params
	// Priority is the scheduling class.
	Priority Priority
	// CacheSalt, when set, keeps the request's prefix-cache entries apart
	// from those of requests with another salt (vLLM's cache_salt): it
	// gets hits only from, and its blocks serve only, requests of the same
	// salt (kvcache.Salt).
	CacheSalt string
	// Constraint, when set, restricts the output (structured outputs, tool
	// calls): its mask is applied to the logits before sampling, and the
	// request finishes with reason stop when it is Done. It replaces
	// MinTokens' ban on EOS (the constraint decides when the output may
	// end). Nil costs nothing. A constraint that can fail (a
	// FailingConstraint) ends the request with its error when it refuses
	// the token sampled.
	Constraint sampling.Constraint
}

// FailingConstraint is a sampling.Constraint that can fail on its own,
// for instance a grammar whose automaton passes its work bound at some
// position. A failed constraint allows no token and advances on none; Err
// (nil while it has not failed) says why, and the engine finishes the
// request with reason error and that error, going on with the others.
type FailingConstraint interface {
	sampling.Constraint
	Err() error
}

// Errors returned by Submit. The server maps ErrQueueFull to HTTP 429,
// ErrDraining and ErrNotRunning to 503, and *InvalidRequestError to 400.
var (
	ErrQueueFull  = errors.New("engine: waiting queue full")
	ErrDraining   = errors.New("engine: draining, not accepting requests")
	ErrNotRunning = errors.New("engine: not running")
	// ErrStopped is the error of requests aborted when Stop's deadline passed.
	ErrStopped = errors.New("engine: stopped before the request finished")
	// ErrAlreadyRunning is returned by Start on a running engine.
	ErrAlreadyRunning = errors.New("engine: already running")
)

// InvalidRequestError says why a request can never be served.
type InvalidRequestError struct {
	Field  string
	Reason string
}

func (e *InvalidRequestError) Error() string {
	return fmt.Sprintf("invalid request: %s: %s", e.Field, e.Reason)
}

func invalid(field, format string, args ...any) error {
	return &InvalidRequestError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// validate checks what the engine can check without the model: a request
// that fails here could never be scheduled.
func (e *Engine) validate(r *Request) error {
	p := &r.Params
	switch {
	case len(r.Prompt) == 0:
		return invalid("prompt", "must contain at least one token")
	case p.MaxTokens <= 0:
		return invalid("max_tokens", "must be > 0, got %d", p.MaxTokens)
	case p.MinTokens < 0:
		return invalid("min_tokens", "must be >= 0, got %d", p.MinTokens)
	case p.MinTokens > p.MaxTokens:
		return invalid("min_tokens", "%d is more than max_tokens %d", p.MinTokens, p.MaxTokens)
	case p.Temperature < 0:
		return invalid("temperature", "must be >= 0, got %g", p.Temperature)
	case p.TopP < 0 || p.TopP > 1:
		return invalid("top_p", "must be in [0, 1], got %g", p.TopP)
	case p.TopK < 0:
		return invalid("top_k", "must be >= 0, got %d", p.TopK)
	case p.MinP < 0 || p.MinP > 1 || p.MinP != p.MinP:
		return invalid("min_p", "must be in [0, 1], got %g", p.MinP)
	case p.RepetitionPenalty < 0 || p.RepetitionPenalty != p.RepetitionPenalty:
		return invalid("repetition_penalty", "must be > 0, got %g", p.RepetitionPenalty)
	case p.TopLogprobs < 0:
		return invalid("top_logprobs", "must be >= 0, got %d", p.TopLogprobs)
	case p.TopLogprobs > 0 && !p.Logprobs:
		return invalid("top_logprobs", "needs logprobs")
	case p.MaxResponseChars < 0:
		return invalid("max_response_chars", "must be >= 0, got %d", p.MaxResponseChars)
	case r.Priority < PriorityHigh || r.Priority > PriorityLow:
		return invalid("priority", "unknown priority %d", r.Priority)
	}
	for _, s := range p.Stop {
		if s == "" {
			return invalid("stop", "stop strings must not be empty")
		}
	}
	if err := e.validateTokens(p); err != nil {
		return err
	}
	total := len(r.Prompt) + p.MaxTokens
	if total > e.cfg.MaxModelLen {
		return invalid("max_tokens", "prompt (%d tokens) + max_tokens (%d) = %d exceeds the model context of %d tokens",
			len(r.Prompt), p.MaxTokens, total, e.cfg.MaxModelLen)
	}
	if need := (total + e.blockSize - 1) / e.blockSize; need > e.kv.NumBlocks() {
		return invalid("max_tokens", "prompt + max_tokens = %d tokens needs %d KV blocks; the whole KV cache has %d",
			total, need, e.kv.NumBlocks())
	}
	for _, t := range r.Prompt {
		if t < 0 || (e.cfg.VocabSize > 0 && int(t) >= e.cfg.VocabSize) {
			return invalid("prompt", "token id %d outside the vocabulary [0, %d)", t, e.cfg.VocabSize)
		}
	}
	return nil
}

// validateTokens checks the token ids a request names, and that the
// executor hands the engine logits when the request needs them.
func (e *Engine) validateTokens(p *Params) error {
	vocab := e.cfg.VocabSize
	bad := func(id int32) bool { return id < 0 || (vocab > 0 && int(id) >= vocab) }
	for _, b := range p.LogitBias {
		if bad(b.ID) {
			return invalid("logit_bias", "token id %d outside the vocabulary [0, %d)", b.ID, vocab)
		}
		if b.Value != b.Value {
			return invalid("logit_bias", "bias of token %d is NaN", b.ID)
		}
	}
	if lo, hi, ok := p.BadWords.IDRange(); ok {
		for _, id := range []int32{lo, hi} {
			if bad(id) {
				return invalid("bad_words", "token id %d outside the vocabulary [0, %d)", id, vocab)
			}
		}
	}
	for _, id := range p.StopTokenIDs {
		if bad(id) {
			return invalid("stop_token_ids", "token id %d outside the vocabulary [0, %d)", id, vocab)
		}
	}
	if !e.samplesTokens {
		return nil
	}
	// The executor draws tokens itself: nothing the engine would do to the
	// logits can happen, so refuse rather than ignore.
	sp := e.samplingParams(p)
	switch {
	case p.Logprobs:
		return invalid("logprobs", "the executor samples its own tokens and reports no logits")
	case sp.Processes():
		return invalid(processorField(p), "the executor samples its own tokens; logit processors cannot be applied")
	case p.MinP > 0 && p.MinP < 1:
		return invalid("min_p", "the executor samples its own tokens; min_p cannot be applied")
	}
	return nil
}

// processorField names the first logit processor p sets.
func processorField(p *Params) string {
	switch {
	case p.RepetitionPenalty > 0 && p.RepetitionPenalty != 1:
		return "repetition_penalty"
	case p.FrequencyPenalty != 0:
		return "frequency_penalty"
	case p.PresencePenalty != 0:
		return "presence_penalty"
	case len(p.LogitBias) > 0:
		return "logit_bias"
	}
	return "bad_words"
}

// samplingParams are the sampler's view of p.
func (e *Engine) samplingParams(p *Params) sampling.Params {
	return sampling.Params{
		Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK, MinP: p.MinP,
		Seed: p.Seed, HasSeed: p.HasSeed,
		RepetitionPenalty: p.RepetitionPenalty, FrequencyPenalty: p.FrequencyPenalty,
		PresencePenalty: p.PresencePenalty, LogitBias: p.LogitBias, BadWords: p.BadWords,
	}
}
