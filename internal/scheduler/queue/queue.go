// Package queue is the waiting queue of a runtime pod: requests ordered by
// priority level, with aging so that low priority never starves.
//
// An entry's effective priority is its level (0 high, 1 normal, 2 low) minus
// AgingRate levels per second waited; smaller is served first. Every entry
// ages at the same rate, so at any instant the order by effective priority is
// the order by a key fixed at push time:
//
//	level − AgingRate·(now − arrival) < level' − AgingRate·(now − arrival')
//	⇔ level + AgingRate·(arrival − Epoch) < level' + AgingRate·(arrival' − Epoch)
//
// The queue is therefore a binary heap on that static key (ties first come,
// first served: earlier arrival, then earlier push), with O(log n) push, pop and removal and no re-sorting as time
// passes. A low request that has waited 2/AgingRate seconds ties a high one
// that has just arrived.
//
// A Queue is not safe for concurrent use.
package queue

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrQueueFull is returned by Push when the queue holds Capacity entries.
var ErrQueueFull = errors.New("queue full")

// Priority levels; a smaller level is served first.
const (
	LevelHigh   = 0
	LevelNormal = 1
	LevelLow    = 2
)

// Config configures a Queue.
type Config struct {
	// Capacity bounds the entries added by Push (front entries do not count);
	// 0 means unbounded.
	Capacity int
	// AgingRate is the number of priority levels an entry gains per second
	// of waiting; 0 means no aging.
	AgingRate float64
	// Epoch is the origin of the keys. Arrivals should lie within a few
	// centuries of it; the zero time means the arrival of the first Push.
	Epoch time.Time
}

// Validate reports a negative capacity or an aging rate that is negative or
// not finite.
func (c Config) Validate() error {
	var errs []error
	if c.Capacity < 0 {
		errs = append(errs, fmt.Errorf("capacity must not be negative, got %d", c.Capacity))
	}
	if c.AgingRate < 0 || math.IsNaN(c.AgingRate) || math.IsInf(c.AgingRate, 0) {
		errs = append(errs, fmt.Errorf("aging rate must be finite and not negative, got %v", c.AgingRate))
	}
	return errors.Join(errs...)
}

// Entry is a queued value and the handle to remove or re-queue it.
type Entry[T any] struct {
	Value T

	owner   *Queue[T]
	index   int     // position in the heap; -1 when not queued
	front   bool    // re-queued at the head by PushFront
	key     float64 // level + AgingRate × seconds from Epoch to arrival
	seq     uint64  // push order, the last tie-breaker
	level   int
	arrival time.Time
}

// Level is the priority level the entry was pushed with.
func (e *Entry[T]) Level() int { return e.level }

// Arrival is the arrival time the entry was pushed with.
func (e *Entry[T]) Arrival() time.Time { return e.arrival }

// Queued reports whether the entry is in its queue.
func (e *Entry[T]) Queued() bool { return e.index >= 0 }

// Queue is a priority queue with aging. The zero value is not usable;
// construct it with New.
type Queue[T any] struct {
	cfg      Config
	epochSet bool
	heap     []*Entry[T]
	front    int // queued entries re-queued by PushFront
	nextSeq  uint64
}

// New returns an empty queue. It panics if cfg is invalid (see
// Config.Validate): configuration is checked when it is read, not here.
func New[T any](cfg Config) *Queue[T] {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("queue: invalid config: %v", err))
	}
	return &Queue[T]{cfg: cfg, epochSet: !cfg.Epoch.IsZero()}
}

// Len is the number of queued entries, front entries included.
func (q *Queue[T]) Len() int { return len(q.heap) }

