package queue

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestMatchesSortedModel runs random operations on a Queue and on a sorted
// slice that computes effective priorities at the current time, and expects
// the same answers. Arrivals are whole seconds and the rates dyadic, so
// priorities are exact and ties really happen.
func TestMatchesSortedModel(t *testing.T) {
	for _, rate := range []float64{0, 0.25, 1} {
		for _, capacity := range []int{0, 12} {
			rng := rand.New(rand.NewPCG(uint64(capacity), uint64(rate*100)))
			runModel(t, rng, rate, capacity, 5000)
		}
	}
}

type modelEntry struct {
	e       *Entry[int]
	level   int
	arrival int // seconds after t0
	seq     int
	front   bool
}

func runModel(t *testing.T, rng *rand.Rand, rate float64, capacity int, steps int) {
	t.Helper()
	q := New[int](Config{Capacity: capacity, AgingRate: rate, Epoch: t0.Add(time.Duration(rng.IntN(100)) * time.Second)})
	var model []*modelEntry // queued
	var out []*modelEntry   // popped or removed, may come back with PushFront
	now, seq := 0, 0

	// sorted orders the model the slow way: by effective priority now.
	sorted := func() []*modelEntry {
		s := slices.Clone(model)
		slices.SortStableFunc(s, func(a, b *modelEntry) int {
			switch {
			case a.front != b.front:
				if a.front {
					return -1
				}
				return 1
			}
			pa := float64(a.level) - rate*float64(now-a.arrival)
			pb := float64(b.level) - rate*float64(now-b.arrival)
			switch {
			case pa != pb:
				if pa < pb {
					return -1
				}
				return 1
			case a.arrival != b.arrival:
				return a.arrival - b.arrival
			}
			return a.seq - b.seq
		})
		return s
	}
	take := func(m *modelEntry) {
		model = slices.DeleteFunc(model, func(x *modelEntry) bool { return x == m })
		out = append(out, m)
	}
	for step := range steps {
		now += rng.IntN(3)
		switch r := rng.IntN(100); {
		case r < 36:
			// Arrivals are mostly in order, sometimes late.
			arrival := now - rng.IntN(2)*rng.IntN(30)
			level := rng.IntN(3)
			nonFront := 0
			for _, m := range model {
				if !m.front {
					nonFront++
				}
			}
			e, err := q.Push(seq, level, t0.Add(time.Duration(arrival)*time.Second))
			if capacity > 0 && nonFront >= capacity {
				if !errors.Is(err, ErrQueueFull) {
					t.Fatalf("step %d: Push with %d waiting = %v, want ErrQueueFull", step, nonFront, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: Push: %v", step, err)
			}
			model = append(model, &modelEntry{e: e, level: level, arrival: arrival, seq: seq})
			seq++
		case r < 70:
			e, ok := q.Pop()
			if len(model) == 0 {
				if ok {
					t.Fatalf("step %d: Pop of an empty queue returned %v", step, e.Value)
				}
				break
			}
			want := sorted()[0]
			if !ok || e != want.e {
				t.Fatalf("step %d: Pop = %v, want %d", step, e, want.e.Value)
			}
			take(want)
		case r < 82:
			if len(out) == 0 {
				break
			}
			i := rng.IntN(len(out))
			m := out[i]
			out = slices.Delete(out, i, i+1)
			q.PushFront(m.e)
			m.front = true
			model = append(model, m)
		case r < 94:
			if len(model) == 0 || rng.IntN(5) == 0 {
				if len(out) > 0 && q.Remove(out[rng.IntN(len(out))].e) {
					t.Fatalf("step %d: Remove of an entry not queued = true", step)
				}
				break
			}
			m := model[rng.IntN(len(model))]
			if !q.Remove(m.e) {
				t.Fatalf("step %d: Remove of a queued entry = false", step)
			}
			take(m)
		default:
			e, ok := q.Peek()
			if len(model) == 0 {
				if ok {
					t.Fatalf("step %d: Peek of an empty queue returned %v", step, e.Value)
				}
				break
			}
			if want := sorted()[0]; !ok || e != want.e {
				t.Fatalf("step %d: Peek = %v, want %d", step, e, want.e.Value)
			}
		}
		if q.Len() != len(model) {
			t.Fatalf("step %d: Len = %d, model has %d", step, q.Len(), len(model))
		}
		checkHeap(t, q)
	}
	// Draining gives the model's whole order.
	want := sorted()
	for i, m := range want {
		e, ok := q.Pop()
		if !ok || e != m.e {
			t.Fatalf("drain %d: Pop = %v, want %d", i, e, m.e.Value)
		}
	}
}
