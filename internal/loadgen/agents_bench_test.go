package loadgen

import (
	"fmt"
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

// BenchmarkAgents runs the agentic workload (SWE-bench-like programs) on a
// simulated pool of H100s serving Llama-3.1-8B, in virtual time through the
// real engine and the real placement algorithm, ProgramAware against
// Default, sweeping the number of programs per pod; each point is the mean
// of two workload seeds. Deterministic: run once with -benchtime=1x (make
// bench-agents).
func BenchmarkAgents(b *testing.B) {
	const pods = 4
	seeds := []uint64{1, 2}
	for range b.N {
		s := agentSetup(placement.ModeDefault, pods)
		fmt.Printf("agentic workload: %d pods (H100-SXM, llama-3.1-8b, sim), SWE-bench-like programs; %v warm-up, %v measured, mean of %d seeds\n",
			pods, s.Warmup, s.Window, len(seeds))
		fmt.Printf("%-9s %-13s %9s %7s %8s %12s %12s %9s %9s %7s\n",
			"programs", "mode", "steps/min", "hit", "preempt", "recomputed", "fresh", "p50", "p99", "pauses")
		var ratio float64
		for _, perPod := range []int{8, 24, 32, 64} {
			var sm [2]float64
			for i, mode := range []placement.Mode{placement.ModeDefault, placement.ModeProgramAware} {
				var agg AgentResult
				var hit float64
				for _, seed := range seeds {
					s := agentSetup(mode, pods)
					s.Seed = seed
					r, err := RunAgents(SWEBenchLike(perPod*pods), s)
					if err != nil {
						b.Fatal(err)
					}
					agg.StepsPerMinute += r.StepsPerMinute / float64(len(seeds))
					hit += r.PrefixHitRate / float64(len(seeds))
					agg.Preemptions += r.Preemptions
					agg.RecomputedTokens += r.RecomputedTokens
					agg.FreshTokens += r.FreshTokens
					agg.Pauses += r.Pauses
					agg.StepLatency = append(agg.StepLatency, r.StepLatency...)
				}
				sm[i] = agg.StepsPerMinute
				n := int64(len(seeds))
				fmt.Printf("%-9d %-13s %9.1f %6.1f%% %8d %12d %12d %9v %9v %7d\n", perPod*pods, mode, agg.StepsPerMinute,
					100*hit, agg.Preemptions/len(seeds), agg.RecomputedTokens/n, agg.FreshTokens/n,
					agg.P(0.5).Round(time.Millisecond), agg.P(0.99).Round(time.Millisecond), agg.Pauses/len(seeds))
			}
			ratio = sm[1] / sm[0]
			fmt.Printf("ProgramAware/Default steps/min at %d programs: %.2f×\n", perPod*pods, ratio)
		}
		fmt.Printf("ProgramAware/Default steps/min at high load: %.2f×\n", ratio)
		b.ReportMetric(ratio, "programaware/default")
	}
}
