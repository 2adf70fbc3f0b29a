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

// agentConfig is one arm of the agentic comparison: a name for the tables
// and what it changes in the simulated pool. New arms (another policy, a
// host KV tier) are one more entry in agentLoadConfigs.
type agentConfig struct {
	name  string
	apply func(*AgentSetup)
}

func modeConfig(m placement.Mode) agentConfig {
	return agentConfig{name: string(m), apply: func(s *AgentSetup) { s.Policy.Mode = m }}
}

// cappedDefault is Default placement behind a per-pod program cap: what a
// user gets from vLLM by capping the agent framework's worker count.
func cappedDefault(perPod int) agentConfig {
	return agentConfig{name: fmt.Sprintf("Default cap %d/pod", perPod), apply: func(s *AgentSetup) {
		s.Policy.Mode, s.ProgramCap = placement.ModeDefault, perPod
	}}
}

// benchHostBlocks is each pod's host KV tier in the host-tier arms: 128 GiB
// of host memory per H100 (a node of 8 with 1–2 TiB), in 2 MiB blocks of 16
// Llama-3.1-8B tokens.
const benchHostBlocks = 128 << 30 / (16 * 131072)

// benchFairnessBound is the fairness bound of the "+fair" arm.
const benchFairnessBound = 30 * time.Second

// hostArm is a mode with the host KV tier, and optionally the fairness
// bound (wait aging at twice the bound), without device overcommit (the
// "+oc" arm adds it, as the SchedulerPolicy default does).
func hostArm(name string, m placement.Mode, bound time.Duration) agentConfig {
	return agentConfig{name: name, apply: func(s *AgentSetup) {
		s.Policy.Mode, s.HostBlocks = m, benchHostBlocks
		s.Policy.FairnessBound, s.Policy.WaitAging = bound, 2*bound
		s.Policy.DeviceOvercommit = 1
	}}
}

// benchDeviceOvercommit is the last arm's placement.Policy.DeviceOvercommit.
const benchDeviceOvercommit = 2

// overcommitArm is PA+host+fair whose pods with a host tier take programs
// up to benchDeviceOvercommit times their device KV.
func overcommitArm() agentConfig {
	fair := hostArm("", placement.ModeProgramAware, benchFairnessBound)
	return agentConfig{name: "PA+host+fair+oc", apply: func(s *AgentSetup) {
		fair.apply(s)
		s.Policy.DeviceOvercommit = benchDeviceOvercommit
	}}
}

// agentLoadConfigs run at every program count; the first is the baseline
// of the "X/Default at high load" ratios, and the last is kvpilot as it
// serves agents (ProgramAware, host tier, fairness bound, device
// overcommit): the "ProgramAware" of the summary lines. Each mechanism's
// gain is the difference between two rows.
var agentLoadConfigs = []agentConfig{
	modeConfig(placement.ModeDefault),
	hostArm("Default+host", placement.ModeDefault, 0),
	modeConfig(placement.ModeProgramAware),
	hostArm("PA+host", placement.ModeProgramAware, 0),
	hostArm("PA+host+fair", placement.ModeProgramAware, benchFairnessBound),
	overcommitArm(),
}

// oracleDeviceBlocks is each pod's device KV in the oracle arm: 2^19
// blocks (8.4M tokens, 18× an H100's after the weights), more than twice
// every token a pod of the benchmark's highest load computes in a run, so
// no block is ever evicted (the benchmark checks it).
const oracleDeviceBlocks = 1 << 19

// oracleArm bounds steps/min from above on this pool: Default placement
// (never pauses) on the same pods, compute model, workload and seeds, with
// device KV that never fills, so no cached block is evicted and no request
// is preempted or held: every step's prompt hits the cache up to its last,
// partial block. No placement or caching policy can beat it
// by keeping caches warm; it leaves only the compute and the tool times.
var oracleArm = agentConfig{name: "Oracle (KV never full)", apply: func(s *AgentSetup) {
	s.Policy.Mode, s.DeviceBlocks = placement.ModeDefault, oracleDeviceBlocks
}}

// serialCopiesArm is kvpilot's arm with every copy between the tiers run
// before its iteration (engine.Config.SerialCopies): the gain of
// overlapping them.
var serialCopiesArm = agentConfig{name: "PA+host+fair+oc serial", apply: func(s *AgentSetup) {
	overcommitArm().apply(s)
	s.SerialCopies = true
}}

// agentCaps is the per-pod program caps swept for the capped-Default
// baseline at each workload's highest load. One list for both workloads, so
// each workload's best cap has also been run on the other.
var agentCaps = []int{12, 16, 20, 24, 28, 32}

