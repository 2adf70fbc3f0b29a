package engine

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// Usage counts a request's tokens.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens are prompt tokens whose KV came from the prefix cache on
	// first admission.
	CachedTokens int
	// Preemptions counts how often the request was preempted and recomputed.
	Preemptions int
	// SharedTokens is the request's share, when it finished, of the KV it
	// shared with other sequences through the prefix cache: a block k
	// sequences held credits each (k−1)/k of its tokens, so the credits of
	// all sharers sum to the memory sharing saves (the placement
	// algorithm subtracts them from the programs' context tokens).
	SharedTokens int
}

// TotalTokens is prompt plus completion tokens.
func (u Usage) TotalTokens() int { return u.PromptTokens + u.CompletionTokens }

// Chunk is what Stream.Next hands the consumer: every token produced since
// the previous call, then, exactly once, the final chunk (Done set).
type Chunk struct {
	// TokenIDs are the new output token ids (valid until the next call).
	TokenIDs []int32
	// Logprobs, when the request asked for them, hold 1+TopLogprobs
	// entries per token of TokenIDs: the token itself, then the most likely
	// tokens at its step, all with log-probabilities under the model's
	// distribution (valid until the next call).
	Logprobs []sampling.TokenLogprob
	// Text is the new output text (valid until the next call). Text is held
	// back while it could be the start of a stop string or of a rune, so it
	// may lag TokenIDs.
	Text []byte
	// Done marks the final chunk; FinishReason, Usage and Err are set on it.
	Done         bool
	FinishReason completion.Reason
	// StopMatched is the stop string that ended the request, if any.
	StopMatched string
	Usage       Usage
	// Err explains an error or abort finish.
	Err error
}

// Stream delivers one request's output. The engine never blocks on a slow
// consumer: tokens accumulate in the stream until Next collects them.
type Stream struct {
	id     string
	engine *Engine
	seq    *sequence

	cancelled atomic.Bool
	ready     chan struct{} // capacity 1: "something to collect"
	// waiting is set while a consumer may block in Next; the engine
	// signals ready only then, sparing a channel operation per token.
	waiting atomic.Bool

	mu       sync.Mutex
	tokens   []int32 // pending, written by the engine
	lps      []sampling.TokenLogprob
	text     []byte
	done     bool
	final    Chunk
	consumed bool // the final chunk was returned

	// Buffers handed to the consumer; swapped with the pending ones.
	outTokens []int32
	outText   []byte
	outLps    []sampling.TokenLogprob

	stopAfter func() bool // unregisters the context watcher

	// started is closed once the prompt's KV is computed (the first token
	// is out) or the request finished; startedDone guards the close.
	started     chan struct{}
	startedDone bool
}

// Started is closed when the request's prompt has been prefilled (its
// first output token exists) or the request finished. A request that
// shares this one's prompt and is submitted after it finds the prompt's
// full blocks in the prefix cache instead of prefilling them again.
func (s *Stream) Started() <-chan struct{} { return s.started }

// markStarted closes started once; s.mu is held.
func (s *Stream) markStarted() {
	if !s.startedDone {
		s.startedDone = true
		close(s.started)
	}
}

// ID is the request id.
func (s *Stream) ID() string { return s.id }

// Cancel cancels the request. Its KV blocks are freed within one iteration;
// the final chunk has FinishReason cancelled. Cancel is idempotent and safe
// to call from any goroutine.
func (s *Stream) Cancel() {
	if s.cancelled.Swap(true) {
		return
	}
	s.engine.cancel(s)
}

// CancelQueued cancels the request only if it is still queued and has
// never been scheduled (a preempted request, which has output, is not),
// and reports whether it did. Its final chunk has FinishReason cancelled
// and Err ErrDraining: a pod that starts draining answers what it never
// began at once, so the client retries elsewhere, and lets the rest run.
func (s *Stream) CancelQueued() bool {
	if !s.engine.cancelQueued(s) {
		return false
	}
	s.cancelled.Store(true)
	return true
}

// Next blocks until output is available and returns it. After the final
// chunk it returns io.EOF. A done ctx returns ctx.Err() (the request goes on;
// call Cancel to stop it).
func (s *Stream) Next(ctx context.Context) (Chunk, error) {
	for {
		s.mu.Lock()
		if len(s.tokens) > 0 || len(s.text) > 0 || (s.done && !s.consumed) {
			s.outTokens, s.tokens = s.tokens, s.outTokens[:0]
			s.outText, s.text = s.text, s.outText[:0]
			s.outLps, s.lps = s.lps, s.outLps[:0]
			c := Chunk{TokenIDs: s.outTokens, Text: s.outText, Logprobs: s.outLps}
			if s.done {
				s.consumed = true
				c.Done, c.FinishReason, c.StopMatched, c.Usage, c.Err =
					true, s.final.FinishReason, s.final.StopMatched, s.final.Usage, s.final.Err
			}
			s.mu.Unlock()
			return c, nil
		}
		if s.consumed {
			s.mu.Unlock()
			return Chunk{}, io.EOF
		}
		// Announce the wait under the lock: a push after the unlock sees
		// it and signals; one before it was collected above.
		s.waiting.Store(true)
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			s.waiting.Store(false)
			return Chunk{}, ctx.Err()
		}
		s.waiting.Store(false)
	}
}

// Wait collects the whole output: all token ids, the text and the final chunk.
func (s *Stream) Wait(ctx context.Context) (tokens []int32, text string, final Chunk, err error) {
	var buf []byte
	for {
		c, err := s.Next(ctx)
		if err != nil {
			return tokens, string(buf), final, err
		}
		tokens = append(tokens, c.TokenIDs...)
		buf = append(buf, c.Text...)
		if c.Done {
			return tokens, string(buf), c, nil
		}
	}
}

// WaitAll is Wait that also collects the logprobs (see Chunk.Logprobs).
func (s *Stream) WaitAll(ctx context.Context) (tokens []int32, text string, logprobs []sampling.TokenLogprob, final Chunk, err error) {
	var buf []byte
	for {
		c, err := s.Next(ctx)
		if err != nil {
			return tokens, string(buf), logprobs, final, err
		}
		tokens = append(tokens, c.TokenIDs...)
		buf = append(buf, c.Text...)
		logprobs = append(logprobs, c.Logprobs...)
		if c.Done {
			return tokens, string(buf), logprobs, c, nil
		}
	}
}

// push appends output (engine side).
func (s *Stream) push(tok int32, hasTok bool, text []byte, lps []sampling.TokenLogprob) {
	if !hasTok && len(text) == 0 {
		return
	}
	s.mu.Lock()
	if hasTok {
		s.tokens = append(s.tokens, tok)
		s.lps = append(s.lps, lps...)
		s.markStarted()
	}
	s.text = append(s.text, text...)
	s.mu.Unlock()
	if s.waiting.Load() {
		s.notify()
	}
}

// finish records the final chunk (engine side); only the first call counts.
func (s *Stream) finish(text []byte, c Chunk) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.text = append(s.text, text...)
	s.done = true
	s.final = c
	s.markStarted()
	s.mu.Unlock()
	if s.stopAfter != nil {
		s.stopAfter()
	}
	s.notify()
}

func (s *Stream) notify() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// timing is the per-request latency bookkeeping.
type timing struct {
	arrival   time.Time
	scheduled time.Time // first admission
	firstTok  time.Time
	lastTok   time.Time
}
