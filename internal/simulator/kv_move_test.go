package simulator

import (
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// With KV transfers, an overloaded pool with a host tier resumes paused
// programs on other pods with their KV fetched from the pod holding it
// (charged on the nodes' links), instead of waiting for that pod or
// recomputing; without them nothing moves. Every step of both runs
// completes.
func TestAgentsMoveKVBetweenPods(t *testing.T) {
	on, off := runMovingKV(t, nil)
	if on.KVFetches == 0 || on.KVMovedBlocks == 0 || on.KVMoveTime <= 0 {
		t.Fatalf("with transfers: %d fetches, %d blocks moved in %v", on.KVFetches, on.KVMovedBlocks, on.KVMoveTime)
	}
	if off.KVFetches != 0 || off.KVMovedBlocks != 0 {
		t.Fatalf("transfers off, yet %d fetches moved %d blocks", off.KVFetches, off.KVMovedBlocks)
	}
	if on.RecomputedTokens >= off.RecomputedTokens {
		t.Errorf("with transfers %d tokens recomputed, without %d", on.RecomputedTokens, off.RecomputedTokens)
	}
	t.Logf("transfers: %d fetches, %d blocks in %v; recomputed %d → %d tokens; %.1f → %.1f steps/min; p99 %v → %v",
		on.KVFetches, on.KVMovedBlocks, on.KVMoveTime, off.RecomputedTokens, on.RecomputedTokens,
		off.StepsPerMinute, on.StepsPerMinute, off.P(0.99), on.P(0.99))
}

// A hybrid model's programs move between pods too, each with its
// recurrent-state checkpoint: with transfers the pool fetches programs'
// KV and recomputes less than without (moving the blocks alone, without
// the checkpoint, recomputes as much as without transfers: a hybrid
// model resumes only from a checkpoint).
func TestAgentsMoveHybridKVBetweenPods(t *testing.T) {
	on, off := runMovingKV(t, func(s *AgentSetup) { s.Replica.Model, s.Replica.Accelerator = "qwen3.6-27b", "H200" })
	t.Logf("transfers: %d fetches, %d blocks in %v; recomputed %d → %d tokens; %.1f → %.1f steps/min",
		on.KVFetches, on.KVMovedBlocks, on.KVMoveTime, off.RecomputedTokens, on.RecomputedTokens, off.StepsPerMinute, on.StepsPerMinute)
	if on.KVFetches == 0 || on.KVMovedBlocks == 0 {
		t.Fatalf("with transfers: %d fetches, %d blocks moved", on.KVFetches, on.KVMovedBlocks)
	}
	if on.RecomputedTokens >= off.RecomputedTokens {
		t.Errorf("with transfers %d tokens recomputed, without %d", on.RecomputedTokens, off.RecomputedTokens)
	}
}

// runMovingKV runs an overloaded program-aware pool of three pods with a
// host tier (changed by model, when set) with KV transfers (on) and
// without (off).
func runMovingKV(t *testing.T, model func(*AgentSetup)) (on, off *AgentResult) {
	t.Helper()
	run := func(bandwidth float64) *AgentResult {
		s := smallPool(placement.ModeProgramAware)
		if model != nil {
			model(&s)
		}
		s.Pods, s.HostBlocks, s.NICBandwidth = 3, 2000, 50e9
		s.Policy.KVTransferBandwidth = bandwidth
		s.DrainAt = time.Minute
		r, err := RunAgents(smallAgents(), s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return run(placement.DefaultKVTransferBandwidth), run(0)
}
