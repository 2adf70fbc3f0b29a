package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDecideProperties checks invariants of random rounds: actions are valid
// for the programs they name; every live program ends up exactly once,
// placed or waiting; reported capacity matches an independent computation;
// no serving pod is left over capacity beyond what force-resumes and marked
// programs explain; no waiting program is left out while a pod has room
// for it (save the one reserved pod); and the decision depends on neither
// the snapshot's order nor the Scheduler's history.
func TestDecideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	long := map[Policy]*Scheduler{}
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	for round := range rounds {
		policy := randomPolicy(r)
		snap := randomSnapshot(r)
		now := t0
		name := fmt.Sprintf("round %d", round)

		// A long-lived Scheduler per policy exercises scratch reuse.
		s := long[policy]
		if s == nil {
			var err error
			if s, err = New(policy); err != nil {
				t.Fatalf("%s: New: %v", name, err)
			}
			long[policy] = s
		}
		d, err := s.Decide(snap, now)
		if err != nil {
			t.Fatalf("%s: Decide: %v", name, err)
		}
		got := d.Clone()
		checkInvariants(t, name, policy, snap, now, got)

		shuffled := Snapshot{Pods: slices.Clone(snap.Pods), Programs: slices.Clone(snap.Programs)}
		r.Shuffle(len(shuffled.Pods), func(i, j int) {
			shuffled.Pods[i], shuffled.Pods[j] = shuffled.Pods[j], shuffled.Pods[i]
		})
		r.Shuffle(len(shuffled.Programs), func(i, j int) {
			shuffled.Programs[i], shuffled.Programs[j] = shuffled.Programs[j], shuffled.Programs[i]
		})
		fresh := decide(t, policy, shuffled, now)
		if diff := cmp.Diff(got, fresh); diff != "" {
			t.Fatalf("%s: decision depends on input order or history (-long-lived +fresh, shuffled):\n%s", name, diff)
		}
		if t.Failed() {
			t.Fatalf("%s: policy %+v\nsnapshot %+v", name, policy, snap)
		}
	}
}

func randomPolicy(r *rand.Rand) Policy {
	p := DefaultPolicy()
	if r.IntN(5) == 0 {
		p.Mode = ModeDefault
	}
	p.ActingTokenWeight = []float64{0, 0.3, 0.5, 1, 1}[r.IntN(5)]
	p.BufferTokensPerProgram = []int64{0, 100}[r.IntN(2)]
	if r.IntN(2) == 0 {
		p.ActingDecay = Decay{Enabled: true, HalfLife: []time.Duration{time.Second, 30 * time.Second}[r.IntN(2)]}
	}
	p.MaxPauseDuration = []time.Duration{5 * time.Minute, 30 * time.Minute}[r.IntN(2)]
	p.WaitAging = []time.Duration{0, time.Minute}[r.IntN(2)]
	p.ResumeFirstAfter = []time.Duration{0, 5 * time.Minute}[r.IntN(2)]
	return p
}

func randomSnapshot(r *rand.Rand) Snapshot {
	var snap Snapshot
	for i := range r.IntN(7) {
		p := Pod{Name: fmt.Sprintf("pod-%d", i), Ready: r.IntN(100) < 85, CapacityTokens: r.Int64N(6000)}
		p.Draining = r.IntN(100) < 15
		snap.Pods = append(snap.Pods, p)
	}
	podName := func() string {
		switch k := r.IntN(20); {
		case k == 0:
			return "gone"
		case k == 1 || len(snap.Pods) == 0:
			return ""
		default:
			return snap.Pods[r.IntN(len(snap.Pods))].Name
		}
	}
	at := func(maxAgo time.Duration) time.Time {
		if r.IntN(10) == 0 {
			return time.Time{}
		}
		return t0.Add(-time.Duration(r.Int64N(int64(maxAgo))))
	}
	for i := range r.IntN(60) {
		p := Program{
			ID:             fmt.Sprintf("p%03d", i),
			ContextTokens:  r.Int64N(3000),
			Steps:          r.IntN(5),
			Status:         Status(1 + r.IntN(2)),
			MarkedForPause: r.IntN(5) == 0,
			HasHeldRequest: r.IntN(3) == 0,
			LastTransition: at(2 * time.Minute),
		}
		p.SharedTokens = r.Int64N(p.ContextTokens+2) - 1
		switch k := r.IntN(10); {
		case k < 6:
			p.State, p.Pod = StateActive, podName()
		case k < 9:
			p.State, p.PausedSince = StatePaused, at(time.Hour)
		default:
			p.State = StateTerminated
		}
		snap.Programs = append(snap.Programs, p)
	}
	return snap
}

