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