// Push queues v at level (LevelHigh, LevelNormal or LevelLow) as arrived at
// arrival. It returns ErrQueueFull, wrapped, when Capacity entries other than
// front entries are queued.
func (q *Queue[T]) Push(v T, level int, arrival time.Time) (*Entry[T], error) {
	if level < LevelHigh || level > LevelLow {
		return nil, fmt.Errorf("queue: priority level %d outside %d…%d", level, LevelHigh, LevelLow)
	}
	if q.cfg.Capacity > 0 && len(q.heap)-q.front >= q.cfg.Capacity {
		return nil, fmt.Errorf("queue: %d entries waiting: %w", q.cfg.Capacity, ErrQueueFull)
	}
	if !q.epochSet {
		q.cfg.Epoch, q.epochSet = arrival, true
	}
	e := &Entry[T]{
		Value:   v,
		owner:   q,
		key:     float64(level) + q.cfg.AgingRate*arrival.Sub(q.cfg.Epoch).Seconds(),
		seq:     q.nextSeq,
		level:   level,
		arrival: arrival,
	}
	q.nextSeq++
	q.insert(e)
	return e, nil
}

// PushFront re-queues e, an entry of this queue popped or removed earlier, at
// the head: front entries are served before all others, in key order among
// themselves. It never fails and does not count against Capacity, so a
// preempted request is never lost. An entry still queued is moved to the front.
func (q *Queue[T]) PushFront(e *Entry[T]) {
	if e.owner != q {
		panic("queue: PushFront of an entry of another queue")
	}
	if e.index >= 0 {
		if !e.front {
			e.front = true
			q.front++
			q.up(e.index)
		}
		return
	}
	e.front = true
	q.front++
	q.insert(e)
}

// Peek returns the entry Pop would return, leaving it queued.
func (q *Queue[T]) Peek() (*Entry[T], bool) {
	if len(q.heap) == 0 {
		return nil, false
	}
	return q.heap[0], true
}

// Pop removes and returns the first entry.
func (q *Queue[T]) Pop() (*Entry[T], bool) {
	if len(q.heap) == 0 {
		return nil, false
	}
	e := q.heap[0]
	q.removeAt(0)
	return e, true
}

// Remove takes e out of the queue, reporting false if it was not queued.
func (q *Queue[T]) Remove(e *Entry[T]) bool {
	if e == nil || e.owner != q || e.index < 0 {
		return false
	}
	q.removeAt(e.index)
	return true
}

// EffectivePriority is e's level minus AgingRate levels per second waited
// until now; smaller is served first (front entries come before any).
func (q *Queue[T]) EffectivePriority(e *Entry[T], now time.Time) float64 {
	return float64(e.level) - q.cfg.AgingRate*now.Sub(e.arrival).Seconds()
}

// less orders the heap: front entries first, then by key; equal keys are
// served first come, first served: earlier arrival, then earlier push.
func less[T any](a, b *Entry[T]) bool {
	if a.front != b.front {
		return a.front
	}
	if a.key != b.key {
		return a.key < b.key
	}
	if !a.arrival.Equal(b.arrival) {
		return a.arrival.Before(b.arrival)
	}
	return a.seq < b.seq
}

func (q *Queue[T]) insert(e *Entry[T]) {
	e.index = len(q.heap)
	q.heap = append(q.heap, e)
	q.up(e.index)
}

func (q *Queue[T]) removeAt(i int) {
	e := q.heap[i]
	last := len(q.heap) - 1
	if i != last {
		q.swap(i, last)
	}
	q.heap[last] = nil
	q.heap = q.heap[:last]
	if i != last {
		if !q.down(i) {
			q.up(i)
		}
	}
	e.index = -1
	if e.front {
		q.front--
	}
}

func (q *Queue[T]) swap(i, j int) {
	h := q.heap
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (q *Queue[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !less(q.heap[i], q.heap[parent]) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down sifts i toward the leaves and reports whether it moved.
func (q *Queue[T]) down(i int) bool {
	start, n := i, len(q.heap)
	for {
		child := 2*i + 1
		if child >= n {
			break
		}
		if r := child + 1; r < n && less(q.heap[r], q.heap[child]) {
			child = r
		}
		if !less(q.heap[child], q.heap[i]) {
			break
		}
		q.swap(i, child)
		i = child
	}
	return i > start
}
