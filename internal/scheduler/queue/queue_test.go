package queue

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(seconds float64) time.Time { return t0.Add(time.Duration(seconds * float64(time.Second))) }

type push struct {
	name    string
	level   int
	arrival float64 // seconds after t0
}

// drain pops everything, returning the values in order.
func drain(t *testing.T, q *Queue[string]) []string {
	t.Helper()
	var out []string
	for q.Len() > 0 {
		peeked, _ := q.Peek()
		e, ok := q.Pop()
		if !ok || e != peeked {
			t.Fatalf("Pop = %v, %v; Peek said %v", e, ok, peeked)
		}
		if e.Queued() {
			t.Fatalf("popped entry %q still queued", e.Value)
		}
		out = append(out, e.Value)
		checkHeap(t, q)
	}
	if e, ok := q.Pop(); ok || e != nil {
		t.Fatalf("Pop of an empty queue = %v, %v", e, ok)
	}
	if e, ok := q.Peek(); ok || e != nil {
		t.Fatalf("Peek of an empty queue = %v, %v", e, ok)
	}
	return out
}

// checkHeap verifies the heap order, the entries' indices and the front count.
func checkHeap[T any](t *testing.T, q *Queue[T]) {
	t.Helper()
	front := 0
	for i, e := range q.heap {
		if e.index != i {
			t.Fatalf("heap[%d] has index %d", i, e.index)
		}
		if i > 0 && less(e, q.heap[(i-1)/2]) {
			t.Fatalf("heap[%d] orders before its parent", i)
		}
		if e.front {
			front++
		}
	}
	if front != q.front {
		t.Fatalf("%d front entries queued, count says %d", front, q.front)
	}
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name   string
		rate   float64
		pushes []push
		want   []string
	}{
		{
			name: "levels without aging",
			pushes: []push{
				{"low", 2, 0}, {"normal", 1, 1}, {"high", 0, 2}, {"normal2", 1, 3},
			},
			want: []string{"high", "normal", "normal2", "low"},
		},
		{
			name: "first come first served within a level",
			pushes: []push{
				{"b", 1, 2}, {"a", 1, 1}, {"c", 1, 3},
			},
			want: []string{"a", "b", "c"},
		},
		{
			name: "same arrival: push order",
			pushes: []push{
				{"first", 1, 5}, {"second", 1, 5}, {"third", 1, 5},
			},
			want: []string{"first", "second", "third"},
		},
		{
			name: "aging: a low request that waited long enough passes a high one",
			rate: 1,
			pushes: []push{
				{"fresh high", 0, 3}, {"old low", 2, 0},
			},
			want: []string{"old low", "fresh high"},
		},
		{
			name: "aging: not long enough",
			rate: 1,
			pushes: []push{
				{"old low", 2, 0}, {"fresh high", 0, 1.5},
			},
			want: []string{"fresh high", "old low"},
		},
		{
			name: "aging: ties after 1/rate seconds per level go to the earlier arrival",
			rate: 0.5,
			pushes: []push{
				{"high at 4s", 0, 4}, {"low at 0s", 2, 0}, {"normal at 2s", 1, 2},
			},
			want: []string{"low at 0s", "normal at 2s", "high at 4s"},
		},
		{
			name: "aging interleaves levels by waiting time",
			rate: 0.5,
			pushes: []push{
				{"low 0", 2, 0}, {"normal 1", 1, 1}, {"high 3", 0, 3}, {"normal 3.5", 1, 3.5}, {"high 5", 0, 5},
			},
			// keys: 2, 1.5, 1.5, 2.75, 2.5
			want: []string{"normal 1", "high 3", "low 0", "high 5", "normal 3.5"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := New[string](Config{AgingRate: tc.rate, Epoch: t0})
			for _, p := range tc.pushes {
				if _, err := q.Push(p.name, p.level, at(p.arrival)); err != nil {
					t.Fatalf("Push(%q): %v", p.name, err)
				}
				checkHeap(t, q)
			}
			if diff := cmp.Diff(tc.want, drain(t, q)); diff != "" {
				t.Fatalf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEffectivePriority(t *testing.T) {
	q := New[string](Config{AgingRate: 0.5})
	low, _ := q.Push("low", LevelLow, at(0))
	high, _ := q.Push("high", LevelHigh, at(4))
	tests := []struct {
		e    *Entry[string]
		now  float64
		want float64
	}{
		{low, 0, 2}, {low, 1, 1.5}, {low, 4, 0}, {low, 10, -3},
		{high, 4, 0}, {high, 6, -1},
	}
	for _, tc := range tests {
		if got := q.EffectivePriority(tc.e, at(tc.now)); got != tc.want {
			t.Errorf("EffectivePriority(%s, %vs) = %v, want %v", tc.e.Value, tc.now, got, tc.want)
		}
	}
	if low.Level() != LevelLow || !low.Arrival().Equal(at(0)) {
		t.Errorf("entry remembers level %d, arrival %v", low.Level(), low.Arrival())
	}
}

func TestDefaultEpochIsFirstArrival(t *testing.T) {
	// With the zero Epoch, keys count from the first arrival; years-old
	// arrivals would otherwise overflow time.Duration.
	q := New[string](Config{AgingRate: 1})
	if _, err := q.Push("late low", LevelLow, at(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push("high", LevelHigh, at(3)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"late low", "high"}, drain(t, q)); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
}

func TestPushFront(t *testing.T) {
	q := New[string](Config{Epoch: t0})
	entries := map[string]*Entry[string]{}
	for i, p := range []push{{"a", 2, 0}, {"b", 0, 1}, {"c", 1, 2}, {"d", 0, 3}} {
		e, err := q.Push(p.name, p.level, at(p.arrival))
		if err != nil {
			t.Fatalf("Push %d: %v", i, err)
		}
		entries[p.name] = e
	}
	// Pop b and d (both high), then re-queue them, d first: among
	// themselves front entries keep their order, and both precede c.
	for _, want := range []string{"b", "d"} {
		if e, _ := q.Pop(); e.Value != want {
			t.Fatalf("Pop = %q, want %q", e.Value, want)
		}
	}
	q.PushFront(entries["d"])
	q.PushFront(entries["b"])
	checkHeap(t, q)
	// A low entry still queued can be moved to the front too.
	q.PushFront(entries["a"])
	q.PushFront(entries["a"]) // twice is once
	checkHeap(t, q)
	if _, err := q.Push("e", LevelHigh, at(4)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "d", "a", "e", "c"}, drain(t, q)); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
	// A re-queued entry may be popped and re-queued again.
	q.PushFront(entries["c"])
	if e, _ := q.Pop(); e != entries["c"] || q.front != 0 {
		t.Fatalf("Pop = %v with %d front entries left", e, q.front)
	}
}

func TestPushFrontOfAnotherQueuePanics(t *testing.T) {
	a, b := New[int](Config{}), New[int](Config{})
	e, _ := a.Push(1, LevelNormal, t0)
	a.Pop()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	b.PushFront(e)
}

func TestRemove(t *testing.T) {
	q := New[string](Config{Epoch: t0})
	var entries []*Entry[string]
	for i := range 7 {
		e, err := q.Push(fmt.Sprint(i), i%3, at(float64(i)))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	// Order: 0 3 6 (high), 1 4 (normal), 2 5 (low).
	for _, i := range []int{4, 0, 5} {
		if !q.Remove(entries[i]) {
			t.Fatalf("Remove(%d) = false", i)
		}
		checkHeap(t, q)
		if q.Remove(entries[i]) {
			t.Fatalf("second Remove(%d) = true", i)
		}
	}
	other := New[string](Config{})
	if other.Remove(entries[1]) || q.Remove(nil) {
		t.Fatal("Remove of a foreign or nil entry = true")
	}
	if q.Len() != 4 {
		t.Fatalf("Len = %d, want 4", q.Len())
	}
	if diff := cmp.Diff([]string{"3", "6", "1", "2"}, drain(t, q)); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
	if q.Remove(entries[3]) {
		t.Fatal("Remove of a popped entry = true")
	}
}

func TestCapacity(t *testing.T) {
	q := New[string](Config{Capacity: 2, Epoch: t0})
	a, err := q.Push("a", LevelNormal, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push("b", LevelNormal, at(1)); err != nil {
		t.Fatal(err)
	}
	e, err := q.Push("c", LevelHigh, at(2))
	if !errors.Is(err, ErrQueueFull) || e != nil {
		t.Fatalf("Push past capacity = %v, %v; want ErrQueueFull", e, err)
	}
	if q.Len() != 2 {
		t.Fatalf("Len = %d after a rejected push", q.Len())
	}
	// A re-queued entry does not count: after popping a and putting it
	// back there is room for one more.
	if p, _ := q.Pop(); p != a {
		t.Fatalf("Pop = %v, want a", p.Value)
	}
	q.PushFront(a)
	if _, err := q.Push("c", LevelNormal, at(2)); err != nil {
		t.Fatalf("Push with a front entry queued: %v", err)
	}
	if _, err := q.Push("d", LevelNormal, at(3)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Push = %v, want ErrQueueFull", err)
	}
	// PushFront never fails, however full the queue.
	popped := []*Entry[string]{}
	for range 3 {
		p, _ := q.Pop()
		popped = append(popped, p)
	}
	for _, v := range []string{"x", "y"} {
		if _, err := q.Push(v, LevelLow, at(4)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range popped {
		q.PushFront(p)
	}
	checkHeap(t, q)
	if diff := cmp.Diff([]string{"a", "b", "c", "x", "y"}, drain(t, q)); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
}

func TestPushRejectsUnknownLevel(t *testing.T) {
	q := New[string](Config{})
	for _, level := range []int{-1, 3} {
		if e, err := q.Push("x", level, t0); err == nil || e != nil || errors.Is(err, ErrQueueFull) {
			t.Errorf("Push at level %d = %v, %v; want a level error", level, e, err)
		}
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d", q.Len())
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // "" means valid
	}{
		{cfg: Config{}},
		{cfg: Config{Capacity: 10, AgingRate: 0.1, Epoch: t0}},
		{cfg: Config{Capacity: -1}, want: "capacity"},
		{cfg: Config{AgingRate: -0.5}, want: "aging rate"},
		{cfg: Config{AgingRate: posInf()}, want: "aging rate"},
		{cfg: Config{AgingRate: nan()}, want: "aging rate"},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("Validate(%+v) = %v", tc.cfg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error about %s", tc.cfg, err, tc.want)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", tc.cfg)
				}
			}()
			New[int](tc.cfg)
		}()
	}
}

func TestPopPushFrontRemoveAllocateNothing(t *testing.T) {
	q := New[int](Config{AgingRate: 0.1, Epoch: t0})
	for i := range 1000 {
		if _, err := q.Push(i, i%3, at(float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		e, _ := q.Pop()
		q.PushFront(e)
		q.Remove(e)
		q.PushFront(e)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Pop+PushFront+Remove, want 0", allocs)
	}
}

func posInf() float64 { return 1 / zero() }
func nan() float64    { z := zero(); return z / z }
func zero() float64   { return 0 }
