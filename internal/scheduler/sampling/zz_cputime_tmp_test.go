package sampling

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZCPUTime(t *testing.T) {
	modes := []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"temperature", Params{Temperature: 1}},
		{"top-k 50", Params{Temperature: 0.7, TopK: 50}},
		{"top-p 0.9", Params{Temperature: 1, TopP: 0.9}},
		{"top-k 40 top-p 0.95", Params{Temperature: 0.8, TopK: 40, TopP: 0.95}},
	}
	for _, vocab := range []int{32000, 128256} {
		for _, shape := range []struct {
			name   string
			logits []float32
		}{{"peaked", peaked(vocab, 1)}, {"flat", flat(vocab, 1)}} {
			for _, m := range modes {
				var s Sampler
				rng := NewRNG(1)
				banned := []int32{2}
				s.Sample(shape.logits, &m.p, &rng, banned)
				best := time.Duration(1 << 62)
				for rep := 0; rep < 7; rep++ {
					n := 100
					c0 := cpuNow()
					for range n {
						s.Sample(shape.logits, &m.p, &rng, banned)
					}
					if d := (cpuNow() - c0) / time.Duration(n); d < best {
						best = d
					}
				}
				fmt.Printf("vocab=%d/%s/%s\t%v\n", vocab, shape.name, m.name, best)
			}
		}
	}
}
