package engine

import (
	"context"
	"sync"
	"time"
)

// iterDeadline is a reusable per-iteration timeout context: arming it costs
// no allocation unless the previous iteration timed out, so the iteration
// loop stays allocation-free in steady state (context.WithTimeout allocates
// a context, a timer and a channel every call).
type iterDeadline struct {
	parent context.Context
	timer  *time.Timer
	// watched is the parent whose cancellation closes done; registering a
	// watcher allocates, so it is done once per distinct parent.
	watched context.Context
	unwatch func() bool

	mu       sync.Mutex
	done     chan struct{}
	err      error
	deadline time.Time
	gen      uint64 // bumped on every arm, so a stale timer does nothing
	armedGen uint64
}

var _ context.Context = (*iterDeadline)(nil)

func newIterDeadline() *iterDeadline {
	d := &iterDeadline{done: make(chan struct{})}
	d.timer = time.AfterFunc(time.Hour, func() { d.fire(context.DeadlineExceeded) })
	d.timer.Stop()
	return d
}

// arm starts a deadline of timeout from now under parent.
func (d *iterDeadline) arm(parent context.Context, timeout time.Duration) context.Context {
	d.mu.Lock()
	if d.err != nil { // fired last time: a closed channel cannot be reused
		d.done = make(chan struct{})
		d.err = nil
	}
	d.parent = parent
	d.gen++
	d.armedGen = d.gen
	d.deadline = time.Now().Add(timeout)
	watch := d.watched != parent
	if watch {
		if d.unwatch != nil {
			d.unwatch()
		}
		d.watched = parent
	}
	d.mu.Unlock()
	if watch {
		d.unwatch = context.AfterFunc(parent, func() { d.fire(context.Cause(parent)) })
	}
	if err := parent.Err(); err != nil {
		d.fire(err)
	}
	d.timer.Reset(timeout)
	return d
}

// disarm stops the timer and returns why the iteration was ended early
// (nil if it was not).
func (d *iterDeadline) disarm() error {
	d.timer.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armedGen = 0
	return d.err
}

// fire ends the armed iteration with err (deadline or parent cancelled).
func (d *iterDeadline) fire(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armedGen == 0 || d.armedGen != d.gen || d.err != nil {
		return
	}
	d.err = err
	close(d.done)
}

func (d *iterDeadline) Deadline() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline, true
}

// Done closes when the iteration times out or the parent is cancelled.
func (d *iterDeadline) Done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}

func (d *iterDeadline) Err() error {
	d.mu.Lock()
	err := d.err
	p := d.parent
	d.mu.Unlock()
	if err != nil {
		return err
	}
	if p != nil {
		return p.Err()
	}
	return nil
}

func (d *iterDeadline) Value(key any) any {
	d.mu.Lock()
	p := d.parent
	d.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Value(key)
}
