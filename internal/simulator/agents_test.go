package simulator

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/fleet"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// smallPool is two L4s serving Llama-3.1-8B: ~38k KV tokens each, so a
// dozen growing agent programs overflow it.
func smallPool(mode placement.Mode) AgentSetup {
	s := agentSetup(mode, 2)
	s.Replica.Accelerator = "L4"
	s.Warmup, s.Window = 30*time.Second, 2*time.Minute
	return s
}

func smallAgents() AgentWorkload {
	w := SWEBenchLike(32)
	w.InitialContext.Mean, w.InitialContext.Max = 2000, 4000
	w.MinSteps, w.MaxSteps = 6, 10
	return w
}

func TestAgentsProgramAwarePausesAndResumesUnderOverload(t *testing.T) {
	r, err := RunAgents(smallAgents(), smallPool(placement.ModeProgramAware))
	if err != nil {
		t.Fatal(err)
	}
	if r.Steps == 0 || r.Pauses == 0 || r.Resumes == 0 {
		t.Fatalf("steps %d pauses %d resumes %d: an overloaded pool must pause and resume", r.Steps, r.Pauses, r.Resumes)
	}
	if len(r.StepLatency) != r.Steps+r.Unfinished {
		t.Errorf("%d latencies for %d steps and %d unfinished", len(r.StepLatency), r.Steps, r.Unfinished)
	}
	if waited := checkStepWaits(t, r); waited == 0 {
		t.Error("no step waited on a gate in a run that paused programs")
	}
	d, err := RunAgents(smallAgents(), smallPool(placement.ModeDefault))
	if err != nil {
		t.Fatal(err)
	}
	if d.Pauses != 0 || d.Resumes != 0 {
		t.Errorf("Default mode paused %d and resumed %d programs", d.Pauses, d.Resumes)
	}
	if waited := checkStepWaits(t, d); waited != 0 {
		t.Errorf("%d steps waited before an engine in Default mode, which holds none", waited)
	}
	if r.RecomputedTokens >= d.RecomputedTokens {
		t.Errorf("ProgramAware recomputed %d tokens, Default %d: pausing should keep caches warm",
			r.RecomputedTokens, d.RecomputedTokens)
	}
	t.Logf("ProgramAware %.1f steps/min (hit %.2f), Default %.1f (hit %.2f)",
		r.StepsPerMinute, r.PrefixHitRate, d.StepsPerMinute, d.PrefixHitRate)
}

