package placement

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidSnapshot is wrapped by every error Decide returns for a snapshot
// it cannot decide on (duplicate names, negative token counts, unknown
// enums). The controller should skip the round and report the pod the
// offending entry came from.
var ErrInvalidSnapshot = errors.New("invalid placement snapshot")

// Status is what a program is doing.
type Status uint8

const (
	// StatusUnknown is the zero value; it is valid only for TERMINATED
	// programs.
	StatusUnknown Status = iota
	// StatusReasoning: a request is in flight; its KV cache is in use.
	StatusReasoning
	// StatusActing: the program runs a tool between requests; its KV cache
	// is idle but worth keeping for the next turn.
	StatusActing
)

func (s Status) String() string {
	switch s {
	case StatusReasoning:
		return "REASONING"
	case StatusActing:
		return "ACTING"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// State is where a program is in its life.
type State uint8

const (
	// StateUnknown is the zero value and never valid.
	StateUnknown State = iota
	// StateActive: placed on a pod (Program.Pod), or new and not yet placed
	// (Program.Pod empty).
	StateActive
	// StatePaused: waiting to be resumed; its requests are held.
	StatePaused
	// StateTerminated: released; it takes no capacity and gets no actions.
	StateTerminated
)

func (s State) String() string {
	switch s {
	case StateActive:
		return "ACTIVE"
	case StatePaused:
		return "PAUSED"
	case StateTerminated:
		return "TERMINATED"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Pod is one runtime pod of the pool as the controller last read it.
type Pod struct {
	// Name is unique within a snapshot.
	Name string
	// Ready is false while the pod cannot serve: it gets no new programs,
	// and the programs it reports are left where they are.
	Ready bool
	// Draining is true while the pod is being scaled down: it gets no new
	// programs, and its programs are moved off it (never lost).
	Draining bool
	// CapacityTokens is the pod's KV cache size in tokens: kv_blocks ×
	// block_size.
	CapacityTokens int64
	// HostTokens is the pod's host-memory KV tier in tokens (0: none). A
	// program paused there keeps its KV in that tier, so resume waits for
	// room on that pod (Policy.CacheAffinityWait) only when it has one;
	// without one the paused KV is likely evicted and waiting buys nothing.
	HostTokens int64
	// KVBytesPerToken is what one token of KV takes on the pod when it can
	// send and receive programs' KV blocks over the pod network (the
	// control port's transfer); 0 when it cannot (a pod of an older
	// version, or an executor that cannot move blocks). A program moves
	// with its KV only between pods of equal KVBytesPerToken (same model,
	// KV type and geometry; block size is checked by the pods themselves).
	KVBytesPerToken int64
	// MaxModelLen is the longest context the pod serves, in tokens (0:
	// unknown). A program's KV moves to the pod only when its context is
	// no longer: the pod refuses a longer chain.
	MaxModelLen int64
}

// Program is one agent program as reported by the pods: placed ones by the
// pod running them, paused ones by the pods holding their requests. The
// controller merges the reports, so ids are unique within a snapshot.
type Program struct {
	// ID is the program id (X-Program-Id and friends).
	ID string
	// Pod is the pod the program is placed on; empty when it is paused or
	// new. It is ignored unless State is StateActive. An active program
	// naming a pod absent from the snapshot waits to be placed again.
	Pod string
	// Status is REASONING or ACTING; it may be StatusUnknown only when
	// State is StateTerminated.
	Status Status
	// State is ACTIVE, PAUSED or TERMINATED.
	State State
	// MarkedForPause is set when an earlier decision marked the program: its
	// pod pauses it when it becomes ACTING.
	MarkedForPause bool
	// ContextTokens is the program's exact context length in tokens.
	ContextTokens int64
	// SharedTokens is the program's share of prefix-cache savings on its
	// pod, reported so that Σ(ContextTokens − SharedTokens) over a pod's
	// programs is the number of distinct tokens cached for them (a block
	// referenced by k programs charges 1/k of its tokens to each). It is
	// clamped to [0, ContextTokens] and ignored for programs not placed,
	// since sharing is not known on a pod a program is not on.
	SharedTokens int64
	// Steps counts the program's requests so far; ≤ 1 means new.
	Steps int
	// LastTransition is when the program last changed Status; decay
	// measures ACTING time from it. Zero means unknown: no decay.
	LastTransition time.Time
	// PausedSince is when the program started waiting; force-resume
	// measures from it. Zero means unknown: never force-resumed.
	PausedSince time.Time
	// HasHeldRequest is true when a request for the program is being held
	// until it is resumed.
	HasHeldRequest bool
	// RunningSince is when the program was last placed or resumed on its
	// pod: the fairness bound pauses the program that has run longest since.
	// Zero means unknown: the program is never chosen for a fairness pause.
	RunningSince time.Time
	// CachedOn names the pod that may still hold the program's KV cache
	// (where it last ran) while it is not placed; empty when unknown. Resume
	// prefers that pod when the program fits there, so the cache is reused
	// instead of recomputed.
	CachedOn string
}

// Snapshot is a pool's state as the controller last read it: every pod of
// the pool and every program the pods report.
type Snapshot struct {
	Pods     []Pod
	Programs []Program
}

func (p *Program) validate() error {
	switch {
	case p.ID == "":
		return fmt.Errorf("%w: program with no id", ErrInvalidSnapshot)
	case p.State == StateUnknown || p.State > StateTerminated:
		return fmt.Errorf("%w: program %q: unknown state %v", ErrInvalidSnapshot, p.ID, p.State)
	case p.State == StateTerminated:
		return nil
	case p.Status != StatusReasoning && p.Status != StatusActing:
		return fmt.Errorf("%w: program %q: unknown status %v", ErrInvalidSnapshot, p.ID, p.Status)
	case p.ContextTokens < 0:
		return fmt.Errorf("%w: program %q: negative context tokens %d", ErrInvalidSnapshot, p.ID, p.ContextTokens)
	}
	return nil
}

func (p *Pod) validate() error {
	switch {
	case p.Name == "":
		return fmt.Errorf("%w: pod with no name", ErrInvalidSnapshot)
	case p.CapacityTokens < 0:
		return fmt.Errorf("%w: pod %q: negative capacity %d", ErrInvalidSnapshot, p.Name, p.CapacityTokens)
	case p.KVBytesPerToken < 0:
		return fmt.Errorf("%w: pod %q: negative KV bytes per token %d", ErrInvalidSnapshot, p.Name, p.KVBytesPerToken)
	case p.MaxModelLen < 0:
		return fmt.Errorf("%w: pod %q: negative max model length %d", ErrInvalidSnapshot, p.Name, p.MaxModelLen)
	case p.HostTokens < 0:
		return fmt.Errorf("%w: pod %q: negative host tokens %d", ErrInvalidSnapshot, p.Name, p.HostTokens)
	}
	return nil
}
