// Package fleet runs the program-level control loop of one pool, with no
// Kubernetes in it: each round it reads every pod's state over the control
// API in parallel, merges the reports into a placement snapshot, runs the
// placement algorithm, and pushes each pod its versioned delta. The
// controller's Runnable feeds it the pool's pods and records the Summary in
// the pool's status; the integration tests drive it against real runtime
// processes.
package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// Pod is one runtime pod of the pool.
type Pod struct {
	// Name is the pod's name.
	Name string
	// APIAddr is host:port of its OpenAI API (where requests are forwarded).
	APIAddr string
	// ControlAddr is host:port of its control API.
	ControlAddr string
	// Ready is the pod's readiness.
	Ready bool
	// Draining is set while the pod is being removed: its programs move.
	Draining bool
}

// PodSummary is one pod after a round.
type PodSummary struct {
	Name string
	// Reachable is false when its state could not be read this round.
	Reachable bool
	// CapacityTokens is kv blocks × block size; KVUsedTokens is what the
	// engine holds now; PlacedTokens is the placement charge.
	CapacityTokens, KVUsedTokens, PlacedTokens int64
	// HostTokens is the pod's host-memory KV tier and HostUsedTokens what
	// it holds of paused programs' KV: not device capacity (a program
	// whose KV is there needs device room to resume), so counted apart.
	HostTokens, HostUsedTokens int64
	Programs                   int
	// Paused counts the paused programs whose KV cache this pod holds.
	Paused int
	// DeletionCost is the pod's program load, for
	// controller.kubernetes.io/pod-deletion-cost: scale-down removes the
	// emptiest pod.
	DeletionCost int64
}

// Summary is a round's outcome.
type Summary struct {
	Pods                           []PodSummary
	ProgramsActive, ProgramsPaused int
	// Pauses counts programs paused; Moves those moved off a draining pod
	// to another in the same round (paused there, placed elsewhere).
	Pauses, Marks, Resumes, Moves int
	ForceResumed                  int
	// FairnessPauses counts the programs the fairness bound paused or
	// marked this round; OldestWait is how long the longest-waiting
	// paused program has waited (0 when none waits).
	FairnessPauses      int
	OldestWait          time.Duration
	RecommendedReplicas int
	Version             int64
	Duration            time.Duration
	Errors              []error
}

// Fleet is one pool's loop state. It is not safe for concurrent rounds.
type Fleet struct {
	client *control.Client
	sched  *placement.Scheduler
	policy placement.Policy
	log    *slog.Logger
	// PerPodTimeout bounds each pod's state read and placement push.
	PerPodTimeout time.Duration

	version int64
	// routes is the routing table last pushed: program → API address.
	routes map[string]string
	// pushed is, per pod name, the version it last acknowledged.
	pushed map[string]int64
}

// New builds a fleet loop with a policy.
func New(policy placement.Policy, client *control.Client, log *slog.Logger) (*Fleet, error) {
	sched, err := placement.New(policy)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Fleet{client: client, sched: sched, policy: policy, log: log, PerPodTimeout: 2 * time.Second,
		routes: map[string]string{}, pushed: map[string]int64{}}, nil
}

// SetPolicy changes the policy from the next round on.
func (f *Fleet) SetPolicy(p placement.Policy) error {
	if p == f.policy {
		return nil
	}
	sched, err := placement.New(p)
	if err != nil {
		return err
	}
	f.sched, f.policy = sched, p
	return nil
}

type readResult struct {
	rep *programs.Report
	err error
}

