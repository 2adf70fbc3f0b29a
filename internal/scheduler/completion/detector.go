// Package completion decides when a request has finished generating and turns
// the bytes of the generated tokens into the text a client may see.
//
// A Detector sees each token once, as the engine samples it. It holds back
// the tail of the text while that tail could still be the start of a stop
// string or is an incomplete UTF-8 sequence, so a client never sees part of
// a stop string or of a rune; it cuts the output before the stop string that
// ends it; and it releases what it held when the request ends. Per token it
// looks only at the new bytes, never at the whole output again.
package completion

import (
	"slices"
	"unicode/utf8"
)

// Params are the completion settings of one request.
type Params struct {
	// MaxTokens is the most output tokens to generate (> 0; a value <= 0
	// sets no limit of its own, leaving MaxTotalTokens to end the request).
	MaxTokens int
	// MinTokens is how many output tokens must precede a token before EOS,
	// a stop token id or a stop string ending in it ends the request. The
	// engine also keeps the sampler from producing those ids meanwhile: see
	// Detector.Banned.
	MinTokens int
	// IgnoreEOS makes EOS an ordinary token.
	IgnoreEOS bool
	// EOSTokenIDs are the model's end-of-sequence token ids.
	EOSTokenIDs []int32
	// StopTokenIDs are further token ids that end the request.
	StopTokenIDs []int32
	// StopStrings end the request when they appear in the output; the output
	// is cut before the stop string. Empty strings are ignored.
	StopStrings []string
	// IncludeStopStr keeps the stop string that ended the output in its
	// text (vLLM's include_stop_str_in_output), and the text of an EOS or
	// stop token that did; text that could begin a stop string is then not
	// held back.
	IncludeStopStr bool
	// MaxResponseChars limits the released text, in runes (0 = unlimited).
	MaxResponseChars int
	// MaxTotalTokens is the model's context: the request ends when prompt
	// and output tokens reach it (0 = unlimited).
	MaxTotalTokens int
	// PromptTokens is the number of prompt tokens.
	PromptTokens int
}

// Detector tracks one request's output. Its zero value is ready for Reset;
// it is reused across requests, and once its buffers have grown it does not
// allocate. It is not safe for concurrent use.
type Detector struct {
	maxTokens, minTokens int
	maxChars, maxTotal   int
	promptTokens         int
	ignoreEOS            bool
	includeStop          bool
	eos, stopIDs, banned []int32
	stops                stopMatcher

	// pending is the text not yet released, except that its first released
	// bytes went out in the last delta; they stay until the next call so
	// that the delta remains valid until then.
	pending  []byte
	released int
	// valid holds a delta whose ill-formed bytes were replaced by U+FFFD.
	valid []byte

	outputTokens int
	chars        int
	reason       Reason
	matched      string
	stopToken    int32
	hasStopToken bool
}

// Reset prepares the Detector for a new request. The Detector keeps no
// reference to p's slices, only to the stop strings themselves.
func (d *Detector) Reset(p *Params) {
	d.maxTokens = p.MaxTokens
	d.minTokens = p.MinTokens
	d.maxChars = p.MaxResponseChars
	d.maxTotal = p.MaxTotalTokens
	d.promptTokens = p.PromptTokens
	d.ignoreEOS = p.IgnoreEOS
	d.includeStop = p.IncludeStopStr
	d.eos = append(d.eos[:0], p.EOSTokenIDs...)
	d.stopIDs = append(d.stopIDs[:0], p.StopTokenIDs...)
	d.banned = d.banned[:0]
	if !p.IgnoreEOS {
		d.banned = append(d.banned, p.EOSTokenIDs...)
	}
	d.banned = append(d.banned, p.StopTokenIDs...)
	d.stops.reset(p.StopStrings)

	d.pending = d.pending[:0]
	d.released = 0
	d.outputTokens = 0
	d.chars = 0
	d.reason = None
	d.matched = ""
	d.stopToken, d.hasStopToken = 0, false
}

