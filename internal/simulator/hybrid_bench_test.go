package simulator

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// The hybrid scenario (S5): a pool serving a hybrid model, whose
// recurrent layers need a saved state at the exact point a prefix hit
// ends. Its arms differ in which states the engines keep (and where
// programs are placed); none has a host tier, so the device's state slots
// alone decide (a host tier keeps the checkpoints they evict:
// TestAgentsHybridHostTier).

// defaultHybridModel is S5's model unless AGENTS_MODEL names a hybrid one.
const defaultHybridModel = "qwen3.6-35b-a3b"

// hybridBenchModel is S5's model: AGENTS_MODEL when it is hybrid, else
// defaultHybridModel.
func hybridBenchModel() string {
	if name := os.Getenv("AGENTS_MODEL"); name != "" {
		if g, err := sim.LookupGeometry(name); err == nil && g.Hybrid() {
			return g.Name
		}
	}
	return defaultHybridModel
}

// vllmAlignBlockSize is the block size vLLM gives a hybrid model with
// prefix caching (mamba_cache_mode "align"): an attention page must hold
// at least a recurrent layer's state (conv state in the model's BF16,
// the DeltaNet state in F32: mamba_ssm_dtype float32 in the Qwen3.5/3.6
// configs), so the attention block grows to state bytes over one layer's
// KV bytes a token, rounded up to 16 tokens. vLLM logs 528 tokens for
// Qwen3.5-4B ("Setting attention block size to 528 tokens to ensure that
// attention page size is >= mamba page size", vllm-project/vllm issue
// 40696); hybridBlockSizeTest checks this function gives it.
func vllmAlignBlockSize(g sim.Geometry) int {
	r := g.Recurrent
	state := 2*r.ConvStateFloats() + 4*r.DeltaStateFloats()
	perToken := 2 * g.KVHeads * g.HeadDim * 2
	n := (state + perToken - 1) / perToken
	return (n + 15) / 16 * 16
}

// stateArm runs the pool's engines keeping mode's states, with
// kvpilot's shipped placement or, for a baseline, Default's; blockSize,
// if set, replaces the KV block size.
func stateArm(name string, mode engine.CheckpointMode, kvpilot, baseline bool, blockSize int) agentArm {
	return agentArm{name: name, baseline: baseline, apply: func(s *AgentSetup) {
		if kvpilot {
			s.Policy = placement.DefaultPolicy()
		} else {
			baselineMode(s)
		}
		noHostTier(s)
		s.StateCheckpoints = mode
		if blockSize > 0 {
			s.Replica.BlockSize = blockSize
		}
	}}
}

// S5's arms, named by which states the engines keep.
var (
	// armPrograms is kvpilot: its placement, and each program's state
	// kept within a block of where its last turn ended.
	armPrograms = stateArm("programs", engine.CheckpointPrograms, true, false, 0)
	// armPrompts keeps the state at each prompt's last block boundary:
	// block-aligned prompt caching; a program's next turn recomputes its
	// last turn's output.
	armPrompts = stateArm("prompts", engine.CheckpointPrompts, false, true, 0)
	// armNone keeps no state: every turn prefills its whole context.
	armNone = stateArm("none", engine.CheckpointNone, false, true, 0)
	// armProgramsDefault is programs' engines under Default placement:
	// what keeping the states gives without kvpilot's placement.
	armProgramsDefault = stateArm("programs under Default placement", engine.CheckpointPrograms, false, false, 0)
)

// vllmAlignArm is what vLLM runs (mamba_cache_mode "align"): a state at
// every block boundary a request crosses, prompt or output, kept and
// evicted with the blocks, so a program's next turn resumes at the last
// boundary before its last turn's end; its blocks are vllmAlignBlockSize
// tokens. kvpilot's engine keeps the same resume point with programs'
// checkpoints, so the arm runs them at vLLM's block size under Default
// placement: a baseline, the one a vLLM user gets.
func vllmAlignArm(model string) agentArm {
	g, err := sim.LookupGeometry(model)
	if err != nil {
		panic(err)
	}
	bs := vllmAlignBlockSize(g)
	return stateArm(fmt.Sprintf("programs at %d-token blocks (vLLM align)", bs), engine.CheckpointPrograms, false, true, bs)
}

// hybridScenario is S5: 4 H200s serving a hybrid model (by default
// Qwen3.6-35B-A3B in BF16) to SWE-bench-like programs, 64 a pod.
func hybridScenario(scale func(time.Duration) time.Duration) agentScenario {
	s := agentSetup(placement.ModeDefault, 4)
	s.Replica.Model, s.Replica.Accelerator = hybridBenchModel(), "H200"
	s.Warmup, s.Window = scale(3*time.Minute), scale(10*time.Minute)
	return agentScenario{name: "S5 hybrid model, state between turns", workload: SWEBenchLike(256), setup: s,
		arms:    []agentArm{armPrograms, armPrompts, armNone, vllmAlignArm(s.Replica.Model), armProgramsDefault},
		kvpilot: armPrograms.name}
}

// printLaterTTFT prints, per arm, the time to first token of programs'
// later turns (pooled over seeds): from the step's issue and from when it
// reached an engine.
func printLaterTTFT(results map[string]*armResult, order []string) {
	fmt.Println("  time to first token of later turns (pooled over seeds): from issue p50, p90, p99; at the engine p50, p99:")
	for _, name := range order {
		r := results[name]
		issue, eng := r.laterTTFT()
		if len(issue) == 0 {
			continue
		}
		q := func(l []time.Duration, p float64) time.Duration {
			return (&Result{Latencies: l}).Percentile(p).Round(time.Millisecond)
		}
		fmt.Printf("    %-44s %9v %9v %9v   %9v %9v  (%d turns)\n", name, q(issue, 0.5), q(issue, 0.9), q(issue, 0.99), q(eng, 0.5), q(eng, 0.99), len(issue))
	}
}

// laterTTFT pools the seeds' later-turn times to first token.
func (r *armResult) laterTTFT() (issue, eng []time.Duration) {
	for _, x := range r.runs {
		issue = append(issue, x.LaterTTFT...)
		eng = append(eng, x.LaterEngineTTFT...)
	}
	return slices.Clip(issue), slices.Clip(eng)
}