// Round runs one control round at time now.
func (f *Fleet) Round(ctx context.Context, pods []Pod, now time.Time) (*Summary, error) {
	start := time.Now()
	sum := &Summary{}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })

	// 1. Read every ready pod's state in parallel, each with a deadline.
	reads := make([]readResult, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		if !p.Ready && !p.Draining {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, f.PerPodTimeout)
			defer cancel()
			reads[i].rep, reads[i].err = f.client.State(c, p.ControlAddr)
		}()
	}
	wg.Wait()

	// 2. Merge the reports into a snapshot. A pod whose state cannot be
	// read is not ready this round: nothing is placed on it or moved off it.
	snap := placement.Snapshot{}
	merged := map[string]*placement.Program{}
	byName := map[string]*Pod{}
	for i := range pods {
		p := &pods[i]
		byName[p.Name] = p
		r := reads[i]
		ps := PodSummary{Name: p.Name, Reachable: r.rep != nil}
		if r.err != nil {
			sum.Errors = append(sum.Errors, fmt.Errorf("pod %s: %w", p.Name, r.err))
		}
		if r.rep == nil {
			snap.Pods = append(snap.Pods, placement.Pod{Name: p.Name})
			sum.Pods = append(sum.Pods, ps)
			continue
		}
		f.version = max(f.version, r.rep.PlacementVersion) // a new leader continues the pods' sequence
		ps.CapacityTokens = r.rep.KV.CapacityTokens()
		ps.KVUsedTokens = int64(r.rep.KV.UsedBlocks) * int64(r.rep.KV.BlockSize)
		ps.HostTokens = int64(r.rep.KV.HostTotalBlocks) * int64(r.rep.KV.BlockSize)
		ps.HostUsedTokens = int64(r.rep.KV.HostUsedBlocks) * int64(r.rep.KV.BlockSize)
		snap.Pods = append(snap.Pods, placement.Pod{Name: p.Name, Ready: p.Ready, Draining: p.Draining, CapacityTokens: ps.CapacityTokens})
		sum.Pods = append(sum.Pods, ps)
		for j := range r.rep.Programs {
			mergeProgram(merged, &r.rep.Programs[j], p.Name)
		}
	}
	ids := make([]string, 0, len(merged))
	for id := range merged {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	wasPaused := map[string]bool{}
	for _, id := range ids {
		pr := merged[id]
		snap.Programs = append(snap.Programs, *pr)
		wasPaused[id] = pr.State == placement.StatePaused || (pr.State == placement.StateActive && pr.Pod == "")
	}

	// 3. Decide.
	dec, err := f.sched.Decide(snap, now)
	if err != nil {
		return nil, fmt.Errorf("placement round: %w", err)
	}
	sum.RecommendedReplicas = dec.RecommendedReplicas
	sum.ForceResumed = len(dec.ForceResumed)
	sum.ProgramsPaused = len(dec.Paused)
	sum.FairnessPauses = len(dec.FairnessPaused)
	for _, id := range dec.Paused {
		if pr := merged[id]; pr != nil && !pr.PausedSince.IsZero() {
			sum.OldestWait = max(sum.OldestWait, now.Sub(pr.PausedSince))
		}
	}
	placedNow := map[string]bool{}
	for i := range dec.Pods {
		for _, id := range dec.Pods[i].Place {
			placedNow[id] = true
		}
	}
	pausedOn := map[string]int{}
	for _, id := range dec.Paused {
		if pr := merged[id]; pr != nil {
			if pod := cmp.Or(pr.CachedOn, pr.Pod); pod != "" {
				pausedOn[pod]++
			}
		}
	}

	// 4. Routing table after the decision: every program placed on a pod.
	routes := map[string]string{}
	placedOn := map[string]string{}
	for i := range snap.Programs {
		pr := &snap.Programs[i]
		if pr.State == placement.StateActive && pr.Pod != "" {
			placedOn[pr.ID] = pr.Pod
		}
	}
	for i := range dec.Pods {
		pd := &dec.Pods[i]
		for _, id := range pd.Pause {
			delete(placedOn, id)
		}
		for _, id := range pd.Place {
			placedOn[id] = pd.Pod
		}
	}
	for id, pod := range placedOn {
		if p := byName[pod]; p != nil && p.APIAddr != "" {
			routes[id] = p.APIAddr
		}
	}
	for _, id := range dec.Paused {
		routes[id] = "" // held wherever its requests arrive
	}
	delta, unroute := diffRoutes(f.routes, routes)
	room := map[string]int64{}
	for i := range dec.Pods {
		pd := &dec.Pods[i]
		p := byName[pd.Pod]
		if p.Ready && !p.Draining && p.APIAddr != "" {
			room[p.APIAddr] = pd.Capacity.Total - pd.Capacity.Used
		}
	}

	// 5. Push each reachable pod its delta, in parallel.
	f.version++
	sum.Version = f.version
	var mu sync.Mutex
	for i := range dec.Pods {
		pd := &dec.Pods[i]
		ps := &sum.Pods[i]
		ps.Paused = pausedOn[pd.Pod]
		ps.PlacedTokens, ps.Programs = pd.Capacity.Used, pd.Capacity.Programs
		ps.DeletionCost = pd.Capacity.Used
		for _, id := range pd.Pause {
			if !byName[pd.Pod].Draining || !placedNow[id] {
				sum.Pauses++ // moves off a draining pod count below, as Moves
			}
		}
		sum.Marks += len(pd.Mark)
		for _, id := range pd.Place {
			if wasPaused[id] {
				sum.Resumes++
			} else if merged[id] != nil && merged[id].Pod != "" && merged[id].Pod != pd.Pod {
				sum.Moves++
			}
		}
		if !ps.Reachable {
			continue
		}
		p := byName[pd.Pod]
		// Programs released through another pod end here too.
		var release []string
		for _, pr := range reads[i].rep.Programs {
			if m := merged[pr.ID]; m != nil && m.State == placement.StateTerminated && pr.State != placement.StateTerminated.String() {
				release = append(release, pr.ID)
			}
		}
		pl := &programs.Placement{
			Version: f.version, Place: pd.Place, Pause: pd.Pause, Mark: pd.Mark, Unmark: pd.Unmark, Release: release,
			Room: room, MaxPauseSeconds: int64(f.policy.MaxPauseDuration / time.Second),
			BufferTokensPerProgram: f.policy.BufferTokensPerProgram,
		}
		if f.pushed[p.Name] == f.version-1 && f.pushed[p.Name] > 0 {
			pl.Routes, pl.Unroute = delta, unroute
		} else {
			pl.Routes, pl.FullRoutes = routes, true // first push, or it missed one
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, f.PerPodTimeout)
			defer cancel()
			res, err := f.client.Push(c, p.ControlAddr, pl)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				sum.Errors = append(sum.Errors, fmt.Errorf("push to pod %s: %w", p.Name, err))
				delete(f.pushed, p.Name)
				return
			}
			if res.Version == f.version {
				f.pushed[p.Name] = f.version
			}
		}()
	}
	wg.Wait()
	f.routes = routes
	for id, pr := range merged {
		if _, paused := slices.BinarySearch(dec.Paused, id); pr.State != placement.StateTerminated && !paused {
			sum.ProgramsActive++
		}
	}
	sum.Duration = time.Since(start)
	return sum, errors.Join(sum.Errors...)
}

