package simulator

import (
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// TestAgentsGptOssWindowCache: an H100 pod serving gpt-oss-20b on a
// 4 GiB KV budget, through the real engine, gate and fleet loop: with the
// window cache (the default, as the runtime's) the pod pages its 12 full
// layers only and keeps two ring slots a sequence out of the same
// budget, so it holds about 1.5× the tokens of --swa-cache full at 32
// sequences; its programs, whose turns resume from ring checkpoints,
// recompute fewer tokens and complete at least as many steps.
func TestAgentsGptOssWindowCache(t *testing.T) {
	geo, _ := sim.LookupGeometry("gpt-oss-20b")
	acc, _ := sim.LookupAccelerator("H100-SXM")
	const budget = 4 << 30
	run := func(full bool) (*AgentResult, int) {
		s := agentSetup(placement.ModeDefault, 1)
		s.Replica.Model, s.Replica.Accelerator, s.Replica.FullSWACache = geo.Name, acc.Name, full
		s.Replica.MaxNumSeqs = 32
		s.Replica.MemFraction = float64(budget+geo.WeightBytes()+sim.ActivationReserve) / float64(acc.MemoryBytes)
		s.Warmup, s.Window = 30*time.Second, 2*time.Minute
		x, _, blocks, err := s.Replica.build(nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := RunAgents(smallAgents(), s)
		if err != nil {
			t.Fatalf("full %v: %v", full, err)
		}
		if r.Steps == 0 {
			t.Fatalf("full %v: no step completed", full)
		}
		if (x.StateSlots() > 0) == full {
			t.Errorf("full %v: %d state slots", full, x.StateSlots())
		}
		return r, blocks * s.Replica.BlockSize
	}
	window, wTokens := run(false)
	full, fTokens := run(true)
	t.Logf("4 GiB on H100, 32 seqs: window %d tokens, full %d (%.2f×); steps %d vs %d, recomputed %d vs %d, preemptions %d vs %d, prefix hits %d/%d vs %d/%d",
		wTokens, fTokens, float64(wTokens)/float64(fTokens), window.Steps, full.Steps, window.RecomputedTokens, full.RecomputedTokens,
		window.Preemptions, full.Preemptions, window.PrefixHits, window.PrefixQueries, full.PrefixHits, full.PrefixQueries)
	if ratio := float64(wTokens) / float64(fTokens); ratio < 1.4 || ratio >= 2 {
		t.Errorf("window holds %.2f× the tokens of full, want 1.4× to 2×", ratio)
	}
	if window.RecomputedTokens >= full.RecomputedTokens || window.Steps < full.Steps {
		t.Errorf("window: %d steps, %d tokens recomputed; full: %d, %d", window.Steps, window.RecomputedTokens, full.Steps, full.RecomputedTokens)
	}
}