// BenchmarkAgents runs agentic workloads on a simulated pool of H100s
// serving Llama-3.1-8B, in virtual time through the real engine and the real
// placement algorithm, ProgramAware against Default, sweeping the number of
// programs per pod; each point is the mean of two workload seeds. Then, at
// the highest load, Default behind a per-pod program cap, sweeping the cap:
// the best cap is the tuned baseline ProgramAware must match without one,
// and each workload's best cap is shown on the other workload too. Two
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
		var summary []string
		bestCap := map[string]int{}
		capped := map[string]map[int]float64{} // workload → cap → steps/min
		for _, wl := range workloads {
			s := agentSetup(placement.ModeDefault, pods)
			fmt.Printf("\nworkload %q: %d pods (H100-SXM, llama-3.1-8b, sim); %v warm-up, %v measured, mean of %d seeds\n",
				wl.name, pods, s.Warmup, s.Window, len(seeds))
			printAgentHeader()
			var high []float64 // steps/min per config at the highest load
			var lowRows, highRows []AgentResult
			for k, perPod := range wl.perPods {
				high = high[:0]
				var rows []AgentResult
				for _, c := range agentLoadConfigs {
					agg := runSeeds(b, wl.make(perPod*pods), c, pods, seeds)
					printAgentRow(perPod*pods, c.name, agg, len(seeds))
					high = append(high, agg.StepsPerMinute)
					rows = append(rows, agg)
				}
				if k == 0 {
					lowRows = rows
				}
				highRows = rows
				for i, c := range agentLoadConfigs[1:] {
					fmt.Printf("%s/Default (uncapped) steps/min at %d programs: %.2f×\n", c.name, perPod*pods, high[i+1]/high[0])
				}
			}
			n := wl.perPods[len(wl.perPods)-1] * pods
			oracle := runSeeds(b, wl.make(n), oracleArm, pods, seeds)
			printAgentRow(n, oracleArm.name, oracle, len(seeds))
			if oracle.EvictedBlocks != 0 || oracle.Preemptions != 0 {
				b.Fatalf("oracle arm at %d programs evicted %d blocks and preempted %d requests: its device KV must never fill",
					n, oracle.EvictedBlocks, oracle.Preemptions)
			}
			serial := runSeeds(b, wl.make(n), serialCopiesArm, pods, seeds)
			printAgentRow(n, serialCopiesArm.name, serial, len(seeds))
			fmt.Printf("capped Default at %d programs:\n", n)
			capped[wl.name] = map[int]float64{}
			best := 0
			for _, perPod := range agentCaps {
				agg := runSeeds(b, wl.make(n), cappedDefault(perPod), pods, seeds)
				printAgentRow(n, cappedDefault(perPod).name, agg, len(seeds))
				capped[wl.name][perPod] = agg.StepsPerMinute
				if best == 0 || agg.StepsPerMinute > capped[wl.name][best] {
					best = perPod
				}
			}
			bestCap[wl.name] = best
			pa := high[len(high)-1]
			uncapped := pa / high[0]
			summary = append(summary, agentSummary(wl.name, n, lowRows, highRows, len(seeds))...)
			summary = append(summary, fmt.Sprintf("  ceiling at %d programs: %s %.1f steps/min, %.2f× Default; ProgramAware %.2f× Default is %.0f%% of it",
				n, oracleArm.name, oracle.StepsPerMinute, oracle.StepsPerMinute/high[0], uncapped, 100*pa/oracle.StepsPerMinute))
			podTime := time.Duration(pods*len(seeds)) * agentSetup(placement.ModeDefault, pods).Window
			stall := func(r AgentResult) float64 { return 100 * float64(r.CopyStall) / float64(podTime) }
			summary = append(summary, fmt.Sprintf("  copies beside the iterations at %d programs: ProgramAware %.1f steps/min (copy stall %.1f%% of pod time), serially %.1f (%.1f%%): %.2f×",
				n, pa, stall(highRows[len(highRows)-1]), serial.StepsPerMinute, stall(serial), pa/serial.StepsPerMinute))
			summary = append(summary,
				fmt.Sprintf("ProgramAware/best-capped-Default steps/min: %.2f× (%s)", pa/capped[wl.name][best], wl.name),
				fmt.Sprintf("  at %d programs: ProgramAware %.1f, best cap %d/pod %.1f", n, pa, best, capped[wl.name][best]))
			b.ReportMetric(uncapped, "programaware/default-"+strings.ReplaceAll(wl.name, " ", "-"))
			b.ReportMetric(pa/capped[wl.name][best], "programaware/best-capped-"+strings.ReplaceAll(wl.name, " ", "-"))
		}
		// A cap is tuned for one workload: the other workload's best cap,
		// applied here, against this workload's own best.
		for _, wl := range workloads {
			for _, other := range workloads {
				if other.name == wl.name {
					continue
				}
				c := bestCap[other.name]
				summary = append(summary, fmt.Sprintf("cap %d/pod (best for %s) on %s: %.1f steps/min, %.2f× of its own best cap %d/pod",
					c, other.name, wl.name, capped[wl.name][c], capped[wl.name][c]/capped[wl.name][bestCap[wl.name]], bestCap[wl.name]))
			}
		}
		fmt.Println()
		for _, l := range summary {
			fmt.Println(l)
		}
	}
}