// mergeProgram folds one pod's view of a program into the pool's. Views
// rank: the pod running it (placed, ACTIVE) over a pod holding its cache
// while paused (placed, PAUSED) over pods that only hold its requests; the
// best-ranked view gives status, tokens and placement, and every view adds
// its held requests. A release seen by any pod ends the program.
func mergeProgram(merged map[string]*placement.Program, r *programs.ProgramReport, pod string) {
	in := r.ToPlacement(pod)
	if !r.Placed && in.State == placement.StateActive {
		// A pod that only forwarded or holds for it: placed elsewhere.
		in.State = placement.StatePaused
	}
	cur, ok := merged[r.ID]
	if !ok {
		merged[r.ID] = &in
		return
	}
	if in.State == placement.StateTerminated || cur.State == placement.StateTerminated {
		cur.State = placement.StateTerminated
		return
	}
	held := cur.HasHeldRequest || in.HasHeldRequest
	steps := max(cur.Steps, in.Steps)
	paused := earliest(cur.PausedSince, in.PausedSince)
	if viewRank(&in) > viewRank(cur) {
		*cur = in
	}
	cur.HasHeldRequest, cur.Steps, cur.PausedSince = held, steps, paused
}

func viewRank(p *placement.Program) int {
	switch {
	case p.State == placement.StateActive && p.Pod != "":
		return 2
	case p.CachedOn != "":
		return 1
	}
	return 0
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func diffRoutes(old, cur map[string]string) (delta map[string]string, gone []string) {
	delta = map[string]string{}
	for id, addr := range cur {
		if was, ok := old[id]; !ok || was != addr {
			delta[id] = addr
		}
	}
	for id := range old {
		if _, ok := cur[id]; !ok {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	return delta, gone
}
