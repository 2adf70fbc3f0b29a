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

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
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
	// KVFetches counts the programs placed with their KV fetched from the
	// pod that held it (placement.PodDecision.Fetch).
	KVFetches    int
	ForceResumed int
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

// PodClient is how the loop talks to one pod's control API (addr is its
// host:port). The loop calls it from one goroutine per pod at a time, so
// implementations must be safe for concurrent use; each call is bounded by
// ctx. State returns the pod's report, or an error when it cannot be read
// (the pod then sits the round out). Push delivers a versioned placement and
// returns the version the pod has in force; pushing the same version twice
// must be harmless (pods ignore versions they already applied).
type PodClient interface {
	State(ctx context.Context, addr string) (*wire.Report, error)
	Push(ctx context.Context, addr string, p *wire.Placement) (*wire.PlacementResult, error)
}

var _ PodClient = (*controlclient.Client)(nil)

// maxContinuedVersion is the highest placement version the loop continues
// from. A new leader continues from the highest version its pods report,
// but one that a sender other than this loop put near the bound pods take
// (wire.MaxPlacementVersion) would soon leave it nothing to send any pod;
// a pod past this one (2^52 rounds away from any loop's start) is left out
// of step alone, and the loop keeps 2^52 versions before the bound.
const maxContinuedVersion = wire.MaxPlacementVersion / 2

// Fleet is one pool's loop state. It is not safe for concurrent rounds.
type Fleet struct {
	client PodClient
	sched  *placement.Scheduler
	// policy is the policy the rounds run: asked, the pool's, with each
	// program also charged stateTokens, a hybrid model's recurrent state
	// in KV tokens as the pods report it (wire.KVReport.StateTokens).
	policy      placement.Policy
	asked       placement.Policy
	stateTokens int64
	log         *slog.Logger
	// PerPodTimeout bounds each pod's state read and placement push.
	PerPodTimeout time.Duration

	version int64
	// routes is the routing table last pushed: program → API address.
	routes map[string]string
	// pushed is, per pod name, the version it last acknowledged.
	pushed map[string]int64
}

// New builds a fleet loop with a policy.
func New(policy placement.Policy, client PodClient, log *slog.Logger) (*Fleet, error) {
	sched, err := placement.New(policy)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Fleet{client: client, sched: sched, policy: policy, asked: policy, log: log, PerPodTimeout: 2 * time.Second,
		routes: map[string]string{}, pushed: map[string]int64{}}, nil
}

// SetPolicy changes the policy from the next round on.
func (f *Fleet) SetPolicy(p placement.Policy) error {
	if p == f.asked {
		return nil
	}
	return f.setPolicy(p, f.stateTokens)
}

// setPolicy runs asked with every program charged state more tokens.
func (f *Fleet) setPolicy(asked placement.Policy, state int64) error {
	p := asked
	p.BufferTokensPerProgram += state
	sched, err := placement.New(p)
	if err != nil {
		return err
	}
	f.sched, f.policy, f.asked, f.stateTokens = sched, p, asked, state
	return nil
}

// round is one round's working state. Everything per pod is keyed by the
// pod's name.
type round struct {
	now   time.Time
	names []string // pod names, sorted
	pods  map[string]*podRound
	// merged is the pool's view of each program, by id.
	merged map[string]*placement.Program
	// wasPaused: programs waiting before this round.
	wasPaused map[string]bool
	snap      placement.Snapshot
	dec       *placement.Decision
	// stateTokens is the largest state a pod reports a program costs.
	stateTokens int64
	// routes is the routing table after the decision; room each serving
	// pod's remaining capacity, by API address.
	routes map[string]string
	room   map[string]int64
	sum    *Summary
	mu     sync.Mutex // guards sum.Errors and Fleet.pushed while pushing
}

// podRound is one pod's part of a round.
type podRound struct {
	pod     Pod
	report  *wire.Report // nil: not read this round
	err     error
	summary PodSummary
	dec     *placement.PodDecision
}

