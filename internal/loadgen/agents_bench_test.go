package loadgen

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// benchHostBlocks is each pod's host KV tier in the benchmark: 128 GiB of
// host memory per H100 (a node of 8 with 1–2 TiB), in 2 MiB blocks of 16
// Llama-3.1-8B tokens.
const benchHostBlocks = 128 << 30 / (16 * 131072)

// benchFairnessBound is the fairness bound of the "+ fairness" arm.
const benchFairnessBound = 30 * time.Second

func agentSetup(mode placement.Mode, pods int) AgentSetup {
	replica := DefaultSetup()
	replica.MaxModelLen = 65536
	policy := placement.DefaultPolicy()
	policy.Mode = mode
	return AgentSetup{Replica: replica, Pods: pods, Policy: policy, Interval: 5 * time.Second,
		Warmup: 3 * time.Minute, Window: 10 * time.Minute, Seed: 1}
}

// agentConfig is one arm of the comparison.
type agentConfig struct {
	name  string
	apply func(*AgentSetup)
}

func arm(name string, mode placement.Mode, host bool, bound time.Duration) agentConfig {
	return agentConfig{name: name, apply: func(s *AgentSetup) {
		s.Policy.Mode = mode
		if host {
			s.HostBlocks = benchHostBlocks
		}
		s.Policy.FairnessBound = bound
		if bound > 0 {
			s.Policy.WaitAging = 2 * bound
		}
	}}
}

// The arms: each mechanism's gain is the difference between two rows. The
// first is the baseline of every ratio; the last is kvpilot as shipped for
// agents (ProgramAware, host tier, fairness bound), the "ProgramAware" of
// the summary lines.
var agentConfigs = []agentConfig{
	arm("Default", placement.ModeDefault, false, 0),
	arm("Default+host", placement.ModeDefault, true, 0),
	arm("ProgramAware", placement.ModeProgramAware, false, 0),
	arm("PA+host", placement.ModeProgramAware, true, 0),
	arm("PA+host+fair", placement.ModeProgramAware, true, benchFairnessBound),
}

// BenchmarkAgents runs agentic workloads on a simulated pool of H100s
// serving Llama-3.1-8B, in virtual time through the real engine, block
// manager (with its host tier) and placement algorithm, sweeping the number
// of programs per pod; each point is the mean of two workload seeds. Two
// workload shapes: SWE-bench-like steps of ~850 new tokens, and the same
// with long tool outputs (~1,850 new tokens a step). Five arms: Default and
// ProgramAware placement, each with and without a host KV tier, and
// ProgramAware with the host tier and the fairness bound. Deterministic:
// run once with -benchtime=1x (make bench-agents).
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
			fmt.Printf("\nworkload %q: %d pods (H100-SXM, llama-3.1-8b, sim); %v warm-up, %v measured, mean of %d seeds; host tier %d blocks/pod, fairness bound %v\n",
				wl.name, pods, s.Warmup, s.Window, len(seeds), benchHostBlocks, benchFairnessBound)
			fmt.Printf("%-9s %-13s %9s %7s %8s %12s %12s %9s %9s %9s %7s %6s %9s\n",
				"programs", "arm", "steps/min", "hit", "preempt", "recomputed", "fresh", "p50", "p99", "max wait", "pauses", "fair", "offloaded")
			var low, high []AgentResult
			for k, perPod := range wl.perPods {
				var rows []AgentResult
				for _, c := range agentConfigs {
					agg := runSeeds(b, wl.make(perPod*pods), c, pods, seeds)
					n := int64(len(seeds))
					fmt.Printf("%-9d %-13s %9.1f %6.1f%% %8d %12d %12d %9v %9v %9v %7d %6d %9d\n", perPod*pods, c.name, agg.StepsPerMinute,
						100*agg.PrefixHitRate, agg.Preemptions/len(seeds), agg.RecomputedTokens/n, agg.FreshTokens/n,
						agg.P(0.5).Round(time.Second), agg.P(0.99).Round(time.Second), agg.MaxWait.Round(time.Second),
						agg.Pauses/len(seeds), agg.FairnessPauses/len(seeds), agg.OffloadedBlocks/n)
					rows = append(rows, agg)
				}
				last := len(rows) - 1
				fmt.Printf("PA+host+fair/Default at %d programs: steps/min %.2f×, p99 %.2f×\n", perPod*pods,
					rows[last].StepsPerMinute/rows[0].StepsPerMinute, ratio(rows[last].P(0.99), rows[0].P(0.99)))
				if k == 0 {
					low = rows
				}
				high = rows
			}
			last := len(high) - 1
			pa := ratioOf(high, 2, 0)
			fmt.Printf("fairness bound at %d programs (PA+host): off p99 %v max wait %v %.1f steps/min; on (%v) p99 %v max wait %v %.1f steps/min\n",
				wl.perPods[len(wl.perPods)-1]*pods, high[3].P(0.99).Round(time.Second), high[3].MaxWait.Round(time.Second), high[3].StepsPerMinute,
				benchFairnessBound, high[last].P(0.99).Round(time.Second), high[last].MaxWait.Round(time.Second), high[last].StepsPerMinute)
			summary = append(summary,
				fmt.Sprintf("ProgramAware/Default steps/min at high load: %.2f× (%s)", ratioOf(high, last, 0), wl.name),
				fmt.Sprintf("ProgramAware/Default p99 step latency at high load: %.2f× (%s)", ratio(high[last].P(0.99), high[0].P(0.99)), wl.name),
				fmt.Sprintf("ProgramAware/Default steps/min at low load: %.2f× (%s)", ratioOf(low, last, 0), wl.name),
				fmt.Sprintf("  each mechanism at high load: ProgramAware alone %.2f×, + host tier %.2f×, + fairness %.2f×; Default + host tier %.2f×",
					pa, ratioOf(high, 3, 0), ratioOf(high, last, 0), ratioOf(high, 1, 0)),
				fmt.Sprintf("  recomputed tokens at high load: ProgramAware %d → with host tier and fairness %d (%.1f× fewer)",
					high[2].RecomputedTokens/int64(len(seeds)), high[last].RecomputedTokens/int64(len(seeds)),
					float64(high[2].RecomputedTokens)/float64(max(high[last].RecomputedTokens, 1))))
			b.ReportMetric(ratioOf(high, last, 0), "programaware/default-"+strings.ReplaceAll(wl.name, " ", "-"))
		}
		fmt.Println()
		for _, l := range summary {
			fmt.Println(l)
		}
	}
}

func ratioOf(rows []AgentResult, i, j int) float64 {
	return rows[i].StepsPerMinute / rows[j].StepsPerMinute
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// runSeeds averages steps/min and hit rate over seeds, and pools the rest.
func runSeeds(b *testing.B, w AgentWorkload, c agentConfig, pods int, seeds []uint64) AgentResult {
	var agg AgentResult
	for _, seed := range seeds {
		s := agentSetup(placement.ModeDefault, pods)
		c.apply(&s)
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
		agg.FairnessPauses += r.FairnessPauses
		agg.OffloadedBlocks += r.OffloadedBlocks
		agg.MaxWait = max(agg.MaxWait, r.MaxWait)
		agg.StepLatency = append(agg.StepLatency, r.StepLatency...)
	}
	return agg
}
