//go:build linux && (amd64 || arm64)

package ggml

import (
	"testing"
	"time"
)

// simulate runs graphs graphs of tokens tokens through a tuner of up to 2
// threads whose graphs cost cost(threads, graph) seconds per token, and
// returns the total time and how many graphs ran on 2 threads.
func simulate(tokens, graphs int, cost func(threads, graph int) float64) (total float64, on2 int) {
	t := newThreadTuner(2)
	for g := range graphs {
		i := t.pick(tokens)
		c := cost(t.counts[i], g) * float64(tokens)
		total += c
		if t.counts[i] == 2 {
			on2++
		}
		t.observe(i, tokens, time.Duration(c*float64(time.Second)))
	}
	return total, on2
}

// TestThreadTunerFollowsTheMachine: on cores of its own (2 threads 1.8×
// faster) the tuner runs almost every graph on 2 threads, losing at most 3%
// to its tries of 1 thread; when 2 threads collapse (20× slower than 1, a
// loaded machine) it runs on 1 and loses at most 5% to its tries of 2; and
// it follows the load coming and going.
func TestThreadTunerFollowsTheMachine(t *testing.T) {
	const graphs = 5000
	free := func(th, _ int) float64 { return map[int]float64{1: 1.8, 2: 1}[th] }
	total, on2 := simulate(1, graphs, free)
	if on2 < graphs*95/100 {
		t.Errorf("free cores: %d of %d graphs on 2 threads, want ≥ 95%%", on2, graphs)
	}
	if best := float64(graphs); total > 1.03*best {
		t.Errorf("free cores: %.0f s against %.0f s always on 2 threads", total, best)
	}

	loaded := func(th, _ int) float64 { return map[int]float64{1: 1, 2: 20}[th] }
	total, on2 = simulate(32, graphs, loaded)
	if best := float64(graphs) * 32; total > 1.05*best {
		t.Errorf("loaded: %.0f s against %.0f s always on 1 thread (%d graphs on 2 threads)", total, best, on2)
	}

	// Load from graph 1000 to 3000: 2 threads are best before and after.
	varying := func(th, g int) float64 {
		if g >= 1000 && g < 3000 {
			return loaded(th, g)
		}
		return free(th, g)
	}
	tu := newThreadTuner(2)
	var during, after int
	for g := range graphs {
		i := tu.pick(1)
		if g >= 1100 && g < 3000 && tu.counts[i] == 1 {
			during++
		}
		if g >= 4000 && tu.counts[i] == 2 {
			after++
		}
		tu.observe(i, 1, time.Duration(varying(tu.counts[i], g)*float64(time.Second)))
	}
	if want := (3000 - 1100) * 95 / 100; during < want {
		t.Errorf("under load: %d graphs on 1 thread from graph 1100 to 3000, want ≥ %d", during, want)
	}
	if n := graphs - 4000; after < n*95/100 {
		t.Errorf("after the load: %d of %d graphs on 2 threads", after, n)
	}
}

// TestThreadTunerCounts: a pool of 8 chooses among 8, 4, 2 and 1 threads.
func TestThreadTunerCounts(t *testing.T) {
	if got := newThreadTuner(8).counts; len(got) != 4 || got[0] != 8 || got[3] != 1 {
		t.Errorf("counts %v, want [8 4 2 1]", got)
	}
	if got := newThreadTuner(1).counts; len(got) != 1 {
		t.Errorf("counts %v, want [1]", got)
	}
}