// Round runs one control round at time now.
func (f *Fleet) Round(ctx context.Context, pods []Pod, now time.Time) (*Summary, error) {
	start := time.Now()
	r := newRound(pods, now)
	f.readStates(ctx, r)
	f.merge(r)
	if err := f.decide(r); err != nil {
		return nil, err
	}
	f.route(r)
	f.count(r)
	f.push(ctx, r)
	f.routes = r.routes
	sum := r.summary()
	sum.Duration = time.Since(start)
	return sum, errors.Join(sum.Errors...)
}

func newRound(pods []Pod, now time.Time) *round {
	r := &round{now: now, pods: make(map[string]*podRound, len(pods)), merged: map[string]*placement.Program{},
		wasPaused: map[string]bool{}, sum: &Summary{}}
	for _, p := range pods {
		r.pods[p.Name] = &podRound{pod: p, summary: PodSummary{Name: p.Name}}
		r.names = append(r.names, p.Name)
	}
	slices.Sort(r.names)
	r.names = slices.Compact(r.names)
	return r
}

// readStates is step 1: read every ready (or draining) pod's state in
// parallel, each with a deadline.
func (f *Fleet) readStates(ctx context.Context, r *round) {
	var wg sync.WaitGroup
	for _, pr := range r.pods {
		if !pr.pod.Ready && !pr.pod.Draining {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, f.PerPodTimeout)
			defer cancel()
			pr.report, pr.err = f.client.State(c, pr.pod.ControlAddr)
		}()
	}
	wg.Wait()
}

// merge is step 2: fold the reports into one snapshot. A pod whose state
// cannot be read is not ready this round: nothing is placed on it or moved
// off it.
func (f *Fleet) merge(r *round) {
	for _, name := range r.names {
		pr := r.pods[name]
		pr.summary.Reachable = pr.report != nil
		if pr.err != nil {
			r.sum.Errors = append(r.sum.Errors, fmt.Errorf("pod %s: %w", name, pr.err))
		}
		if pr.report == nil {
			r.snap.Pods = append(r.snap.Pods, placement.Pod{Name: name})
			continue
		}
		rep := pr.report
		if rep.PlacementVersion > maxContinuedVersion {
			r.sum.Errors = append(r.sum.Errors, fmt.Errorf("pod %s: placement version %d is beyond %d, which this loop never sends: the pod ignores placements until it restarts",
				name, rep.PlacementVersion, maxContinuedVersion))
		} else {
			f.version = max(f.version, rep.PlacementVersion) // a new leader continues the pods' sequence
		}
		pr.summary.CapacityTokens = rep.KV.CapacityTokens()
		r.stateTokens = max(r.stateTokens, rep.KV.StateTokens)
		pr.summary.KVUsedTokens = int64(rep.KV.UsedBlocks) * int64(rep.KV.BlockSize)
		pr.summary.HostTokens = int64(rep.KV.HostTotalBlocks) * int64(rep.KV.BlockSize)
		pr.summary.HostUsedTokens = int64(rep.KV.HostUsedBlocks) * int64(rep.KV.BlockSize)
		r.snap.Pods = append(r.snap.Pods, placement.Pod{Name: name, Ready: pr.pod.Ready, Draining: pr.pod.Draining,
			CapacityTokens: pr.summary.CapacityTokens, HostTokens: pr.summary.HostTokens, KVBytesPerToken: rep.KV.BytesPerToken,
			MaxModelLen: int64(max(rep.KV.MaxModelLen, 0))})
		for j := range rep.Programs {
			mergeProgram(r.merged, &rep.Programs[j], name)
		}
	}
	ids := make([]string, 0, len(r.merged))
	for id := range r.merged {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := r.merged[id]
		r.snap.Programs = append(r.snap.Programs, *p)
		r.wasPaused[id] = p.State == placement.StatePaused || (p.State == placement.StateActive && p.Pod == "")
	}
}

// decide is step 3: run the placement algorithm and hand each pod its part.
func (f *Fleet) decide(r *round) error {
	if r.stateTokens != f.stateTokens {
		// A hybrid model's pods: each program also costs its state.
		if err := f.setPolicy(f.asked, r.stateTokens); err != nil {
			return fmt.Errorf("placement round: %d state tokens a program: %w", r.stateTokens, err)
		}
	}
	dec, err := f.sched.Decide(r.snap, r.now)
	if err != nil {
		return fmt.Errorf("placement round: %w", err)
	}
	r.dec = dec
	for i := range dec.Pods {
		r.pods[dec.Pods[i].Pod].dec = &dec.Pods[i]
	}
	return nil
}

