package simulator

import (
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// TestAgentsHybridStatesBetweenTurns: an H200 pod serving Qwen3.6-27B
// (dense, so a prefill's time follows its tokens) through the real
// engine, gate and fleet loop: keeping each program's
// state where its last turn ended recomputes fewer tokens than keeping
// only prompts' states, which recomputes fewer than keeping none; every
// later turn's time to first token is recorded, and with the programs'
// states its median is shorter than without.
func TestAgentsHybridStatesBetweenTurns(t *testing.T) {
	res := map[engine.CheckpointMode]*AgentResult{}
	for _, mode := range []engine.CheckpointMode{engine.CheckpointPrograms, engine.CheckpointPrompts, engine.CheckpointNone} {
		s := agentSetup(placement.ModeDefault, 1)
		s.Replica.Model, s.Replica.Accelerator = "qwen3.6-27b", "H200"
		s.Warmup, s.Window = 30*time.Second, time.Minute
		s.StateCheckpoints = mode
		r, err := RunAgents(smallAgents(), s)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if r.Steps == 0 || len(r.LaterTTFT) == 0 || len(r.LaterTTFT) != len(r.LaterEngineTTFT) {
			t.Fatalf("%s: %d steps, %d later turns timed (%d at the engine)", mode, r.Steps, len(r.LaterTTFT), len(r.LaterEngineTTFT))
		}
		res[mode] = r
	}
	programs, prompts, none := res[engine.CheckpointPrograms], res[engine.CheckpointPrompts], res[engine.CheckpointNone]
	if !(programs.RecomputedTokens < prompts.RecomputedTokens && prompts.RecomputedTokens < none.RecomputedTokens) {
		t.Errorf("recomputed tokens: programs %d, prompts %d, none %d: want decreasing with the states kept",
			programs.RecomputedTokens, prompts.RecomputedTokens, none.RecomputedTokens)
	}
	p50 := func(r *AgentResult) time.Duration { return (&Result{Latencies: r.LaterEngineTTFT}).Percentile(0.5) }
	if p50(programs) >= p50(none) {
		t.Errorf("later turns' median time to first token: programs %v, none %v", p50(programs), p50(none))
	}
	t.Logf("recomputed tokens: programs %d, prompts %d, none %d; later turns' median TTFT %v, %v, %v",
		programs.RecomputedTokens, prompts.RecomputedTokens, none.RecomputedTokens, p50(programs), p50(prompts), p50(none))
}

// TestVLLMAlignBlockSize: the block size vLLM picks for a hybrid model's
// prefix caching, for the shape vLLM reported it for (Qwen3.5-4B: 32
// value and 16 key DeltaNet heads of 128, a width-4 convolution, 4 KV
// heads of 256: 528 tokens), and for the profiles.
func TestVLLMAlignBlockSize(t *testing.T) {
	qwen35_4b := sim.Geometry{KVHeads: 4, HeadDim: 256, RecurrentLayers: 24}
	moe, _ := sim.LookupGeometry("qwen3.6-35b-a3b")
	qwen35_4b.Recurrent = moe.Recurrent
	dense, _ := sim.LookupGeometry("qwen3.6-27b")
	for _, c := range []struct {
		g    sim.Geometry
		want int
	}{{qwen35_4b, 528}, {moe, 1056}, {dense, 784}} {
		if got := vllmAlignBlockSize(c.g); got != c.want {
			t.Errorf("%s: %d tokens a block, want %d", c.g.Name, got, c.want)
		}
	}
}

// TestAgentsHybridHostTier: with fewer checkpoint slots than programs
// (16 running, 16 checkpoints for 32 programs), a host tier, split
// between blocks and state checkpoints as the runtime splits it, keeps
// the checkpoints the device evicts, and the programs recompute less.
func TestAgentsHybridHostTier(t *testing.T) {
	run := func(hostBlocks int) *AgentResult {
		s := agentSetup(placement.ModeDefault, 1)
		s.Replica.Model, s.Replica.Accelerator = "qwen3.6-27b", "H200"
		s.Replica.MaxNumSeqs = 16
		s.Warmup, s.Window = 30*time.Second, time.Minute
		s.HostBlocks = hostBlocks
		r, err := RunAgents(smallAgents(), s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	without, with := run(0), run(200_000)
	if with.RecomputedTokens >= without.RecomputedTokens {
		t.Errorf("recomputed %d tokens with the host tier, %d without", with.RecomputedTokens, without.RecomputedTokens)
	}
	t.Logf("recomputed tokens %d → %d with the host tier; %.1f → %.1f steps/min", without.RecomputedTokens, with.RecomputedTokens,
		without.StepsPerMinute, with.StepsPerMinute)
}
