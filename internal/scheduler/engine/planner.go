package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
)

// planLocked builds the next iteration's batch in e.b / e.sched.
//
// One mechanism covers prefill, chunked prefill, decode and prefix hits:
// every sequence has numComputed tokens in KV and each step lets it catch up
// with its token list, within the token budget.
//
//  1. Running sequences first, in (priority, arrival) order, so decodes and
//     earlier prefills come before any admission. A sequence that needs a
//     block when none is free preempts the running tail (lowest priority,
//     latest arrival) by recompute until it fits or is itself the tail.
//  2. Then, if nothing was preempted, waiting requests in queue order join
//     at this step boundary while sequences, budget and blocks last. The
//     queue head blocks the ones behind it, so large requests are not
//     starved by small ones.
//  3. The budget left goes back to the long prefills held short in 1 and 2.
//
// Long prefills (more than LongPrefillTokenThreshold tokens left to compute):
//   - In 1 and 2 one takes at most the threshold, in 3 what the others
//     left: alone it still fills the budget, and beside it a short request
//     is admitted in 2 and prefilled in the same iterations rather than
//     after the whole long prompt, and the decodes after it in 1 come
//     before its extra tokens. It runs before later arrivals in 1, so it
//     progresses every step: under a stream of short requests it slows
//     down, it does not stop.
//   - 3 goes by priority, then to the prefill with the fewest tokens left
//     (a prompt just above the threshold beside a 30k-token one), and stops
//     once the batch gives a prompt its first token: filling it up would
//     make that token wait for the long prompt's share.
//   - Only MaxLongPartialPrefills of them take tokens in an iteration; the
//     next sits out. A long request at the head of the queue beyond them is
//     admitted all the same and sits out among the running ones, so it
//     leaves the queue instead of blocking the short requests behind it.
//
// The head rule is kept: the queue is never scanned past its head. A head
// that would be a partial prefill beyond MaxNumPartialPrefills (its prompt
// does not fit in the budget left) waits, and those behind it with it.
//
// With an executor that overlaps copies, a sequence whose KV is coming back
// from the host tier sits out (see overlap): admitted, holding its blocks,
// out of the batch until its copies have landed.
func (e *Engine) planLocked(now time.Time) (preempted, finished int) {
	preempted, finished = e.planBatchLocked(now)
	if e.slots != nil && e.slots.ck != nil {
		e.alignLocked()
	}
	return preempted, finished
}

