package engine

import (
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Observer receives the engine's statistics: the KV geometry once, a
// snapshot after every iteration, and a record of every finished request.
// The runtime turns them into Prometheus metrics under vLLM's names
// (internal/runtime/metrics); tests and simulations record them directly.
// The engine itself knows nothing about any metrics system.
//
// Contract:
//   - Calls never overlap and arrive in order: the engine makes them while
//     holding its state lock, so an implementation needs no locking of its
//     own for state only these methods touch.
//   - They must be quick and must not block, and must not call back into
//     the Engine (that would deadlock): the iteration loop waits for them.
//   - The pointers passed, and the slices inside them, are the engine's
//     scratch space, valid only during the call; they are reused by the next
//     one (that is how the iteration loop stays allocation-free). Copy what
//     has to outlive the call.
//   - An implementation that allocates per call makes every iteration
//     allocate; the Prometheus adapter does not.
type Observer interface {
	// CacheConfig is called once, by New, with the KV cache's geometry.
	CacheConfig(blockSize, numBlocks int)
	// Iteration is called after every Step (also the ones that scheduled
	// nothing, so the gauges follow cancellations and drains).
	Iteration(*IterationStats)
	// RequestFinished is called exactly once per submitted request, when it
	// finishes for any reason (including cancellation and abort).
	RequestFinished(*RequestStats)
}

// IterationStats describe one iteration and the engine's state after it.
type IterationStats struct {
	// Time is when the iteration's results were applied (engine clock).
	Time time.Time
	// Running and Waiting are the request counts after the iteration.
	Running, Waiting int
	// KV are the block manager's statistics after the iteration; its
	// prefix-cache query and hit counts are cumulative.
	KV kvcache.Stats
	// States are a hybrid model's recurrent states (zero for others).
	States StateStats
	// Scheduled is the number of sequences the executor ran (0: nothing ran;
	// the other counts may still be non-zero from cancellations).
	Scheduled int
	// Tokens is the number of tokens the executor processed (prompt and
	// generated tokens alike).
	Tokens int
	// PromptTokens is the prompt length of every request whose prefill
	// completed in this iteration (it produced its first token), as vLLM
	// counts them: prefix-cache hits included, chunks counted once.
	PromptTokens int
	// Sampled is the number of tokens generated.
	Sampled int
	// Preempted is the number of sequences preempted by recompute.
	Preempted int
	// Loading is the number of requests left out of the batch while their
	// KV comes back from the host tier beside it (an executor that
	// overlaps copies, batch.OverlappingCopier).
	Loading int
	// CopiedBefore and CopiedBeside count the block copies between the
	// tiers that ran before the iteration and beside it.
	CopiedBefore, CopiedBeside int
	// Finished is the number of requests that finished, cancellations
	// included.
	Finished int
	// TimeToFirstToken holds, for each request that produced its first token
	// in this iteration, the time from its arrival.
	TimeToFirstToken []time.Duration
	// InterTokenLatency holds, for each other token produced in this
	// iteration, the time since its request's previous token.
	InterTokenLatency []time.Duration
}

// RequestStats describe one finished request. A time is zero when the
// request never reached that point (a request cancelled while waiting was
// never scheduled and has no first token).
type RequestStats struct {
	// ID and ProgramID are the request's (see Request).
	ID, ProgramID string
	// FinishReason says why it finished.
	FinishReason completion.Reason
	// PromptTokens and GenerationTokens count its prompt and output tokens.
	PromptTokens, GenerationTokens int
	// CachedTokens are prompt tokens whose KV came from the prefix cache.
	CachedTokens int
	// Preemptions counts how often it was preempted and recomputed.
	Preemptions int
	// MaxTokens is the request's max_tokens parameter.
	MaxTokens int
	// Arrival is when Submit queued it; Scheduled when it first ran;
	// FirstToken and LastToken when its first and last output tokens were
	// produced; Finished when it finished.
	Arrival, Scheduled, FirstToken, LastToken, Finished time.Time
}

// StateStats are the recurrent-state slots of an engine over a hybrid
// model's executor (state_slots.go): RunningSlots and CheckpointSlots
// how the executor's device slots are split, HostCheckpointSlots its
// host slots, RunningUsed how many running sequences hold one,
// Checkpoints how many checkpoints are valid (either tier); Saved and
// Restored count states saved at block boundaries and restored for prefix
// hits (cumulative), RestoredTokens the tokens those hits skipped, Spilled
// the checkpoints the device evicted to the host.
type StateStats struct {
	RunningSlots, CheckpointSlots, HostCheckpointSlots, RunningUsed, Checkpoints int
	Saved, Restored, RestoredTokens, Spilled                                     int64
	// Imported counts checkpoints moved here from other pods (ImportState).
	Imported int64
}