// refCharge restates the capacity contract: what program p costs a pod it
// stays on, or, if placed by the round, the pod it is placed on.
func refCharge(policy Policy, p *Program, placedNow bool) int64 {
	weigh := func(n int64) int64 { return int64(math.Round(policy.ActingTokenWeight * float64(n))) }
	var tokens int64
	switch {
	case placedNow && (p.Status == StatusReasoning || p.HasHeldRequest):
		tokens = p.ContextTokens
	case placedNow:
		tokens = weigh(p.ContextTokens)
	default:
		tokens = p.ContextTokens - min(max(p.SharedTokens, 0), p.ContextTokens)
		if p.Status == StatusActing {
			tokens = weigh(tokens)
		}
	}
	return tokens + policy.BufferTokensPerProgram
}

func checkInvariants(t *testing.T, name string, policy Policy, snap Snapshot, now time.Time, d *Decision) {
	t.Helper()
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf(name+": "+format, args...)
	}
	pods := map[string]Pod{}
	serving := 0
	for _, p := range snap.Pods {
		pods[p.Name] = p
		if p.Ready && !p.Draining {
			serving++
		}
	}
	progs := map[string]*Program{}
	// where is each live program's pod, "" while waiting; it starts as
	// the snapshot says and the decision is applied to it.
	where := map[string]string{}
	marked := map[string]bool{}
	for i := range snap.Programs {
		p := &snap.Programs[i]
		progs[p.ID] = p
		if p.State == StateTerminated {
			continue
		}
		where[p.ID] = ""
		if _, ok := pods[p.Pod]; ok && p.State == StateActive {
			where[p.ID] = p.Pod
			marked[p.ID] = p.MarkedForPause
		}
	}
	wasWaiting := func(id string) bool {
		p := progs[id]
		return p.State != StateActive || pods[p.Pod].Name == ""
	}

	if len(d.Pods) != len(snap.Pods) {
		errorf("%d pod decisions for %d pods", len(d.Pods), len(snap.Pods))
	}
	placedNow := map[string]string{}
	// pausedNow: paused by this round; drained: of those, the ones moved
	// off a draining pod, which the round then tried to resume.
	pausedNow, drained := map[string]bool{}, map[string]bool{}
	for _, pd := range d.Pods {
		p, ok := pods[pd.Pod]
		if !ok {
			errorf("decision for unknown pod %q", pd.Pod)
			continue
		}
		if !p.Ready && !p.Draining && pd.Changed() {
			errorf("pod %s is not ready but has a delta %+v", p.Name, pd)
		}
		for _, list := range [][]string{pd.Place, pd.Pause, pd.Mark, pd.Unmark} {
			if !slices.IsSorted(list) {
				errorf("pod %s: list %v not sorted", p.Name, list)
			}
		}
		for _, id := range pd.Pause {
			prog := progs[id]
			switch {
			case prog == nil || where[id] != p.Name:
				errorf("pause of %q, which is not on %s", id, p.Name)
			case prog.Status != StatusActing:
				errorf("pause of %q, which is %v", id, prog.Status)
			case policy.Mode == ModeDefault && !p.Draining:
				errorf("Default mode paused %q on a serving pod", id)
			}
			where[id], pausedNow[id], drained[id], marked[id] = "", true, p.Draining, false
		}
		for _, id := range pd.Mark {
			prog := progs[id]
			switch {
			case prog == nil || where[id] != p.Name:
				errorf("mark of %q, which is not on %s", id, p.Name)
			case prog.Status != StatusReasoning || prog.MarkedForPause:
				errorf("mark of %q, which is %v, marked %v", id, prog.Status, prog.MarkedForPause)
			case policy.Mode == ModeDefault && !p.Draining:
				errorf("Default mode marked %q on a serving pod", id)
			}
			marked[id] = true
		}
		for _, id := range pd.Unmark {
			if prog := progs[id]; prog == nil || where[id] != p.Name || !prog.MarkedForPause {
				errorf("unmark of %q, which is not a marked program on %s", id, p.Name)
			}
			marked[id] = false
		}
	}
	for _, pd := range d.Pods {
		p := pods[pd.Pod]
		for _, id := range pd.Place {
			switch {
			case progs[id] == nil:
				errorf("place of unknown program %q", id)
			case progs[id].State == StateTerminated:
				errorf("place of terminated program %q", id)
			case where[id] != "":
				errorf("place of %q on %s, but it is on %q", id, p.Name, where[id])
			case !p.Ready || p.Draining:
				errorf("place of %q on pod %s, which is not serving", id, p.Name)
			}
			where[id], placedNow[id] = p.Name, p.Name
		}
	}

	// Exactly once: placed somewhere, or in Paused, never both.
	var waiting []string
	for id, at := range where {
		if at == "" {
			waiting = append(waiting, id)
		}
	}
	slices.Sort(waiting)
	if diff := cmp.Diff(waiting, d.Paused, cmpEmpty); diff != "" {
		errorf("Paused is not the set of programs left waiting (-want +got):\n%s", diff)
	}
	if policy.Mode == ModeDefault && serving > 0 && len(d.Paused) > 0 {
		errorf("Default mode left %v waiting with %d serving pods", d.Paused, serving)
	}

	// Force-resumes: exactly the overdue programs, when a pod serves.
	var overdue []string
	for id, p := range progs {
		if p.State != StateTerminated && wasWaiting(id) && !pausedNow[id] && !p.PausedSince.IsZero() &&
			now.Sub(p.PausedSince) > policy.MaxPauseDuration {
			overdue = append(overdue, id)
		}
	}
	if policy.Mode == ModeDefault || serving == 0 {
		overdue = nil
	}
	if diff := cmp.Diff(sorted(overdue), sorted(d.ForceResumed), cmpEmpty); diff != "" {
		errorf("ForceResumed is not the overdue programs (-want +got):\n%s", diff)
	}
	forced := map[string]bool{}
	for _, id := range d.ForceResumed {
		forced[id] = true
		if placedNow[id] == "" {
			errorf("force-resumed %q is not placed", id)
		}
	}

	// Capacity, recomputed from the final placement.
	used, markedTokens, forcedTokens, count := map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int{}
	for id, at := range where {
		if at == "" {
			continue
		}
		c := refCharge(policy, progs[id], placedNow[id] != "")
		used[at] += c
		count[at]++
		if marked[id] && progs[id].Status == StatusReasoning {
			markedTokens[at] += c
		}
		if forced[id] {
			forcedTokens[at] += c
		}
	}
	remaining := map[string]int64{}
	for _, pd := range d.Pods {
		p := pods[pd.Pod]
		want := Capacity{Used: used[p.Name], Total: p.CapacityTokens, Marked: markedTokens[p.Name], Programs: count[p.Name]}
		if diff := cmp.Diff(want, pd.Capacity); diff != "" {
			errorf("pod %s capacity (-recomputed +reported):\n%s", p.Name, diff)
		}
		remaining[p.Name] = p.CapacityTokens - used[p.Name]
		if policy.Mode != ModeProgramAware || !p.Ready || p.Draining {
			continue
		}
		if over := used[p.Name] - markedTokens[p.Name] - forcedTokens[p.Name] - p.CapacityTokens; over > 0 {
			errorf("pod %s over capacity by %d beyond marked (%d) and force-resumed (%d) tokens",
				p.Name, over, markedTokens[p.Name], forcedTokens[p.Name])
		}
	}

	// Nothing waits while a pod has room for it: with decay off, a program
	// that was waiting and still is fits no serving pod that paused
	// nothing this round, but for at most one reserved pod, which only
	// programs below the class of another waiting program may be kept off
	// (with aging or ResumeFirstAfter, below its rank: the class alone does
	// not say which, so only the one pod is checked).
	if policy.Mode == ModeProgramAware && !policy.ActingDecay.Enabled {
		s, _ := New(policy)
		candidate := func(id string) bool { return !pausedNow[id] || drained[id] }
		best := classIdle + 1
		for _, id := range waiting {
			if candidate(id) {
				best = min(best, classOf(progs[id]))
			}
		}
		for _, id := range waiting {
			if !candidate(id) {
				continue
			}
			fp := s.model.footprint(progs[id])
			var room []string
			for _, pd := range d.Pods {
				p := pods[pd.Pod]
				if p.Ready && !p.Draining && len(pd.Pause) == 0 && fp <= remaining[p.Name] {
					room = append(room, p.Name)
				}
			}
			ranked := policy.WaitAging > 0 || policy.ResumeFirstAfter > 0
			if len(room) > 1 || len(room) == 1 && !ranked && classOf(progs[id]) <= best {
				errorf("%q (class %d, %d tokens) waits though %v have room", id, classOf(progs[id]), fp, room)
			}
		}
	}

	if d.RecommendedReplicas < serving {
		errorf("RecommendedReplicas %d below the %d serving pods", d.RecommendedReplicas, serving)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
