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
// count and per batch size class (tokens, in powers of two), the seconds a
// token costs, runs the cheapest count, and tries each other count again
// once the graphs run since its last try took exploreShare⁻¹ times what
// the try is expected to lose: trying costs at most that share of the
// time however badly a count does, and a count that recovers (the load
// went away) is found again. It is pure: the executor times the graphs.
type threadTuner struct {
	// counts are the thread counts it chooses among: the pool's size,
	// halved down to 1.
	counts []int
	// cost[i][class] is the seconds per token with counts[i]: a moving
	// average while it is the best, its last try's otherwise (NaN: never
	// measured).
	cost [][]float64
	// waited[i] is the time of the graphs run since counts[i] last ran.
	waited []float64
	graphs int
}

const (
	sizeClasses = 16
	// exploreShare bounds the time spent trying counts that are not the
	// best.
	exploreShare = 0.02
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
	t.waited = make([]float64, len(t.counts))
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
// tokens tokens: a count not yet measured for its size (after the very
// first graph), or one whose next try is due, else the best.
func (t *threadTuner) pick(tokens int) int {
	class := sizeClass(tokens)
	b := t.best(class)
	for i := range t.counts {
		if i == b {
			continue
		}
		c := t.cost[i][class]
		if math.IsNaN(c) {
			if t.graphs > 0 {
				return i
			}
			continue
		}
		if loss := (c - t.cost[b][class]) * float64(tokens); t.waited[i]*exploreShare >= loss {
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
	// load and recovered wins back at its next try.
	if c := t.cost[i][class]; math.IsNaN(c) || t.best(class) != i {
		t.cost[i][class] = per
	} else {
		t.cost[i][class] = c + costWeight*(per-c)
	}
	for j := range t.waited {
		t.waited[j] += d.Seconds()
	}
	t.waited[i] = 0
	t.graphs++
}