// route is step 4: the routing table after the decision (every program
// placed on a pod, and "" for the paused, held wherever their requests
// arrive), and each serving pod's room for new programs.
func (f *Fleet) route(r *round) {
	placedOn := map[string]string{}
	for i := range r.snap.Programs {
		p := &r.snap.Programs[i]
		if p.State == placement.StateActive && p.Pod != "" {
			placedOn[p.ID] = p.Pod
		}
	}
	for _, name := range r.names {
		d := r.pods[name].dec
		for _, id := range d.Pause {
			delete(placedOn, id)
		}
		for _, id := range d.Place {
			placedOn[id] = name
		}
	}
	r.routes = map[string]string{}
	for id, name := range placedOn {
		if addr := r.pods[name].pod.APIAddr; addr != "" {
			r.routes[id] = addr
		}
	}
	for _, id := range r.dec.Paused {
		r.routes[id] = ""
	}
	r.room = map[string]int64{}
	for _, pr := range r.pods {
		if pr.pod.Ready && !pr.pod.Draining && pr.pod.APIAddr != "" {
			r.room[pr.pod.APIAddr] = pr.dec.Capacity.Total - pr.dec.Capacity.Used
		}
	}
}

// count is step 5: the round's numbers for the summary, per pod and for
// the pool.
func (f *Fleet) count(r *round) {
	sum, dec := r.sum, r.dec
	sum.RecommendedReplicas = dec.RecommendedReplicas
	sum.ForceResumed = len(dec.ForceResumed)
	sum.ProgramsPaused = len(dec.Paused)
	sum.FairnessPauses = len(dec.FairnessPaused)
	for _, id := range dec.Paused {
		if p := r.merged[id]; p != nil && !p.PausedSince.IsZero() {
			sum.OldestWait = max(sum.OldestWait, r.now.Sub(p.PausedSince))
		}
	}
	for id, p := range r.merged {
		if _, paused := slices.BinarySearch(dec.Paused, id); p.State != placement.StateTerminated && !paused {
			sum.ProgramsActive++
		}
	}
	for _, id := range dec.Paused {
		if p := r.merged[id]; p != nil {
			if name := cmp.Or(p.CachedOn, p.Pod); name != "" && r.pods[name] != nil {
				r.pods[name].summary.Paused++
			}
		}
	}
	placedNow := map[string]bool{}
	for _, pr := range r.pods {
		for _, id := range pr.dec.Place {
			placedNow[id] = true
		}
	}
	for _, name := range r.names {
		pr := r.pods[name]
		d := pr.dec
		pr.summary.PlacedTokens, pr.summary.Programs = d.Capacity.Used, d.Capacity.Programs
		pr.summary.DeletionCost = d.Capacity.Used
		for _, id := range d.Pause {
			if !pr.pod.Draining || !placedNow[id] {
				sum.Pauses++ // moves off a draining pod count below, as Moves
			}
		}
		sum.Marks += len(d.Mark)
		sum.KVFetches += len(d.Fetch)
		for _, id := range d.Place {
			if r.wasPaused[id] {
				sum.Resumes++
			} else if m := r.merged[id]; m != nil && m.Pod != "" && m.Pod != name {
				sum.Moves++
			}
		}
	}
}

// push is step 6: send each reachable pod its delta, in parallel.
func (f *Fleet) push(ctx context.Context, r *round) {
	if f.version >= wire.MaxPlacementVersion {
		// Not reached in 2^52 rounds (maxContinuedVersion); never wrap
		// into versions every pod refuses.
		r.sum.Version = f.version
		r.sum.Errors = append(r.sum.Errors, fmt.Errorf("placement version %d is the highest pods take: no placement is pushed", f.version))
		return
	}
	f.version++
	r.sum.Version = f.version
	delta, unroute := diffRoutes(f.routes, r.routes)
	// Every placement is built before any push starts: the pushes write
	// f.pushed, which placementFor reads.
	pls := map[string]*wire.Placement{}
	for _, name := range r.names {
		if pr := r.pods[name]; pr.report != nil {
			pls[name] = f.placementFor(r, pr, delta, unroute)
		}
	}
	var wg sync.WaitGroup
	for name, pl := range pls {
		pr := r.pods[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, f.PerPodTimeout)
			defer cancel()
			res, err := f.client.Push(c, pr.pod.ControlAddr, pl)
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				r.sum.Errors = append(r.sum.Errors, fmt.Errorf("push to pod %s: %w", name, err))
				delete(f.pushed, name)
				return
			}
			if res.Version == f.version {
				f.pushed[name] = f.version
			}
		}()
	}
	wg.Wait()
}

