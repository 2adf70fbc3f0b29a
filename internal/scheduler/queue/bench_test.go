package queue

import (
	"testing"
	"time"
)

const benchSize = 10000

// filled returns a queue of benchSize entries with mixed levels and spread
// arrivals, and the arrival time of the next push.
func filled(b *testing.B) (*Queue[int], time.Time) {
	q := New[int](Config{AgingRate: 0.1, Epoch: t0})
	now := t0
	for i := range benchSize {
		now = now.Add(time.Millisecond)
		if _, err := q.Push(i, i%3, now); err != nil {
			b.Fatal(err)
		}
	}
	return q, now
}

// BenchmarkPushPop is one Push and one Pop on a queue of 10,000 entries.
func BenchmarkPushPop(b *testing.B) {
	q, now := filled(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		if _, err := q.Push(i, i%3, now); err != nil {
			b.Fatal(err)
		}
		if _, ok := q.Pop(); !ok {
			b.Fatal("empty")
		}
		i++
	}
	if q.Len() != benchSize {
		b.Fatalf("Len = %d", q.Len())
	}
}

// BenchmarkPopPushFront is a preemption round trip on a queue of 10,000
// entries; it allocates nothing.
func BenchmarkPopPushFront(b *testing.B) {
	q, _ := filled(b)
	b.ReportAllocs()
	for b.Loop() {
		e, _ := q.Pop()
		q.PushFront(e)
	}
}

// BenchmarkRemovePush removes an entry from the middle of a queue of 10,000
// entries (a cancelled request) and pushes a new one; the Push's Entry is the
// only allocation.
func BenchmarkRemovePush(b *testing.B) {
	q, now := filled(b)
	entries := make([]*Entry[int], 0, benchSize)
	entries = append(entries, q.heap...)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := (i * 7919) % benchSize
		if !q.Remove(entries[k]) {
			b.Fatal("not queued")
		}
		now = now.Add(time.Millisecond)
		e, err := q.Push(i, i%3, now)
		if err != nil {
			b.Fatal(err)
		}
		entries[k] = e
		i++
	}
}