func (e *Engine) planBatchLocked(now time.Time) (preempted, finished int) {
	e.b.Seqs = e.b.Seqs[:0]
	e.b.NumTokens = 0
	e.b.StateCopies, e.b.StateSaves = e.b.StateCopies[:0], e.b.StateSaves[:0]
	if e.slots != nil {
		// Copies decided between iterations run first (an iteration that
		// does not execute gives them back: keepStateCopiesLocked).
		e.b.StateCopies = append(e.b.StateCopies, e.slots.pending...)
		e.slots.pending = e.slots.pending[:0]
	}
	clear(e.sched)
	e.sched = e.sched[:0]
	e.capped = e.capped[:0]
	budget := e.cfg.MaxNumBatchedTokens
	// partial counts the sequences left mid-prefill by this iteration,
	// long the long prefills that take tokens in it.
	partial, long := 0, 0

	// 1. Running.
	for i := 0; i < len(e.running); i++ {
		s := e.running[i]
		if s.stream.cancelled.Load() {
			e.finishLocked(s, completion.Cancelled, nil, now)
			finished++
			continue
		}
		left := len(s.tokens) - s.numComputed
		if left > 1 {
			partial++ // until it is scheduled to the end, below
		}
		if budget == 0 {
			continue // keep scanning: cancelled ones still free their blocks
		}
		if e.overlap != nil && !e.overlap.ready(s) {
			continue // its KV is still coming back from the host tier
		}
		n := min(left, budget, e.seqChunk)
		if e.isLong(left) {
			if long == e.cfg.MaxLongPartialPrefills {
				continue // a long-prefill slot frees up when one is done
			}
			long++
			n = min(n, e.cfg.LongPrefillTokenThreshold)
		}
		if need := s.numComputed + n; need > len(s.blocks)*e.blockSize {
			had := len(s.blocks)
			fits := e.kv.Grow(s.id, need)
			for !fits {
				victim := e.lastRunningLocked()
				e.preemptLocked(victim)
				preempted++
				if victim == s {
					break
				}
				fits = e.kv.Grow(s.id, need)
			}
			if !fits {
				break
			}
			s.blocks = e.kv.Blocks(s.id)
			if e.overlap != nil {
				e.overlap.touch(s.blocks[had:])
			}
		}
		if n < left && e.isLong(left) {
			e.capped = append(e.capped, len(e.b.Seqs))
		}
		if left > 1 && n == left {
			partial--
		}
		e.scheduleLocked(s, n)
		budget -= n
	}
	if finished > 0 {
		e.compactRunningLocked()
	}

	// 2. Waiting.
	if preempted > 0 {
		return preempted, finished
	}
	for len(e.running) < e.cfg.MaxNumSeqs && budget > 0 {
		ent, ok := e.waiting.Peek()
		if !ok {
			break
		}
		s := ent.Value
		if partial >= e.cfg.MaxNumPartialPrefills && len(s.tokens) > budget {
			break // it would be one partial prefill too many
		}
		maxNew := budget
		if e.isLong(len(s.tokens)) {
			maxNew = min(maxNew, e.cfg.LongPrefillTokenThreshold)
		}
		before := len(e.kv.Transfers())
		cached, ckpt, ok := e.admitLocked(s, maxNew)
		if !ok {
			break
		}
		e.waiting.Pop()
		e.slots.take(s)
		if cached > 0 && ckpt >= 0 {
			// Its recurrent state resumes from the checkpoint at the hit.
			e.b.StateCopies = append(e.b.StateCopies, batch.StateCopy{From: e.slots.ck.restore(ckpt), To: s.slot, Pos: cached})
			e.slots.restored++
			e.slots.restoredTokens += int64(cached)
		}
		s.blocks = e.kv.Blocks(s.id)
		s.state = stateRunning
		s.numComputed = cached
		if !s.admitted {
			s.admitted = true
			s.cachedTokens = min(cached, s.promptLen)
			s.t.scheduled = now
		}
		e.insertRunningLocked(s)
		s.loadUntil = 0
		left := len(s.tokens) - cached
		if left > 1 {
			partial++
		}
		if e.overlap != nil {
			if xf := e.kv.Transfers()[before:]; copiesIn(xf) {
				// Its KV comes back from the host tier beside the
				// iterations; it joins the batch once the copies landed.
				e.overlap.load(s, before, len(e.kv.Transfers()))
				continue
			}
			e.overlap.touch(s.blocks)
		}
		n := min(left, budget, e.seqChunk)
		if e.isLong(left) {
			if long == e.cfg.MaxLongPartialPrefills {
				continue // admitted; it prefills when a long-prefill slot frees up
			}
			long++
			n = min(n, e.cfg.LongPrefillTokenThreshold)
			if n < left {
				e.capped = append(e.capped, len(e.b.Seqs))
			}
		}
		if left > 1 && n == left {
			partial--
		}
		e.scheduleLocked(s, n)
		budget -= n
	}

	// 3. What the others left, by priority, then to the prefill nearest its
	// first token (a short prompt above the threshold beside a long one),
	// unless the batch already gives a prompt its first token: filling it
	// up would make that token wait for a whole budget's iteration.
	if len(e.capped) > 0 {
		e.sortCappedLocked()
		first := e.firstTokenLocked()
		for _, i := range e.capped {
			if budget == 0 || first {
				break
			}
			budget -= e.extendLocked(i, budget)
			first = e.b.Seqs[i].Sample && e.sched[i].outTokens == 0
		}
	}
	return preempted, finished
}

// firstTokenLocked reports whether a sequence of the batch gets its first
// token from it.
func (e *Engine) firstTokenLocked() bool {
	for i := range e.b.Seqs {
		if e.b.Seqs[i].Sample && e.sched[i].outTokens == 0 {
			return true
		}
	}
	return false
}

// isLong reports whether a sequence with left tokens to compute is a long
// prefill (see Config.LongPrefillTokenThreshold).
func (e *Engine) isLong(left int) bool {
	return e.cfg.LongPrefillTokenThreshold > 0 && left > e.cfg.LongPrefillTokenThreshold
}

