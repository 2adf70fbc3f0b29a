// Package membudget counts the memory of request preprocessing (body
// decoding, tokenization, constraint compiles) against one budget shared
// by every in-flight request of a pod. Each request bounds its own work,
// but sixteen requests each within their bound still add up to sixteen
// times it; the budget is what bounds their sum.
//
// A request holds a Claim, which grows as its work does (Grow, or Charge
// through the context) and is given back whole when the request ends.
// Growing never waits: a claim that cannot grow fails at once with
// ErrExhausted, and the request answers 503 with Retry-After. Waiting
// while holding part of the budget would let two large requests, each
// holding half, wait on each other for ever; failing fast lets the one
// that failed release its part and be retried.
package membudget

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrExhausted is a claim that could not grow because the pod's budget is
// spent by requests in flight: the work may succeed later.
var ErrExhausted = errors.New("the pod's request-preprocessing memory budget is in use by other requests")

// ErrOverBudget is a claim that could not grow because it would hold more
// than the whole budget: the work cannot be done on this pod, however long
// it waits, and the request is refused as too large.
var ErrOverBudget = errors.New("the request needs more request-preprocessing memory than the pod's whole budget")

// Budget is a pod-wide number of bytes that claims draw on.
type Budget struct {
	limit int64

	mu      sync.Mutex
	used    int64
	peak    int64
	refused int64
}

// New returns a budget of limit bytes; limit <= 0 is no budget (every
// claim grows, and only the use is counted).
func New(limit int64) *Budget { return &Budget{limit: limit} }

// Limit is the budget's size in bytes (<= 0: unlimited).
func (b *Budget) Limit() int64 { return b.limit }

// InUse is the bytes held by claims now.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most bytes claims have held at once.
func (b *Budget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// Refused is how many times a claim could not grow.
func (b *Budget) Refused() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refused
}

// tryAcquire takes n bytes if they are free.
func (b *Budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit > 0 && b.used+n > b.limit {
		b.refused++
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// refuse counts a claim refused without asking tryAcquire.
func (b *Budget) refuse() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refused++
}

func (b *Budget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic(fmt.Sprintf("membudget: released %d bytes more than were held", -b.used))
	}
}

// Claim is one request's share of a budget. Its methods may be called from
// several goroutines.
type Claim struct {
	b *Budget

	mu       sync.Mutex
	held     int64
	released bool
}

// Claim starts a claim of nothing on b. Release it when the request ends.
func (b *Budget) Claim() *Claim { return &Claim{b: b} }

// Grow adds n bytes to the claim, or fails without waiting: with
// ErrOverBudget when the claim would hold more than the budget, else with
// ErrExhausted while other claims hold what it needs (both wrapped with
// the sizes). A released claim grows no more.
func (c *Claim) Grow(n int64) error {
	if n <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return fmt.Errorf("%w (the request has ended)", ErrExhausted)
	}
	if c.b.limit > 0 && c.held+n > c.b.limit {
		c.b.refuse()
		return fmt.Errorf("%w: %d more bytes asked, %d held by this request, budget %d", ErrOverBudget, n, c.held, c.b.limit)
	}
	if !c.b.tryAcquire(n) {
		return fmt.Errorf("%w: %d more bytes asked, %d held by this request, budget %d", ErrExhausted, n, c.held, c.b.limit)
	}
	c.held += n
	return nil
}

// Held is the bytes the claim holds.
func (c *Claim) Held() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// ShrinkTo gives back what the claim holds beyond n bytes: the part of a
// request's work that is over while the request goes on.
func (c *Claim) ShrinkTo(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released || c.held <= n {
		return
	}
	c.b.release(c.held - max(n, 0))
	c.held = max(n, 0)
}

// Shrink gives back n of the bytes the claim holds (all it holds when n
// is more): charged work that is over while the request goes on.
func (c *Claim) Shrink(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released || n <= 0 {
		return
	}
	n = min(n, c.held)
	c.b.release(n)
	c.held -= n
}

// Release gives back all the claim holds. It may be called more than once.
func (c *Claim) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	c.b.release(c.held)
	c.held = 0
}

type claimKey struct{}

// WithClaim returns ctx carrying c, which Charge grows.
func WithClaim(ctx context.Context, c *Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// FromContext is the claim ctx carries, or nil.
func FromContext(ctx context.Context) *Claim {
	c, _ := ctx.Value(claimKey{}).(*Claim)
	return c
}

// Charge grows the claim ctx carries by n bytes; with no claim in ctx
// (work outside a request, tests) it does nothing. Code that allocates in
// proportion to its input calls it as it goes, before it allocates.
func Charge(ctx context.Context, n int64) error {
	if c := FromContext(ctx); c != nil {
		return c.Grow(n)
	}
	return nil
}

// Return gives back n bytes of the claim ctx carries (Claim.Shrink); with
// no claim in ctx it does nothing. Code that charged for memory it has
// let go of, while the request goes on, calls it.
func Return(ctx context.Context, n int64) {
	if c := FromContext(ctx); c != nil {
		c.Shrink(n)
	}
}
