// Package batch is the contract between the continuous-batching engine and the
// executors that run the model: one Execute call per iteration.
package batch

import (
	"context"

	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Executor runs the model: one call per engine iteration.
//
// Contract:
//   - The engine owns the KV blocks. Each scheduled sequence carries its block
//     table; the executor reads the KV of positions [0, Seq.Pos) from those
//     blocks and writes the KV of the tokens it processes at positions
//     [Seq.Pos, Seq.Pos+len(Seq.Tokens)) into them (slot p lives in block
//     Blocks[p/BlockSize] at offset p%BlockSize). Blocks shared through the
//     prefix cache are only ever read.
//   - For every sequence with Sample set, the executor fills exactly one of
//     out.Logits[i] (len = vocabulary size; the engine samples) or
//     out.Tokens[i] (an already sampled token; set out.Sampled[i]). Entries
//     for sequences without Sample are ignored.
//   - Batch and Output, and every slice in them, are reused by the engine
//     after Execute returns: an executor that keeps data must copy it.
//   - out.Logits[i] may point into the executor's own memory instead of a
//     copy (a vocabulary of 152k is 600 KB per sequence and step): the engine
//     reads the logits, and may change them in place while sampling, only
//     until it calls Execute again. The rows of different sequences must
//     not overlap: the engine samples them concurrently.
//   - An error fails the requests of this batch (they finish with reason
//     "error"); the engine frees their blocks and goes on with the next
//     iteration. Execute must return promptly when ctx is done.
//   - Execute is never called concurrently with itself.
type Executor interface {
	Execute(ctx context.Context, b *Batch, out *Output) error
}

// TokenSampler is implemented by executors that may draw tokens themselves
// (fill out.Tokens rather than out.Logits). When SamplesTokens reports true
// the engine refuses requests that need the logits: logit processors, min_p
// and logprobs.
type TokenSampler interface {
	SamplesTokens() bool
}

// Batch is one iteration's work.
type Batch struct {
	// Seqs are the scheduled sequences; running (decoding) ones first.
	Seqs []Seq
	// NumTokens is the total number of tokens across Seqs.
	NumTokens int
	// BlockSize is the KV block size in tokens.
	BlockSize int
	// StateCopies and StateSaves copy recurrent states between slots of
	// an executor that keeps them (StateKeeper), in order: StateCopies
	// before the iteration computes (a sequence resuming from a saved
	// state), StateSaves after (a sequence's state at the end of its
	// tokens, kept for later requests). Executors without states ignore
	// them; the engine gives them none.
	StateCopies, StateSaves []StateCopy
}

// StateCopy copies the recurrent state of slot From into slot To (either
// may be a host slot of a HostStateKeeper). Pos, when not 0, says the
// state is a sequence's after its positions [0, Pos): an executor whose
// states keep a window of the latest positions (the ggml executor's
// sliding-window rings) then copies that window only.
type StateCopy struct {
	From, To int
	Pos      int
}

// Seq is one sequence's part of an iteration.
type Seq struct {
	// SeqID is unique among live sequences; executors may key per-sequence
	// scratch state by it.
	SeqID uint64
	// Tokens are the token ids to process: a prompt chunk, or the last
	// sampled token when decoding.
	Tokens []int32
	// Pos is the position of Tokens[0] (the number of tokens already in KV).
	Pos int
	// Blocks is the sequence's block table; it covers positions
	// [0, Pos+len(Tokens)).
	Blocks []kvcache.BlockID
	// Sample is true when this step reaches the end of the known tokens, so
	// the next token must be produced.
	Sample bool
	// ArgmaxOnly (with Sample) says the engine would take the row's
	// largest logit and nothing else of it: greedy, no logprobs, no logit
	// processor, no output constraint, no banned token. An executor may
	// then fill out.Tokens[i] with the id of the largest logit instead of
	// out.Logits[i]. (Among exactly equal largest logits the engine takes
	// the lowest id; an executor's kernel may take another of them.)
	ArgmaxOnly bool
	// PromptLen is the number of prompt tokens of the request.
	PromptLen int
	// Seed is the request's sampling seed (executors that sample themselves
	// use it for deterministic output).
	Seed uint64
	// MaxTokens is the request's output limit (the sim executor uses it to
	// pick an output length).
	MaxTokens int
	// State is the sequence's recurrent-state slot, for an executor that
	// keeps states (StateKeeper; others ignore it): the slot holds the
	// state after positions [0, Pos) and the executor advances it over
	// Tokens; at Pos 0 it starts from a zero state. No two sequences of a
	// batch share a slot.
	State int
}

// StateKeeper is implemented by executors of hybrid models, whose
// recurrent layers keep a fixed-size state per sequence instead of KV
// per token. StateSlots is how many sequences' states it holds (0: it
// keeps none). The engine gives every running sequence a slot of its own
// (Seq.State) and runs at most StateSlots sequences at once. A state
// cannot be cut back to an earlier position, so the engine starts a
// sequence whose state it does not have (preempted, or found in the
// prefix cache) from position 0.
type StateKeeper interface {
	StateSlots() int
}

// ChunkLimiter is implemented by executors that bound the tokens one
// sequence takes in one iteration (the ggml executor's window cache,
// whose per-sequence rings hold a sliding window and one such chunk):
// the engine cuts every sequence's share of an iteration to
// MaxSeqTokens (0: no bound).
type ChunkLimiter interface {
	MaxSeqTokens() int
}

// HostStateKeeper is a StateKeeper that also keeps states in host memory:
// ReserveHostStates(n) adds n host slots, numbered after the device's
// (StateSlots() … StateSlots()+n-1), which StateCopy moves states to and
// from (a checkpoint the device evicts, kept for a later prefix hit).
type HostStateKeeper interface {
	StateKeeper
	ReserveHostStates(n int) error
}

// Output receives an iteration's results; index i refers to Batch.Seqs[i].
// The engine sizes every slice to len(Batch.Seqs) before calling Execute.
type Output struct {
	Logits  [][]float32
	Tokens  []int32
	Sampled []bool
}