// placementFor is one pod's placement: its part of the decision, programs
// released through another pod, and the routes as a delta when the pod
// applied the previous version and still has it, else in full. The pod's
// report says whether it still has it: a pod that restarted reports 0 and
// has lost its routes, so a delta would leave it running programs placed
// elsewhere.
func (f *Fleet) placementFor(r *round, pr *podRound, delta map[string]string, unroute []string) *wire.Placement {
	var release []string
	for _, p := range pr.report.Programs {
		if m := r.merged[p.ID]; m != nil && m.State == placement.StateTerminated && p.State != placement.StateTerminated.String() {
			release = append(release, p.ID)
		}
	}
	d := pr.dec
	pl := &wire.Placement{
		Version: f.version, Mode: string(f.policy.Mode), Place: d.Place, Pause: d.Pause, Mark: d.Mark, Unmark: d.Unmark, Release: release,
		Room: r.room, MaxPauseSeconds: int64(f.policy.MaxPauseDuration / time.Second),
		BufferTokensPerProgram: f.policy.BufferTokensPerProgram,
		Capacity: &wire.CapacityModel{ActingTokenWeight: f.policy.ActingTokenWeight, ActingOnHost: f.policy.ActingOnHost,
			DeviceOvercommit: f.policy.DeviceOvercommit},
	}
	for _, fe := range d.Fetch {
		if src := r.pods[fe.From]; src != nil && src.pod.ControlAddr != "" {
			if pl.Fetch == nil {
				pl.Fetch = map[string]string{}
			}
			pl.Fetch[fe.Program] = src.pod.ControlAddr
		}
	}
	if last := f.pushed[pr.pod.Name]; last > 0 && last == f.version-1 && pr.report.PlacementVersion == last {
		pl.Routes, pl.Unroute = delta, unroute
	} else {
		pl.Routes, pl.FullRoutes = r.routes, true // first push, or it missed one
	}
	return pl
}

// summary lists the pods in name order.
func (r *round) summary() *Summary {
	for _, name := range r.names {
		r.sum.Pods = append(r.sum.Pods, r.pods[name].summary)
	}
	return r.sum
}

// mergeProgram folds one pod's view of a program into the pool's. Views
// rank: the pod running it (placed, ACTIVE) over a pod holding its cache
// while paused (placed, PAUSED) over pods that only hold its requests; the
// best-ranked view gives status, tokens and placement, and every view adds
// its held requests. A release seen by any pod ends the program.
func mergeProgram(merged map[string]*placement.Program, r *wire.ProgramReport, pod string) {
	in := toPlacement(r, pod)
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

// toPlacement converts a pod's report of a program for the placement
// algorithm.
func toPlacement(p *wire.ProgramReport, pod string) placement.Program {
	out := placement.Program{
		ID: p.ID, MarkedForPause: p.MarkedForPause, ContextTokens: p.ContextTokens,
		SharedTokens: p.SharedTokens, Steps: p.Steps, LastTransition: p.LastTransition,
		PausedSince: p.PausedSince, HasHeldRequest: p.HeldRequests > 0,
		RunningSince: p.RunningSince,
	}
	switch p.Status {
	case placement.StatusReasoning.String():
		out.Status = placement.StatusReasoning
	case placement.StatusActing.String():
		out.Status = placement.StatusActing
	}
	switch p.State {
	case placement.StateActive.String():
		out.State = placement.StateActive
		if p.Placed {
			out.Pod = pod
		}
	case placement.StatePaused.String():
		out.State = placement.StatePaused
		if p.Placed {
			out.CachedOn = pod
		}
	case placement.StateTerminated.String():
		out.State = placement.StateTerminated
	}
	return out
}
