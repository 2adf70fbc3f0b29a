//go:build linux && (amd64 || arm64)

package ggml

import (
	"math"
	"math/bits"
	"time"
)

// threadTuner chooses, graph by graph, how many of the CPU pool's threads
// to use, by measurement. ggml's CPU threads meet at a spinning barrier
// after every node of a graph; when the pod's cores are oversubscribed
// (other pods, other processes on a shared node) a descheduled thread
// stalls the ones spinning for it, and two threads can run a step 5-20
// times slower than one (docs/benchmarks.md), while on cores of its own the
// second thread nearly doubles the speed. So the tuner keeps, per thread
// count and per batch size class (tokens, in powers of two), a moving
// average of the seconds a token costs, runs the cheapest count, and now
// and then tries each other count on one graph; a count that keeps losing
// is tried ever more rarely (its period doubles up to maxExplorePeriod),
// so that a collapsed count costs little once learned, and is tried again
// soon once it wins. It is pure: the executor times the graphs.
type threadTuner struct {
	// counts are the thread counts it chooses among: the pool's size,
	// halved down to 1.
	counts []int
	// cost[i][class] is the average seconds per token with counts[i] (NaN:
	// not measured yet).
	cost [][]float64
	// since[i] counts the graphs since counts[i] last ran; period[i] is
	// how many graphs pass between its tries when it is not the best.
	since, period []int
}

const (
	sizeClasses      = 16
	explorePeriod    = 16
	maxExplorePeriod = 1024
	// costWeight is the weight of a new measurement in the moving
	// average.
	costWeight = 0.3
)

func newThreadTuner(maxThreads int) *threadTuner {
	t := &threadTuner{}
	for n := max(maxThreads, 1); ; n /= 2 {
		t.counts = append(t.counts, n)
		if n == 1 {
			break
		}
	}
	t.cost = make([][]float64, len(t.counts))
	for i := range t.cost {
		t.cost[i] = make([]float64, sizeClasses)
		for c := range t.cost[i] {
			t.cost[i][c] = math.NaN()
		}
	}
	t.since, t.period = make([]int, len(t.counts)), make([]int, len(t.counts))
	for i := range t.period {
		t.period[i] = explorePeriod
	}
	return t
}

func sizeClass(tokens int) int { return min(bits.Len(uint(max(tokens, 1))), sizeClasses-1) }

// best is the index of the cheapest measured count for a class; the
// largest count when none is measured.
func (t *threadTuner) best(class int) int {
	b := 0
	for i := range t.counts {
		if c := t.cost[i][class]; !math.IsNaN(c) && (math.IsNaN(t.cost[b][class]) || c < t.cost[b][class]) {
			b = i
		}
	}
	return b
}

// pick returns the index in counts of the thread count for a graph of
// tokens tokens: another count whose turn to be tried has come (one not
// yet measured for this class comes as soon as it is not the very first
// graph), else the best.
func (t *threadTuner) pick(tokens int) int {
	class := sizeClass(tokens)
	b := t.best(class)
	for i := range t.counts {
		if i == b {
			continue
		}
		if math.IsNaN(t.cost[i][class]) && t.since[i] > 0 || t.since[i] >= t.period[i] {
			return i
		}
	}
	return b
}

// observe records that counts[i] ran a graph of tokens tokens in d.
func (t *threadTuner) observe(i, tokens int, d time.Duration) {
	class := sizeClass(tokens)
	per := d.Seconds() / float64(max(tokens, 1))
	// The count in use is averaged; a count tried once in a while takes
	// its new measurement as it is, so that a count that collapsed under
	// load and recovered wins back at its next try, not after averaging
	// away its old cost over many rare tries.
	if c := t.cost[i][class]; math.IsNaN(c) || t.best(class) != i {
		t.cost[i][class] = per
	} else {
		t.cost[i][class] = c + costWeight*(per-c)
	}
	for j := range t.since {
		t.since[j]++
	}
	t.since[i] = 0
	if t.best(class) == i {
		t.period[i] = explorePeriod
	} else {
		t.period[i] = min(2*t.period[i], maxExplorePeriod)
	}
}