// sortCappedLocked orders e.capped by priority, then fewest tokens left,
// then batch order (insertion sort: a handful of entries, no allocation).
func (e *Engine) sortCappedLocked() {
	c := e.capped
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && e.extendsBefore(c[j], c[j-1]); j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

func (e *Engine) extendsBefore(i, j int) bool {
	a, b := e.sched[i], e.sched[j]
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	la := len(a.tokens) - e.b.Seqs[i].Pos - len(e.b.Seqs[i].Tokens)
	lb := len(b.tokens) - e.b.Seqs[j].Pos - len(e.b.Seqs[j].Tokens)
	if la != lb {
		return la < lb
	}
	return i < j
}

// extendLocked gives the sequence scheduled at e.b.Seqs[i] up to budget
// more tokens, as far as free blocks allow without preempting anyone (the
// others already have their share), and returns how many it took.
func (e *Engine) extendLocked(i, budget int) int {
	s, sq := e.sched[i], &e.b.Seqs[i]
	end := sq.Pos + len(sq.Tokens)
	n := min(len(s.tokens)-end, budget, e.seqChunk-len(sq.Tokens))
	if n <= 0 {
		return 0
	}
	if need := end + n; need > len(s.blocks)*e.blockSize {
		had := len(s.blocks)
		if e.kv.Grow(s.id, need) {
			s.blocks = e.kv.Blocks(s.id)
			sq.Blocks = s.blocks
			if e.overlap != nil {
				e.overlap.touch(s.blocks[had:])
			}
		} else {
			n = len(s.blocks)*e.blockSize - end
		}
	}
	end += n
	sq.Tokens = s.tokens[sq.Pos:end]
	sq.Sample = end == len(s.tokens)
	sq.ArgmaxOnly = sq.Sample && e.argmaxOnly(s)
	e.b.NumTokens += n
	return n
}

// admitLocked admits s (kvcache's Admit) with a prefix hit; an engine
// that keeps recurrent states takes only as much of the hit as a
// checkpoint resumes (ckpt, its index; -1 none).
func (e *Engine) admitLocked(s *sequence, maxNew int) (cached, ckpt int, ok bool) {
	if e.slots == nil {
		cached, ok = e.kv.AdmitSalted(s.id, s.salt, s.tokens, maxNew)
		return cached, -1, ok
	}
	ckpt = -1
	cached, ok = e.kv.AdmitLimited(s.id, s.salt, s.tokens, maxNew, func(hit int) int {
		var k int
		k, ckpt = e.slots.ck.deepest(s.salt, s.tokens, e.blockSize, hit)
		return k
	})
	return cached, ckpt, ok
}

func (e *Engine) scheduleLocked(s *sequence, n int) {
	end := s.numComputed + n
	sample := end == len(s.tokens)
	e.b.Seqs = append(e.b.Seqs, batch.Seq{
		SeqID:      s.id,
		Tokens:     s.tokens[s.numComputed:end],
		Pos:        s.numComputed,
		Blocks:     s.blocks,
		Sample:     sample,
		ArgmaxOnly: sample && e.argmaxOnly(s),
		PromptLen:  s.promptLen,
		Seed:       s.seed,
		MaxTokens:  s.req.Params.MaxTokens,
		State:      s.slot,
	})
	e.b.NumTokens += n
	e.sched = append(e.sched, s)
}

// argmaxOnly reports whether sampling s's next token takes the largest
// logit and reads nothing else of the row (see sample): greedy, no
// logprobs, no logit processor, no constraint, no banned tokens yet.
func (e *Engine) argmaxOnly(s *sequence) bool {
	p := &s.req.Params
	return s.sp.Greedy() && !p.Logprobs && !s.sp.Processes() && s.constraint == nil && len(s.bannedNow()) == 0
}

// runsBefore orders running sequences: higher priority, then earlier
// arrival, then lower id.
func runsBefore(a, b *sequence) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	if !a.t.arrival.Equal(b.t.arrival) {
		return a.t.arrival.Before(b.t.arrival)
	}
	return a.id < b.id
}

func (e *Engine) insertRunningLocked(s *sequence) {
	i := len(e.running)
	for i > 0 && runsBefore(s, e.running[i-1]) {
		i--
	}
	e.running = append(e.running, nil)
	copy(e.running[i+1:], e.running[i:])
	e.running[i] = s
}

func (e *Engine) lastRunningLocked() *sequence { return e.running[len(e.running)-1] }

// preemptLocked frees a running sequence's blocks and puts it back at the
// head of the waiting queue; it will recompute its tokens (prefix-cache hits
// make that cheap when its blocks were not reused meanwhile).
func (e *Engine) preemptLocked(s *sequence) {
	e.kv.Free(s.id, false)
	e.slots.give(s)
	s.blocks = nil
	s.numComputed = 0
	s.preemptions++
	s.state = stateWaiting
	e.running = e.running[:len(e.running)-1]
	e.waiting.PushFront(s.entry)
}

// warmup runs WarmupIterations through the executor with a throwaway
// sequence, so lazy allocations and code paths are exercised before serving.
func (e *Engine) warmup(ctx context.Context) error {
	if e.cfg.WarmupIterations <= 0 {
		return nil
	}
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	const warmupSeq = ^uint64(0)
	n := min(e.blockSize, e.cfg.MaxModelLen-1, e.cfg.MaxNumBatchedTokens, e.seqChunk)
	tokens := make([]int32, max(n, 1))
	for i := range tokens {
		tokens[i] = int32(i % max(e.cfg.VocabSize, 2))
	}
	for it := range e.cfg.WarmupIterations {
		e.mu.Lock()
		_, ok := e.kv.Admit(warmupSeq, tokens, len(tokens))
		e.mu.Unlock()
		if !ok {
			return fmt.Errorf("engine warmup: no KV blocks for %d tokens", len(tokens))
		}
		e.b.Seqs = append(e.b.Seqs[:0], batch.Seq{
			SeqID: warmupSeq, Tokens: tokens, Blocks: e.kv.Blocks(warmupSeq),
			Sample: true, PromptLen: len(tokens), MaxTokens: 1,
		})
		e.b.NumTokens = len(tokens)
		e.prepareOutput()
		err := e.exec.Execute(ctx, &e.b, &e.out)
		e.mu.Lock()
		e.kv.Free(warmupSeq, true)
		e.mu.Unlock()
		if err != nil {
			return fmt.Errorf("engine warmup iteration %d: %w", it, err)
		}
	}
	e.b.Seqs = e.b.Seqs[:0]
	return nil
}
