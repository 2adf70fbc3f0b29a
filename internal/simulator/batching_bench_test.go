package simulator

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkContinuousVsStatic replays the same Poisson/ShareGPT workload on
// the same simulated H100 (Llama-3.1-8B) with continuous batching (the real
// engine) and with static batching (the best of several batch sizes), and
// prints the throughput ratio and p50/p99 latencies. The simulation is
// deterministic (virtual time); run it once: -benchtime=1x.
func BenchmarkContinuousVsStatic(b *testing.B) {
	for range b.N {
		// Saturated: both strategies run at capacity; the ratio compares
		// throughput.
		compareBatching(b, 2000, 60)
		// Light: 4 req/s, below static batching's capacity too, so both
		// keep up and the latencies compare at equal throughput.
		fmt.Println()
		compareBatching(nil, 1000, 4)
	}
}

func compareBatching(b testing.TB, n int, rate float64) {
	setup := DefaultSetup()
	reqs := Poisson(n, rate, 1)
	fatal := func(err error) {
		if b == nil {
			panic(err)
		}
		b.Fatal(err)
	}
	cont, err := RunContinuous(reqs, setup)
	if err != nil {
		fatal(err)
	}
	var best *Result
	for _, size := range []int{8, 16, 32, 64, 128, 256} {
		st, err := RunStatic(reqs, setup, size)
		if err != nil {
			fatal(err)
		}
		fmt.Printf("  %-18s %7.2f req/s %9.0f tok/s  p50 %8v  p99 %8v\n", st.Name, st.Throughput(), st.TokenThroughput(),
			st.Percentile(0.5).Round(time.Millisecond), st.Percentile(0.99).Round(time.Millisecond))
		if best == nil || st.Throughput() > best.Throughput() {
			best = st
		}
	}
	fmt.Printf("  %-18s %7.2f req/s %9.0f tok/s  p50 %8v  p99 %8v\n", cont.Name, cont.Throughput(), cont.TokenThroughput(),
		cont.Percentile(0.5).Round(time.Millisecond), cont.Percentile(0.99).Round(time.Millisecond))
	ratio := cont.Throughput() / best.Throughput()
	fmt.Printf("workload: %d requests, Poisson %.0f req/s, ShareGPT lengths; H100-SXM, llama-3.1-8b (sim)\n", n, rate)
	fmt.Printf("continuous/static throughput: %.2f× (static best: %s; p99 %v vs %v)\n", ratio, best.Name,
		cont.Percentile(0.99).Round(time.Millisecond), best.Percentile(0.99).Round(time.Millisecond))
	if bb, ok := b.(*testing.B); ok && bb != nil {
		bb.ReportMetric(ratio, "continuous/static")
	}
}