func printAgentHeader() {
	fmt.Printf("%-9s %-22s %9s %7s %8s %12s %12s %9s %9s %7s %9s %7s %6s %9s\n",
		"programs", "mode", "steps/min", "hit", "preempt", "recomputed", "fresh", "p50", "p99", "held@end", "max wait", "pauses", "fair", "offloaded")
}

func printAgentRow(programs int, name string, agg AgentResult, seeds int) {
	n := int64(seeds)
	fmt.Printf("%-9d %-22s %9.1f %6.1f%% %8d %12d %12d %9v %9v %7.1f %9v %7d %6d %9d\n", programs, name, agg.StepsPerMinute,
		100*agg.PrefixHitRate, agg.Preemptions/seeds, agg.RecomputedTokens/n, agg.FreshTokens/n,
		agg.P(0.5).Round(time.Millisecond), agg.P(0.99).Round(time.Millisecond),
		float64(agg.HeldAtEnd)/float64(seeds), agg.MaxWait.Round(time.Second), agg.Pauses/seeds,
		agg.FairnessPauses/seeds, agg.OffloadedBlocks/n)
}

// agentSummary is a workload's lines against the targets: kvpilot
// for agents (the last arm) over Default (the first) in steps/min and p99
// step latency at high load, parity at low load, each mechanism's share,
// recomputed tokens, and the fairness bound off and on.
func agentSummary(name string, programs int, low, high []AgentResult, seeds int) []string {
	const hostOnly, paAlone, paHost, paFair = 1, 2, 3, 4
	last := len(high) - 1
	sm := func(rows []AgentResult, i int) float64 { return rows[i].StepsPerMinute / rows[0].StepsPerMinute }
	p99 := func(i int) float64 { return float64(high[i].P(0.99)) / float64(max(high[0].P(0.99), 1)) }
	n := int64(seeds)
	return []string{
		fmt.Sprintf("ProgramAware/Default steps/min at high load: %.2f× (%s)", sm(high, last), name),
		fmt.Sprintf("ProgramAware/Default p99 step latency at high load: %.2f× (%s)", p99(last), name),
		fmt.Sprintf("ProgramAware/Default steps/min at low load: %.2f× (%s)", sm(low, last), name),
		fmt.Sprintf("  at %d programs, steps/min over Default: Default+host %.2f×, ProgramAware alone %.2f×, PA+host %.2f×, PA+host+fair %.2f×, PA+host+fair+oc (%v× device) %.2f×",
			programs, sm(high, hostOnly), sm(high, paAlone), sm(high, paHost), sm(high, paFair), benchDeviceOvercommit, sm(high, last)),
		fmt.Sprintf("  p99 step latency at %d programs over Default: PA+host+fair %.2f×, PA+host+fair+oc %.2f×", programs, p99(paFair), p99(last)),
		fmt.Sprintf("  recomputed tokens at %d programs: ProgramAware %d, PA+host %d, PA+host+fair %d, PA+host+fair+oc %d (%.1f× fewer than ProgramAware)",
			programs, high[paAlone].RecomputedTokens/n, high[paHost].RecomputedTokens/n, high[paFair].RecomputedTokens/n, high[last].RecomputedTokens/n,
			float64(high[paAlone].RecomputedTokens)/float64(max(high[last].RecomputedTokens, 1))),
		fmt.Sprintf("  fairness bound at %d programs (PA+host): off p99 %v, max wait %v, %.1f steps/min; on (%v) p99 %v, max wait %v, %.1f steps/min",
			programs, high[paHost].P(0.99).Round(time.Second), high[paHost].MaxWait.Round(time.Second), high[paHost].StepsPerMinute,
			benchFairnessBound, high[paFair].P(0.99).Round(time.Second), high[paFair].MaxWait.Round(time.Second), high[paFair].StepsPerMinute),
	}
}

// runSeeds averages steps/min and hit rate over seeds, pools latencies,
// sums counts (the caller divides by the seeds) and keeps the longest wait.
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
		agg.HeldAtEnd += r.HeldAtEnd
		agg.FairnessPauses += r.FairnessPauses
		agg.OffloadedBlocks += r.OffloadedBlocks
		agg.RestoredBlocks += r.RestoredBlocks
		agg.SpilledBlocks += r.SpilledBlocks
		agg.EvictedBlocks += r.EvictedBlocks
		agg.ComputeTime += r.ComputeTime
		agg.CopyTime += r.CopyTime
		agg.CopyStall += r.CopyStall
		agg.MaxWait = max(agg.MaxWait, r.MaxWait)
		agg.StepLatency = append(agg.StepLatency, r.StepLatency...)
	}
	return agg
}
