package loadgen

import (
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// smallPool is two L4s serving Llama-3.1-8B: ~38k KV tokens each, so a
// dozen growing agent programs overflow it.
func smallPool(mode placement.Mode) AgentSetup {
	s := agentSetup(mode, 2)
	s.Replica.Accelerator = "L4"
	s.Warmup, s.Window = 30*time.Second, 2*time.Minute
	return s
}

func smallAgents() AgentWorkload {
	w := SWEBenchLike(32)
	w.InitialContext.Mean, w.InitialContext.Max = 2000, 4000
	w.MinSteps, w.MaxSteps = 6, 10
	return w
}

func TestAgentsProgramAwarePausesAndResumesUnderOverload(t *testing.T) {
	r, err := RunAgents(smallAgents(), smallPool(placement.ModeProgramAware))
	if err != nil {
		t.Fatal(err)
	}
	if r.Steps == 0 || r.Pauses == 0 || r.Resumes == 0 {
		t.Fatalf("steps %d pauses %d resumes %d: an overloaded pool must pause and resume", r.Steps, r.Pauses, r.Resumes)
	}
	if len(r.StepLatency) != r.Steps {
		t.Errorf("%d latencies for %d steps", len(r.StepLatency), r.Steps)
	}
	d, err := RunAgents(smallAgents(), smallPool(placement.ModeDefault))
	if err != nil {
		t.Fatal(err)
	}
	if d.Pauses != 0 || d.Resumes != 0 {
		t.Errorf("Default mode paused %d and resumed %d programs", d.Pauses, d.Resumes)
	}
	if r.RecomputedTokens >= d.RecomputedTokens {
		t.Errorf("ProgramAware recomputed %d tokens, Default %d: pausing should keep caches warm",
			r.RecomputedTokens, d.RecomputedTokens)
	}
	t.Logf("ProgramAware %.1f steps/min (hit %.2f), Default %.1f (hit %.2f)",
		r.StepsPerMinute, r.PrefixHitRate, d.StepsPerMinute, d.PrefixHitRate)
}

// TestAgentsHostTierCutsRecompute: with a host tier, paused programs' KV is
// offloaded and restored instead of recomputed.
func TestAgentsHostTierCutsRecompute(t *testing.T) {
	without, err := RunAgents(smallAgents(), smallPool(placement.ModeProgramAware))
	if err != nil {
		t.Fatal(err)
	}
	s := smallPool(placement.ModeProgramAware)
	s.HostBlocks = 8192
	with, err := RunAgents(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	if with.Pauses == 0 || with.OffloadedBlocks == 0 || with.RestoredBlocks == 0 {
		t.Fatalf("pauses %d, %d blocks offloaded, %d restored: pauses must go through the host tier",
			with.Pauses, with.OffloadedBlocks, with.RestoredBlocks)
	}
	if with.RecomputedTokens >= without.RecomputedTokens {
		t.Errorf("recomputed %d tokens with the host tier, %d without", with.RecomputedTokens, without.RecomputedTokens)
	}
	t.Logf("recomputed tokens %d → %d; %.1f → %.1f steps/min; %d blocks offloaded, %d restored",
		without.RecomputedTokens, with.RecomputedTokens, without.StepsPerMinute, with.StepsPerMinute,
		with.OffloadedBlocks, with.RestoredBlocks)
}

// TestAgentsFairnessBoundsTheWait: with the fairness bound, no step waits
// much longer than the bound plus a step, while without it some wait longer.
func TestAgentsFairnessBoundsTheWait(t *testing.T) {
	const bound = 20 * time.Second
	off, err := RunAgents(smallAgents(), smallPool(placement.ModeProgramAware))
	if err != nil {
		t.Fatal(err)
	}
	s := smallPool(placement.ModeProgramAware)
	s.Policy.FairnessBound = bound
	on, err := RunAgents(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	if on.FairnessPauses == 0 {
		t.Fatal("the fairness bound paused nobody under overload")
	}
	if on.MaxWait >= off.MaxWait {
		t.Errorf("longest wait %v with the bound, %v without", on.MaxWait, off.MaxWait)
	}
	t.Logf("longest wait %v → %v, p99 step %v → %v, %.1f → %.1f steps/min, %d fairness pauses",
		off.MaxWait, on.MaxWait, off.P(0.99), on.P(0.99), off.StepsPerMinute, on.StepsPerMinute, on.FairnessPauses)
}
