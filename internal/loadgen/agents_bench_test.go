package loadgen

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

func agentSetup(mode placement.Mode, pods int) AgentSetup {
	replica := DefaultSetup()
	replica.MaxModelLen = 65536
	policy := placement.DefaultPolicy()
	policy.Mode = mode
	return AgentSetup{Replica: replica, Pods: pods, Policy: policy, Interval: 5 * time.Second,
		Warmup: 3 * time.Minute, Window: 10 * time.Minute, Seed: 1}
}

// BenchmarkAgents runs agentic workloads on a simulated pool of H100s
// serving Llama-3.1-8B, in virtual time through the real engine and the real
// placement algorithm, ProgramAware against Default, sweeping the number of
// programs per pod; each point is the mean of two workload seeds. Two
// workload shapes: SWE-bench-like steps of ~850 new tokens, and the same
// with long tool outputs (~1,850 new tokens a step). Deterministic: run
// once with -benchtime=1x (make bench-agents).
func BenchmarkAgents(b *testing.B) {
	const pods = 4
	seeds := []uint64{1, 2}
	workloads := []struct {
		name    string
		make    func(int) AgentWorkload
		perPods []int
	}{
		{"swe-bench-like", SWEBenchLike, []int{8, 24, 32, 64}},
		{"long tool outputs", LongToolOutputs, []int{8, 16, 32}},
	}
	for range b.N {
		s := agentSetup(placement.ModeDefault, pods)
		var summary []string
		for _, wl := range workloads {
			fmt.Printf("\nworkload %q: %d pods (H100-SXM, llama-3.1-8b, sim); %v warm-up, %v measured, mean of %d seeds\n",
				wl.name, pods, s.Warmup, s.Window, len(seeds))
			fmt.Printf("%-9s %-13s %9s %7s %8s %12s %12s %9s %9s %7s\n",
				"programs", "mode", "steps/min", "hit", "preempt", "recomputed", "fresh", "p50", "p99", "pauses")
			var ratio float64
			for _, perPod := range wl.perPods {
				var sm [2]float64
				for i, mode := range []placement.Mode{placement.ModeDefault, placement.ModeProgramAware} {
					agg := runSeeds(b, wl.make(perPod*pods), mode, pods, seeds)
					sm[i] = agg.StepsPerMinute
					n := int64(len(seeds))
					fmt.Printf("%-9d %-13s %9.1f %6.1f%% %8d %12d %12d %9v %9v %7d\n", perPod*pods, mode, agg.StepsPerMinute,
						100*agg.PrefixHitRate, agg.Preemptions/len(seeds), agg.RecomputedTokens/n, agg.FreshTokens/n,
						agg.P(0.5).Round(time.Millisecond), agg.P(0.99).Round(time.Millisecond), agg.Pauses/len(seeds))
				}
				ratio = sm[1] / sm[0]
				fmt.Printf("ProgramAware/Default steps/min at %d programs: %.2f×\n", perPod*pods, ratio)
			}
			summary = append(summary, fmt.Sprintf("ProgramAware/Default steps/min at high load: %.2f× (%s)", ratio, wl.name))
			b.ReportMetric(ratio, "programaware/default-"+strings.ReplaceAll(wl.name, " ", "-"))
		}
		fmt.Println()
		for _, l := range summary {
			fmt.Println(l)
		}
	}
}

// runSeeds averages steps/min and hit rate over seeds, and pools the rest.
func runSeeds(b *testing.B, w AgentWorkload, mode placement.Mode, pods int, seeds []uint64) AgentResult {
	var agg AgentResult
	for _, seed := range seeds {
		s := agentSetup(mode, pods)
		s.Seed = seed
		r, err := RunAgents(w, s)
		if err != nil {
			b.Fatal(err)
		}
		agg.StepsPerMinute += r.StepsPerMinute / float64(len(seeds))
		agg.PrefixHitRate += r.PrefixHitRate / float64(len(seeds))
		agg.Preemptions += r.Preemptions
		agg.RecomputedTokens += r.RecomputedTokens
		agg.FreshTokens += r.FreshTokens
		agg.Pauses += r.Pauses
		agg.StepLatency = append(agg.StepLatency, r.StepLatency...)
	}
	return agg
}