// TestAgentsHostTierCutsRecompute: with a host tier, paused programs' KV is
// offloaded and restored instead of recomputed.
func TestAgentsHostTierCutsRecompute(t *testing.T) {
	without, err := RunAgents(smallAgents(), smallPool(placement.ModeProgramAware))
	if err != nil {
		t.Fatal(err)
	}
	s := smallPool(placement.ModeProgramAware)
	s.HostBlocks = 8192
	// Overcommit off, so the pool still pauses: at the default a host tier
	// of 3.5× the device's KV would hold every program.
	s.Policy.DeviceOvercommit = 1
	with, err := RunAgents(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	if with.Pauses == 0 || with.OffloadedBlocks == 0 || with.RestoredBlocks == 0 {
		t.Fatalf("pauses %d, %d blocks offloaded, %d restored: pauses must go through the host tier",
			with.Pauses, with.OffloadedBlocks, with.RestoredBlocks)
	}
	if with.RecomputedTokens >= without.RecomputedTokens {
		t.Errorf("recomputed %d tokens with the host tier, %d without", with.RecomputedTokens, without.RecomputedTokens)
	}
	t.Logf("recomputed tokens %d → %d; %.1f → %.1f steps/min; %d blocks offloaded, %d restored",
		without.RecomputedTokens, with.RecomputedTokens, without.StepsPerMinute, with.StepsPerMinute,
		with.OffloadedBlocks, with.RestoredBlocks)
}

// TestAgentsFairnessBoundsTheWait: on a moderately overloaded pool (20
// programs where ~12 fit), the fairness bound pauses long-running programs
// for those waiting past it, and the longest wait falls (1m19s to 1m9s).
// The effect is small on a pool this size: at 16 programs the longest wait
// was 49.4 s with and without the bound once resume went smallest first
// (51.1 s to 49.4 s before). Under heavier overload, where most programs
// wait, it does not help: see docs/benchmarks.md.
func TestAgentsFairnessBoundsTheWait(t *testing.T) {
	const bound = 15 * time.Second
	w := smallAgents()
	w.Programs = 20
	off, err := RunAgents(w, smallPool(placement.ModeProgramAware))
	if err != nil {
		t.Fatal(err)
	}
	s := smallPool(placement.ModeProgramAware)
	s.Policy.FairnessBound = bound
	on, err := RunAgents(w, s)
	if err != nil {
		t.Fatal(err)
	}
	if on.FairnessPauses == 0 {
		t.Fatal("the fairness bound paused nobody under overload")
	}
	if on.MaxWait >= off.MaxWait {
		t.Errorf("longest wait %v with the bound, %v without", on.MaxWait, off.MaxWait)
	}
	t.Logf("longest wait %v → %v, p99 step %v → %v, %.1f → %.1f steps/min, %d fairness pauses",
		off.MaxWait, on.MaxWait, off.P(0.99), on.P(0.99), off.StepsPerMinute, on.StepsPerMinute, on.FairnessPauses)
}

// The window's counters are the window's own: a run measuring [W, W+X) is
// the run measuring [0, W+X) minus the run measuring [0, W), prefix-cache
// hits included (the simulation itself does not depend on the window).
func TestAgentsWindowCountsExcludeWarmup(t *testing.T) {
	run := func(warmup, window time.Duration) *AgentResult {
		s := smallPool(placement.ModeDefault)
		s.Warmup, s.Window = warmup, window
		r, err := RunAgents(smallAgents(), s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const w, x = 40 * time.Second, 60 * time.Second
	warm, whole, window := run(0, w), run(0, w+x), run(w, x)
	if warm.PrefixQueries == 0 || window.PrefixQueries == 0 {
		t.Fatalf("no prefix-cache queries: warm-up %d, window %d", warm.PrefixQueries, window.PrefixQueries)
	}
	if got, want := window.PrefixQueries, whole.PrefixQueries-warm.PrefixQueries; got != want {
		t.Errorf("window prefix queries %d, want %d (%d in [0, W+X) − %d in [0, W))", got, want, whole.PrefixQueries, warm.PrefixQueries)
	}
	if got, want := window.PrefixHits, whole.PrefixHits-warm.PrefixHits; got != want {
		t.Errorf("window prefix hits %d, want %d", got, want)
	}
	if got, want := window.Steps, whole.Steps-warm.Steps; got != want {
		t.Errorf("window steps %d, want %d", got, want)
	}
	// The slices split the window's steps by time: they add up to Steps,
	// and the last slice ends with the window.
	for _, r := range []*AgentResult{whole, window} {
		sum := 0
		for _, n := range r.SliceSteps {
			sum += n
		}
		if sum != r.Steps || len(r.SliceSteps) == 0 {
			t.Errorf("slices %v add up to %d steps, want %d", r.SliceSteps, sum, r.Steps)
		}
	}
	if n := len(whole.SliceSteps); time.Duration(n-1)*SliceLength >= w+x {
		t.Errorf("%d slices of %v for a %v window", n, SliceLength, w+x)
	}
}

// Steps still unfinished when the window closes count at their wait so
// far: a program held past the end of the window is in the p99, and in
// HeldAtEnd and MaxWait.
func TestAgentsUnfinishedStepsCount(t *testing.T) {
	a, err := newAgentSim(smallAgents(), smallPool(placement.ModeProgramAware))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.run(); err != nil {
		t.Fatal(err)
	}
	r := a.res
	end := a.s.Warmup + a.s.Window
	held, longest := 0, time.Duration(0)
	for _, p := range a.live {
		if p.held || p.queued {
			held++
			longest = max(longest, end-p.issuedAt)
		}
	}
	if held == 0 {
		t.Fatal("nothing held at the end of an overloaded ProgramAware run; the test needs some")
	}
	if r.HeldAtEnd != held {
		t.Errorf("HeldAtEnd %d, want %d", r.HeldAtEnd, held)
	}
	if r.MaxWait < longest {
		t.Errorf("MaxWait %v, below the longest wait still held at the end, %v", r.MaxWait, longest)
	}
	if len(r.StepLatency) != r.Steps+r.Unfinished || r.Unfinished < held {
		t.Errorf("%d latencies for %d steps and %d unfinished (%d held)", len(r.StepLatency), r.Steps, r.Unfinished, held)
	}
	if r.P(1) < longest {
		t.Errorf("max step latency %v, below a wait still unfinished, %v", r.P(1), longest)
	}
}

// Behind a worker cap the client never runs more programs at once than
// WorkerCap × Pods; the others wait in arrival order and start as programs
// are released.
func TestAgentsWorkerCap(t *testing.T) {
	s := smallPool(placement.ModeDefault)
	s.WorkerCap = 4
	a, err := newAgentSim(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	a.onEvent = func() {
		running := 0
		for _, p := range a.live {
			if p.started {
				running++
			}
		}
		most = max(most, running)
	}
	if err := a.run(); err != nil {
		t.Fatal(err)
	}
	if want := s.WorkerCap * s.Pods; most != want {
		t.Errorf("at most %d programs at once, want the cap, %d", most, want)
	}
	r := a.res
	if r.Steps == 0 || r.HeldAtEnd == 0 || r.MaxWait == 0 || r.Pauses != 0 {
		t.Errorf("steps %d, held at end %d, max wait %v, pauses %d: 32 programs on 8 workers must wait, not pause",
			r.Steps, r.HeldAtEnd, r.MaxWait, r.Pauses)
	}
	if waited := checkStepWaits(t, r); waited == 0 {
		t.Error("no step waited for a worker behind the cap")
	}
	uncapped, err := RunAgents(smallAgents(), smallPool(placement.ModeDefault))
	if err != nil {
		t.Fatal(err)
	}
	if uncapped.HeldAtEnd != 0 || uncapped.MaxWait != 0 {
		t.Errorf("uncapped Default held %d programs (max wait %v)", uncapped.HeldAtEnd, uncapped.MaxWait)
	}
}

// TestAgentsDeviceBlocksOverridesTheAccelerator: the oracle arm's device KV
// (DeviceBlocks) replaces the accelerator's, so an overloaded pool that
// evicts and preempts with its own KV does neither with enough of it, and
// does more steps.
func TestAgentsDeviceBlocksOverridesTheAccelerator(t *testing.T) {
	own, err := RunAgents(smallAgents(), smallPool(placement.ModeDefault))
	if err != nil {
		t.Fatal(err)
	}
	if own.EvictedBlocks == 0 || own.RecomputedTokens == 0 {
		t.Fatalf("evicted %d blocks, recomputed %d tokens: the small pool must overflow its own KV",
			own.EvictedBlocks, own.RecomputedTokens)
	}
	s := smallPool(placement.ModeDefault)
	s.DeviceBlocks = 1 << 16
	big, err := RunAgents(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	if big.EvictedBlocks != 0 || big.Preemptions != 0 {
		t.Errorf("with %d device blocks: evicted %d, preempted %d; want none", s.DeviceBlocks, big.EvictedBlocks, big.Preemptions)
	}
	if big.StepsPerMinute <= own.StepsPerMinute || big.PrefixHitRate <= own.PrefixHitRate {
		t.Errorf("steps/min %.1f → %.1f, hit rate %.3f → %.3f: KV that never fills must do better",
			own.StepsPerMinute, big.StepsPerMinute, own.PrefixHitRate, big.PrefixHitRate)
	}
	t.Logf("steps/min %.1f → %.1f, hit rate %.3f → %.3f, recomputed %d → %d tokens",
		own.StepsPerMinute, big.StepsPerMinute, own.PrefixHitRate, big.PrefixHitRate, own.RecomputedTokens, big.RecomputedTokens)
}

// HostAsDevice gives each pod its host tier's blocks as device KV and no
// tier: the engines hold more and copy nothing.
func TestAgentsHostAsDevice(t *testing.T) {
	s := smallPool(placement.ModeDefault)
	s.HostBlocks = 1024
	tiered, err := newAgentSim(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	s.HostAsDevice = true
	merged, err := newAgentSim(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range merged.pods {
		a, b := tiered.pods[i].eng.KVStats(), merged.pods[i].eng.KVStats()
		if a.HostTotal != 1024 || b.HostTotal != 0 || b.Total != a.Total+1024 {
			t.Errorf("pod %d: tiered %d device + %d host blocks, merged %d + %d; want %d + 0",
				i, a.Total, a.HostTotal, b.Total, b.HostTotal, a.Total+1024)
		}
	}
	r, err := RunAgents(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	if r.CopyTime != 0 || r.OffloadedBlocks != 0 || r.Steps == 0 {
		t.Errorf("merged pool: %d steps, copied for %v, offloaded %d blocks; want steps and no copies", r.Steps, r.CopyTime, r.OffloadedBlocks)
	}
}

// TestAgentsDecisionsLandOnTheNamedPods: a Decision lists pods sorted by
// name, so from 11 pods on ("pod-10" sorts before "pod-2") its order is
// not the pool's. After every round, each pod's gate must run exactly the
// programs the round placed on that pod by name.
func TestAgentsDecisionsLandOnTheNamedPods(t *testing.T) {
	s := agentSetup(placement.ModeProgramAware, 12)
	s.Replica.Accelerator = "L4"
	s.Warmup, s.Window = 0, 90*time.Second
	w := smallAgents()
	w.Programs = 12 * 20
	a, err := newAgentSim(w, s)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	a.onRound = func(sum *fleet.Summary) {
		for _, ps := range sum.Pods {
			placed := 0
			for _, pr := range a.pods[a.byName[ps.Name]].table.Report().Programs {
				if pr.Placed && pr.State == placement.StateActive.String() {
					placed++
				}
			}
			if placed != ps.Programs {
				t.Fatalf("round %d: %s runs %d programs, the round placed %d there", sum.Version, ps.Name, placed, ps.Programs)
			}
			checked += placed
		}
	}
	if err := a.run(); err != nil {
		t.Fatal(err)
	}
	if checked == 0 || a.res.Resumes == 0 {
		t.Fatalf("%d placements checked, %d resumes: the test needs both", checked, a.res.Resumes)
	}
}

// A request forwarded to the pod holding its paused program's cache waits
// there; when a placement moves the program to another pod, the gate
// asked again sends it there. Asked again as forwarded (as the request
// first came), it ran where it had waited and the program was placed on
// both pods (TestAgentsDecisionsLandOnTheNamedPods saw it as a pod running
// one program more than the round placed there).
func TestAgentsHeldForwardedRequestFollowsItsProgramsMove(t *testing.T) {
	a := oneProgramPool(t)
	p, from, to := a.live[0], a.pods[1], a.pods[0]
	// Paused with its cache on pod-1; pod-0, a round behind, still routes
	// it there.
	from.table.Apply(&wire.Placement{Version: 1, Mode: string(placement.ModeProgramAware), Place: []string{p.id}})
	from.table.Apply(&wire.Placement{Version: 2, Mode: string(placement.ModeProgramAware), Pause: []string{p.id}})
	to.table.Apply(&wire.Placement{Version: 1, Mode: string(placement.ModeProgramAware), Routes: map[string]string{p.id: from.addr}})
	if err := a.dispatch(p, 0, false); err != nil {
		t.Fatal(err)
	}
	if !p.held || p.heldAt != 1 {
		t.Fatalf("the request is held %v on pod %d; want held on pod-1, where pod-0 forwarded it", p.held, p.heldAt)
	}
	// The next round resumes it on pod-0.
	to.table.Apply(&wire.Placement{Version: 2, Mode: string(placement.ModeProgramAware), Place: []string{p.id}})
	from.table.Apply(&wire.Placement{Version: 3, Mode: string(placement.ModeProgramAware), Routes: map[string]string{p.id: to.addr}})
	if err := a.wakeHeld(); err != nil {
		t.Fatal(err)
	}
	if !p.running || p.pod != 0 {
		t.Errorf("the request runs %v on pod %d; want it running on pod-0", p.running, p.pod)
	}
	for i, pd := range a.pods {
		for _, pr := range pd.table.Report().Programs {
			if pr.Placed && pr.State == placement.StateActive.String() && i != 0 {
				t.Errorf("%s runs %s, placed on pod-0", pd.name, pr.ID)
			}
		}
	}
}

// Pods behind one PCIe switch share its uplink: the same run with a host
// tier spends more time copying (and stalls longer) when the two pods
// share a switch than when each has its own link.
func TestAgentsSharedHostLinksSlowCopies(t *testing.T) {
	s := smallPool(placement.ModeProgramAware)
	s.HostBlocks = 8192
	own, err := RunAgents(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	s.Topology = HostTopology{GPUsPerSwitch: 2, SwitchBandwidth: 32e9}
	shared, err := RunAgents(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	if own.CopyTime == 0 || shared.CopyTime <= own.CopyTime {
		t.Errorf("copy time %v with own links, %v behind a shared switch: sharing must cost", own.CopyTime, shared.CopyTime)
	}
	t.Logf("copy time %v → %v, copy stall %v → %v, %.1f → %.1f steps/min",
		own.CopyTime, shared.CopyTime, own.CopyStall, shared.CopyStall, own.StepsPerMinute, shared.StepsPerMinute)
}

// An open-loop wave with a drain: every program runs to its end (none is
// lost when its pod leaves the pool), the drained pod leaves once nothing
// runs there, and the run ends at the makespan, with the pods' idle tail
// counted.
func TestAgentsOpenLoopWaveWithDrain(t *testing.T) {
	for _, mode := range []placement.Mode{placement.ModeDefault, placement.ModeProgramAware} {
		t.Run(string(mode), func(t *testing.T) {
			s := smallPool(mode)
			s.Pods, s.Warmup, s.Window, s.DrainAt = 3, 0, time.Hour, 40*time.Second
			w := smallAgents()
			w.Programs, w.OpenLoop, w.StepsAlpha, w.MinSteps, w.MaxSteps = 24, true, 1.5, 3, 30
			a, err := newAgentSim(w, s)
			if err != nil {
				t.Fatal(err)
			}
			var steps int
			for _, p := range a.live {
				steps += p.steps
			}
			if err := a.run(); err != nil {
				t.Fatal(err)
			}
			r := a.res
			if len(a.live) != 0 || r.Makespan == 0 || r.Makespan <= s.DrainAt {
				t.Fatalf("%d programs live at the end, makespan %v (drain at %v)", len(a.live), r.Makespan, s.DrainAt)
			}
			if !a.pods[0].gone {
				t.Error("the drained pod is still in the pool")
			}
			if r.Steps != steps || r.Unfinished != 0 {
				t.Errorf("%d steps done of %d drawn, %d unfinished", r.Steps, steps, r.Unfinished)
			}
			if r.TailIdle <= 0 {
				t.Errorf("tail idle %v: the pods that finished first idle until the makespan", r.TailIdle)
			}
			t.Logf("makespan %v, %d steps, tail idle %v, %d moves", r.Makespan, r.Steps, r.TailIdle, r.Moves)
		})
	}
}

// Per-pod profiles: each pod gets its own accelerator's device KV and its
// own host tier, and its gate reports them to the fleet loop.
func TestAgentsPodProfiles(t *testing.T) {
	s := agentSetup(placement.ModeProgramAware, 2)
	s.Profiles = []PodProfile{{Accelerator: "H100-SXM", HostBlocks: 1000}, {Accelerator: "H200"}}
	a, err := newAgentSim(smallAgents(), s)
	if err != nil {
		t.Fatal(err)
	}
	h100, h200 := a.pods[0].table.Report().KV, a.pods[1].table.Report().KV
	if h200.TotalBlocks < 19*h100.TotalBlocks/10 {
		t.Errorf("H200 pod has %d device blocks, H100 pod %d: want about twice", h200.TotalBlocks, h100.TotalBlocks)
	}
	if h100.HostTotalBlocks != 1000 || h200.HostTotalBlocks != 0 {
		t.Errorf("host tiers %d and %d blocks, want 1000 and 0", h100.HostTotalBlocks, h200.HostTotalBlocks)
	}
	s.Profiles = s.Profiles[:1]
	if _, err := newAgentSim(smallAgents(), s); err == nil {
		t.Error("one profile for two pods was accepted")
	}
}

// checkStepWaits checks that r has a wait for each step latency, within it,
// and returns how many steps waited at all.
func checkStepWaits(t *testing.T, r *AgentResult) (waited int) {
	t.Helper()
	if len(r.StepWait) != len(r.StepLatency) {
		t.Fatalf("%d waits for %d step latencies", len(r.StepWait), len(r.StepLatency))
	}
	for i, w := range r.StepWait {
		if w < 0 || w > r.StepLatency[i] {
			t.Fatalf("step %d waited %v of its %v", i, w, r.StepLatency[i])
		}
		if w > 0 {
			waited++
		}
	}
	return waited
}

// The in-process control client refuses what the control API refuses: an
// invalid placement, and one past the table's bounds, which comes back as
// the same LimitError and changes nothing.
func TestSimPodClientRefusesWhatTheControlAPIRefuses(t *testing.T) {
	a := oneProgramPool(t)
	c, pd := simPodClient{a}, a.pods[0]
	if _, err := c.Push(context.Background(), pd.addr, &wire.Placement{Version: 0}); err == nil {
		t.Error("a placement the control API refuses as invalid was accepted")
	}
	place := make([]string, programs.MaxPlacedEntries)
	for i := range place {
		place[i] = fmt.Sprintf("p%d", i)
	}
	if res, err := c.Push(context.Background(), pd.addr, &wire.Placement{Version: 1, Place: place}); err != nil || !res.Applied || res.Version != 1 {
		t.Fatalf("%d programs placed: %+v, %v", len(place), res, err)
	}
	_, err := c.Push(context.Background(), pd.addr, &wire.Placement{Version: 2, Place: []string{"p0", "one-more"}})
	var le *programs.LimitError
	if !errors.As(err, &le) || le.Field != "place" {
		t.Fatalf("one program past the table's bound: %v; want a *programs.LimitError on place", err)
	}
	if pd.table.Version() != 1 {
		t.Errorf("the refused placement was applied (version %d)", pd.table.Version())
	}
}

// A release the Service sends to a pod that only routes the program ends
// it on the pod that runs it too, as the server's release does.
func TestAgentsReleaseReachesThePodRunningTheProgram(t *testing.T) {
	a := oneProgramPool(t)
	p, routing, running := a.live[0], a.pods[0], a.pods[1]
	running.table.Apply(&wire.Placement{Version: 1, Mode: string(placement.ModeProgramAware), Place: []string{p.id}})
	routing.table.Apply(&wire.Placement{Version: 1, Mode: string(placement.ModeProgramAware), Routes: map[string]string{p.id: running.addr}})
	a.rr = len(a.pods) - 1 // the Service's next pod is pod-0
	a.releaseCall(p.id)
	state := "absent"
	for _, pr := range running.table.Report().Programs {
		if pr.ID == p.id {
			state = pr.State
		}
	}
	if state != placement.StateTerminated.String() {
		t.Errorf("on the pod running it, the released program is %s; want TERMINATED", state)
	}
}

// oneProgramPool is smallPool, program-aware, with one program, not started.
func oneProgramPool(t *testing.T) *agentSim {
	t.Helper()
	w := smallAgents()
	w.Programs = 1
	a, err := newAgentSim(w, smallPool(placement.ModeProgramAware))
	if err != nil {
		t.Fatal(err)
	}
	return a
}
