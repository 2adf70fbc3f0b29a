package placement

import (
	"slices"
	"strings"
)

// Decision is the outcome of one round. Program ids in it are the strings of
// the snapshot, not copies.
type Decision struct {
	// Pods has one entry per snapshot pod, sorted by name.
	Pods []PodDecision
	// Paused lists, sorted, the programs waiting after this round: those
	// that were waiting and were not placed, and those paused by it.
	Paused []string
	// ForceResumed lists, longest-waiting first, the programs placed because
	// they waited longer than MaxPauseDuration. Each is also in its pod's
	// Place.
	ForceResumed []string
	// FairnessPaused lists the programs the fairness bound paused (ACTING
	// ones) or marked for pause (REASONING ones) this round to make room for
	// a program that waited past Policy.FairnessBound. Each is also in its
	// pod's Pause or Mark, unless it was already marked.
	FairnessPaused []string
	// RecommendedReplicas is the autoscaling hook: the number of serving
	// (ready, non-draining) pods, plus enough pods of the largest serving
	// pod's capacity to hold the waiting programs that fit on no pod now.
	// It is never below the number of serving pods, so it only ever asks
	// for more; scale-down is decided elsewhere. Programs larger than a
	// whole pod do not count (more pods would not help them), nor do
	// programs that fit somewhere but were held back by a reservation. With
	// no serving pod it is 1 if any program waits, else 0.
	RecommendedReplicas int
}

// PodDecision is the delta one pod must apply, and its capacity afterwards.
// Every list is sorted by program id. A program moving between pods is in
// Pause of its old pod and in Place of its new one.
type PodDecision struct {
	// Pod is the pod's name.
	Pod string
	// Place lists programs to run here: new, resumed, force-resumed or moved
	// from a draining pod.
	Place []string
	// Pause lists ACTING programs to pause now.
	Pause []string
	// Mark lists REASONING programs to mark for pause; the pod pauses them
	// when they become ACTING.
	Mark []string
	// Unmark lists programs whose earlier mark no longer holds.
	Unmark []string
	// Fetch lists, by program id, the programs of Place whose KV this pod
	// fetches from another pod before they run (Policy.KVTransferBandwidth).
	Fetch []Fetch
	// Capacity is the pod's capacity after the decision.
	Capacity Capacity
}

// Fetch is a program to fetch the KV of.
type Fetch struct {
	// Program is the program's id; From the pod that holds its KV.
	Program, From string
}

// Capacity is a pod's KV capacity in tokens:
//
//	Used = Σ reasoning (context − shared)
//	     + ActingTokenWeight × Σ acting (context − shared)
//	     + BufferTokensPerProgram × Programs
//
// With weight 1 this is the seed's reasoning + weight × acting − shared +
// buffer; below 1 an acting program's shared tokens are weighted like the
// rest of its tokens, so that no program's charge is negative and pausing a
// program never raises Used. Weighted tokens are rounded to the nearest
// token per program. Used is undecayed: decay only sways resume decisions.
// A pod is over capacity when Used > Total. Programs placed by the decision
// are charged their full context (their sharing on this pod is unknown yet).
// With Policy.ActingOnHost, on a pod with a host tier the acting term is
// scaled by the share of it that the tier's room (Pod.HostTokens less the
// footprints of the waiting programs it keeps) cannot hold: 0 when it all
// fits there.
type Capacity struct {
	// Used is the capacity charged after the decision.
	Used int64
	// Total is kv_blocks × block_size, raised on a pod with a host tier
	// by Policy.DeviceOvercommit.
	Total int64
	// Marked is the part of Used held by programs marked for pause: tokens
	// the pod frees once they become ACTING.
	Marked int64
	// Programs is the number of programs placed on the pod.
	Programs int
}

// Changed reports whether the pod has anything to apply.
func (d *PodDecision) Changed() bool {
	return len(d.Place)+len(d.Pause)+len(d.Mark)+len(d.Unmark) > 0
}

// Pod returns the decision for the named pod, or nil.
func (d *Decision) Pod(name string) *PodDecision {
	i, ok := slices.BinarySearchFunc(d.Pods, name, func(p PodDecision, name string) int {
		return strings.Compare(p.Pod, name)
	})
	if !ok {
		return nil
	}
	return &d.Pods[i]
}

// Clone returns a deep copy that stays valid after the next Decide.
func (d *Decision) Clone() *Decision {
	c := &Decision{
		Pods:                make([]PodDecision, len(d.Pods)),
		Paused:              cloneIDs(d.Paused),
		ForceResumed:        cloneIDs(d.ForceResumed),
		FairnessPaused:      cloneIDs(d.FairnessPaused),
		RecommendedReplicas: d.RecommendedReplicas,
	}
	for i := range d.Pods {
		p := &d.Pods[i]
		c.Pods[i] = PodDecision{
			Pod:      p.Pod,
			Place:    cloneIDs(p.Place),
			Pause:    cloneIDs(p.Pause),
			Mark:     cloneIDs(p.Mark),
			Unmark:   cloneIDs(p.Unmark),
			Fetch:    slices.Clone(p.Fetch),
			Capacity: p.Capacity,
		}
	}
	return c
}

// cloneIDs copies ids; empty lists become nil, so that clones compare equal
// whatever memory the Scheduler had kept.
func cloneIDs(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	return slices.Clone(ids)
}

// reset empties d for pods, keeping every slice's memory.
func (d *Decision) reset(pods []podState) {
	n := len(pods)
	d.Pods = slices.Grow(d.Pods[:0], n)[:n]
	for i := range d.Pods {
		p := &d.Pods[i]
		p.Pod = pods[i].name
		p.Place = p.Place[:0]
		p.Pause = p.Pause[:0]
		p.Mark = p.Mark[:0]
		p.Unmark = p.Unmark[:0]
		p.Fetch = p.Fetch[:0]
		p.Capacity = Capacity{}
	}
	d.Paused = d.Paused[:0]
	d.ForceResumed = d.ForceResumed[:0]
	d.FairnessPaused = d.FairnessPaused[:0]
	d.RecommendedReplicas = 0
}