// Add takes the next generated token id and its bytes (possibly part of a
// UTF-8 sequence) and returns the text now safe to stream, valid until the
// next call on d, and the finish reason (None while the request goes on).
// Every delta is valid UTF-8: an ill-formed byte sequence in the middle of
// the output, or one left incomplete at its end, is released as U+FFFD.
//
// cancelled reports that the request was cancelled: the token is then
// dropped (not counted, no text) and the request finishes with Cancelled.
// Otherwise the checks run in this order, and the first that holds gives
// the reason:
//
//  1. a stop string completes in this token's bytes: Stop;
//  2. the output reached MaxTokens: Length;
//  3. the token is an EOS id (unless IgnoreEOS): Stop;
//  4. the token is a stop token id: Stop;
//  5. the text that can be released reached MaxResponseChars runes: Length;
//  6. prompt and output reached MaxTotalTokens: Length.
//
// This is vLLM's order: its engine ends a request at max tokens before it
// looks at EOS or stop ids, and its detokenizer, which finds stop strings
// afterwards, turns that length into a stop when one completed. Checks 1,
// 3 and 4 count only on a token preceded by at least MinTokens output
// tokens. Whatever the reason, an EOS or stop token adds no text (unless
// IncludeStopStr), the text is cut before a stop string that completed
// (after it with IncludeStopStr), and never exceeds MaxResponseChars runes. Stop strings that complete in the same token
// compete by where they start (the earliest wins; ties: the longest); one
// that completed in an earlier token has already ended the request.
//
// On any finish the held-back text that is not part of a stop string is
// released in the returned delta. Add after the request finished returns
// nil and the finish reason.
func (d *Detector) Add(tok int32, tokBytes []byte, cancelled bool) (delta []byte, r Reason) {
	if d.reason != None {
		return nil, d.reason
	}
	d.dropReleased()
	if cancelled {
		return d.finish(Cancelled), Cancelled
	}
	d.outputTokens++
	honour := d.outputTokens > d.minTokens
	isEOS := honour && !d.ignoreEOS && slices.Contains(d.eos, tok)
	isStopID := honour && !isEOS && slices.Contains(d.stopIDs, tok)
	stopString := false
	if isEOS || isStopID {
		d.stopToken, d.hasStopToken = tok, true
		if d.includeStop {
			d.pending = append(d.pending, tokBytes...)
		}
	} else if len(tokBytes) > 0 {
		base := len(d.pending)
		d.pending = append(d.pending, tokBytes...)
		if i, start, ok := d.stops.feed(tokBytes, honour); ok {
			stopString = true
			d.matched = d.stops.stops[i]
			end := base + start
			if d.includeStop {
				end += len(d.matched)
			}
			d.pending = d.pending[:max(end, 0)]
		}
	}

	switch {
	case stopString:
		r = Stop
	case d.maxTokens > 0 && d.outputTokens >= d.maxTokens:
		r = Length
	case isEOS || isStopID:
		r = Stop
	}
	hold := 0
	if r == None {
		hold = d.holdBack()
		if d.maxChars > 0 {
			if n, ok := cutAfter(d.pending[:len(d.pending)-hold], d.maxChars-d.chars); ok {
				d.pending = d.pending[:n]
				r = Length
			}
		}
	}
	if r == None && d.maxTotal > 0 && d.promptTokens+d.outputTokens >= d.maxTotal {
		r = Length
	}
	if r != None {
		return d.finish(r), r
	}
	return d.release(len(d.pending) - hold), None
}

// Finish ends the request with reason r (for a cancel while it waited, an
// engine error, an abort) and returns the held-back text, valid until the
// next call on d. It returns nil if the request had already finished. A None
// reason is recorded as Error: a request that is made to end without a
// reason did not end normally.
func (d *Detector) Finish(r Reason) []byte {
	if d.reason != None {
		return nil
	}
	if r == None {
		r = Error
	}
	d.dropReleased()
	return d.finish(r)
}

// FinishReason returns why the request finished, or None while it goes on.
func (d *Detector) FinishReason() Reason { return d.reason }

// StopMatched returns the stop string that ended the output (it was cut
// before it, or after it with IncludeStopStr), or "".
func (d *Detector) StopMatched() string { return d.matched }

// StopToken returns the EOS or stop token id that ended the output, if one
// did (vLLM reports a stop token id as the stop_reason). It is set even
// when max tokens, checked first, gave the reason Length.
func (d *Detector) StopToken() (id int32, ok bool) { return d.stopToken, d.hasStopToken }

// OutputTokens returns how many output tokens were added, counting an EOS or
// stop token but not a token dropped because the request was cancelled.
func (d *Detector) OutputTokens() int { return d.outputTokens }

// Text returns the length, in runes, of the text released so far: the
// quantity MaxResponseChars limits.
func (d *Detector) Text() int { return d.chars }

// Banned returns the token ids the sampler must not produce next: while fewer
// than MinTokens tokens were generated, the EOS ids (unless IgnoreEOS) and
// the stop token ids; nil afterwards. The slice belongs to d and is valid
// until the next Reset.
func (d *Detector) Banned() []int32 {
	if d.outputTokens >= d.minTokens || len(d.banned) == 0 {
		return nil
	}
	return d.banned
}

// dropReleased forgets the text released by the previous call.
func (d *Detector) dropReleased() {
	if d.released == 0 {
		return
	}
	n := copy(d.pending, d.pending[d.released:])
	d.pending = d.pending[:n]
	d.released = 0
}

// holdBack returns how many bytes at the end of pending must wait: the
// longest tail that could still begin a stop string or finish a rune,
// widened so that the release does not split a rune either.
func (d *Detector) holdBack() int {
	h := incompleteTail(d.pending)
	if !d.includeStop {
		h = max(h, d.stops.held())
	}
	i := stepStart(d.pending, len(d.pending)-min(h, len(d.pending)))
	return len(d.pending) - i
}

// finish records r and releases all pending text, up to MaxResponseChars.
func (d *Detector) finish(r Reason) []byte {
	d.reason = r
	n := len(d.pending)
	if d.maxChars > 0 {
		if c, ok := cutAfter(d.pending, d.maxChars-d.chars); ok {
			n = c
		}
	}
	return d.release(n)
}

// release hands out pending[:n] as valid UTF-8. The cap keeps a caller that
// appends to the delta from overwriting the held-back bytes.
func (d *Detector) release(n int) []byte {
	d.released = n
	if n == 0 {
		return nil
	}
	out := d.pending[:n:n]
	if !utf8.Valid(out) {
		d.valid = appendValid(d.valid[:0], out)
		out = d.valid[:len(d.valid):len(d.valid)]
	}
	d.chars += utf8.RuneCount(out)
	return out
}
