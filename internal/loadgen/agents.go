package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// AgentWorkload describes agent programs shaped like coding agents on
// SWE-bench: each step sends the whole conversation so far (the context
// grows by the last output plus a tool result), then acts (runs a tool) for
// a sampled time; a program runs many steps and is then released, and a new
// one takes its place, so N programs are always live.
type AgentWorkload struct {
	Programs       int
	MinSteps       int
	MaxSteps       int
	InitialContext sim.LogNormal // system prompt + task, tokens
	Output         sim.LogNormal // tokens per reasoning step
	ToolResult     sim.LogNormal // tokens a tool call adds
	ToolTime       sim.LogNormal // milliseconds per tool call
}

// SWEBenchLike is the default agent shape: contexts start near 4k tokens and
// grow by ~850 tokens a step over 20–40 steps (to ~20–40k), tools take ~3 s.
func SWEBenchLike(programs int) AgentWorkload {
	return AgentWorkload{
		Programs: programs, MinSteps: 20, MaxSteps: 40,
		InitialContext: sim.LogNormal{Mean: 4000, Sigma: 0.4, Min: 1000, Max: 12000},
		Output:         sim.LogNormal{Mean: 250, Sigma: 0.8, Min: 8, Max: 2000},
		ToolResult:     sim.LogNormal{Mean: 600, Sigma: 1.0, Min: 16, Max: 6000},
		ToolTime:       sim.LogNormal{Mean: 3000, Sigma: 1.0, Min: 50, Max: 60000},
	}
}

// LongToolOutputs is SWEBenchLike with tool results of ~1,500 tokens (file
// views and test logs), so contexts grow to ~50k tokens.
func LongToolOutputs(programs int) AgentWorkload {
	w := SWEBenchLike(programs)
	w.ToolResult = sim.LogNormal{Mean: 1500, Sigma: 1.0, Min: 16, Max: 12000}
	return w
}

// AgentSetup is the simulated pool.
type AgentSetup struct {
	Replica  Setup
	Pods     int
	Policy   placement.Policy
	Interval time.Duration // controller round interval
	Warmup   time.Duration // not measured
	Window   time.Duration // measured
	Seed     uint64
	// ProgramCap, in Default mode, is a per-pod limit on live programs (0:
	// none): a new program whose least-loaded pod is at the cap waits, in
	// arrival order, until a program ends somewhere. It is the hand-tuned
	// baseline — an agent framework capping its worker count in front of
	// vLLM — that ProgramAware must beat without a cap to tune.
	ProgramCap int
	// HostBlocks is each pod's host-memory KV tier in blocks (0: none).
	// Paused programs' KV moves there and comes back when they resume on
	// the same pod; in Default mode, which never pauses, every tool call
	// offloads the program's KV (an idle program's cache waits in host
	// memory, as with vLLM's CPU offloading). Blocks that a pod evicts from
	// the device spill there too (a program in a tool call finds its KV on
	// the host), unless HostDropEvicted (kvcache.Config.DropEvicted).
	HostBlocks      int
	HostDropEvicted bool
	// SerialCopies runs every copy between the tiers before the iteration
	// (engine.Config.SerialCopies) instead of overlapping the restores
	// with it: for comparisons.
	SerialCopies bool
	// DeviceBlocks, if positive, replaces each pod's device KV capacity in
	// blocks (by default what the accelerator's memory holds after the
	// weights), everything else unchanged: the step-time model still
	// charges the KV each batch reads. The benchmark's oracle arm sets it
	// beyond anything a run can fill, so nothing is ever evicted, preempted
	// or recomputed.
	DeviceBlocks int
}

// AgentResult summarises one run.
type AgentResult struct {
	Mode           placement.Mode
	Steps          int // program steps completed in the window
	StepsPerMinute float64
	// PrefixHitRate is PrefixHits / PrefixQueries: prompt tokens served
	// from the prefix cache among those that could have been, admitted in
	// the window (the warm-up's are not counted).
	PrefixHitRate             float64
	PrefixHits, PrefixQueries int64
	Preemptions               int
	// RecomputedTokens are prompt tokens computed again although they had
	// been computed for the same program before (its cache was evicted or
	// it was preempted); FreshTokens are those computed for the first time.
	RecomputedTokens, FreshTokens int64
	// StepLatency is issue to completion, including time held, of every
	// step completed in the window, and of every step still unfinished when
	// the window closes at its wait so far (Unfinished of them), so that
	// steps held past the window are not left out of the percentiles.
	StepLatency     []time.Duration
	Unfinished      int
	Pauses, Resumes int
	// HeldAtEnd counts programs whose request was held (paused, or waiting
	// for a slot under ProgramCap) when the window closed; MaxWait is the
	// longest any step in the window waited before it reached an engine,
	// those still waiting counted at their wait so far.
	HeldAtEnd int
	MaxWait   time.Duration
	// FairnessPauses are pauses and marks the fairness bound asked for;
	// OffloadedBlocks and RestoredBlocks count host-tier transfers,
	// SpilledBlocks the offloaded blocks that were device evictions.
	// EvictedBlocks counts every device eviction of cached contents in the
	// whole run, warm-up included (kvcache.Stats.Evicted).
	FairnessPauses                                 int
	OffloadedBlocks, RestoredBlocks, SpilledBlocks int64
	EvictedBlocks                                  int64
	// ComputeTime and CopyTime are the pods' modelled time in the window
	// (summed over pods) running iterations and copying KV blocks between
	// the tiers; CopyStall is the part of CopyTime no iteration hid (all
	// of it with SerialCopies). Pods × Window less ComputeTime and
	// CopyStall is the pods' idle time.
	ComputeTime, CopyTime, CopyStall time.Duration
}

// P is a step-latency percentile.
func (r *AgentResult) P(q float64) time.Duration {
	return (&Result{Latencies: r.StepLatency}).Percentile(q)
}

type agentPod struct {
	name string
	eng  *engine.Engine
	clk  *clock.Virtual
	x    *sim.Executor
	live []*agentProgram // programs with a request in flight here
}

type agentProgram struct {
	id string
	// reported is the program's context as the runtime reports it to the
	// controller: the last step's prompt + output once a step ended, its
	// prompt while a step runs; a held request is not tokenized yet, so a
	// held program counts at its previous step (a new one at 0).
	reported  int64
	rng       *rand.Rand
	tokens    []int32 // the context so far
	computed  int     // tokens of the context computed at least once
	step      int
	steps     int
	pod       int // -1: none
	lastPod   int // where its KV cache may still be, -1: none
	paused    bool
	marked    bool
	reasoning bool
	held      bool
	heldAt    int // the pod holding its request (ProgramAware), -1: none
	released  bool
	stream    *engine.Stream
	issuedAt  time.Duration
	readyAt   time.Duration // when the tool finishes
	lastTrans time.Duration
	pausedAt  time.Duration
	runSince  time.Duration // last placed or resumed
	promptLen int
	lastTool  int // tokens of the last tool result
}

type agentSim struct {
	w      AgentWorkload
	s      AgentSetup
	vocab  *sim.Vocabulary
	pods   []*agentPod
	progs  []*agentProgram
	sched  *placement.Scheduler
	now    time.Duration
	nextID int
	rr     int // round-robin position of the Service in front of the pods
	res    *AgentResult
	start  time.Time
	capTok int64
	// room is each pod's remaining capacity after the last round (the
	// placement's Room), indexed like pods: where a pod's gate forwards a
	// new program it has no room for. Nil until the first round.
	room []int64
	// podIndex maps a pod's name to its index in pods: a Decision lists
	// pods sorted by name, which is not their order here from 11 pods on
	// ("pod-10" sorts before "pod-2").
	podIndex map[string]int
	// onRound, if set, runs after every round has been applied (tests).
	onRound func(*placement.Decision, map[string]*agentProgram)
	// slotFreed: a program ended, so a program waiting under ProgramCap
	// may start.
	slotFreed bool
	// windowStats are the pods' KV statistics and executor busy times when
	// the window opened.
	windowStats []kvcache.Stats
	windowBusy  []sim.Busy
	// onEvent, if set, runs after every event (tests check invariants).
	onEvent func()
}

// RunAgents simulates the pool in virtual time: real engines on the sim
// executor, one per pod, and the real placement algorithm every Interval.
func RunAgents(w AgentWorkload, s AgentSetup) (*AgentResult, error) {
	a, err := newAgentSim(w, s)
	if err != nil {
		return nil, err
	}
	if err := a.run(); err != nil {
		return nil, err
	}
	return a.res, nil
}

func newAgentSim(w AgentWorkload, s AgentSetup) (*agentSim, error) {
	sched, err := placement.New(s.Policy)
	if err != nil {
		return nil, err
	}
	a := &agentSim{w: w, s: s, sched: sched, res: &AgentResult{Mode: s.Policy.Mode}, start: time.Unix(0, 0), podIndex: map[string]int{}}
	for i := range s.Pods {
		x, clk, blocks, err := s.Replica.build(nil) // lengths come from the workload
		if err != nil {
			return nil, err
		}
		a.vocab = x.Vocabulary()
		if s.DeviceBlocks > 0 {
			blocks = s.DeviceBlocks
		}
		a.capTok = int64(blocks * s.Replica.BlockSize)
		eng, err := engine.New(engine.Config{
			MaxNumSeqs: s.Replica.MaxNumSeqs, MaxNumBatchedTokens: s.Replica.MaxNumBatchedTokens,
			MaxQueue: 1 << 20, MaxModelLen: s.Replica.MaxModelLen, VocabSize: x.Vocabulary().Size(),
			KV: kvcache.Config{NumBlocks: blocks, BlockSize: s.Replica.BlockSize, EnablePrefixCache: true, HostBlocks: s.HostBlocks,
				DropEvicted: s.HostDropEvicted},
			EOS: []int32{x.EOS()}, Decoder: x.Vocabulary(), Clock: clk, SerialCopies: s.SerialCopies,
		}, x)
		if err != nil {
			return nil, err
		}
		a.podIndex[fmt.Sprintf("pod-%d", i)] = i
		a.pods = append(a.pods, &agentPod{name: fmt.Sprintf("pod-%d", i), eng: eng, clk: clk, x: x})
	}
	rng := rand.New(rand.NewPCG(s.Seed, 99))
	for range w.Programs {
		// Stagger starts over the first interval so programs are out of phase.
		a.newProgram(time.Duration(rng.Int64N(int64(10 * time.Second))))
	}
	return a, nil
}

func (a *agentSim) newProgram(at time.Duration) {
	a.nextID++
	seed := a.s.Seed*1_000_003 + uint64(a.nextID)
	p := &agentProgram{
		id:  fmt.Sprintf("prog-%05d", a.nextID),
		rng: rand.New(rand.NewPCG(seed, 7)), pod: -1, lastPod: -1, heldAt: -1, readyAt: at, lastTrans: at,
	}
	p.steps = a.w.MinSteps + p.rng.IntN(a.w.MaxSteps-a.w.MinSteps+1)
	p.tokens = a.appendRandom(p, nil, a.w.InitialContext.Sample(p.rng.Uint64()))
	a.progs = append(a.progs, p)
}

func (a *agentSim) appendRandom(p *agentProgram, toks []int32, n int) []int32 {
	for range n {
		toks = append(toks, int32(p.rng.IntN(a.vocab.Size()-1)))
	}
	return toks
}

func (a *agentSim) measuring() bool {
	return a.now >= a.s.Warmup && a.now < a.s.Warmup+a.s.Window
}

func (a *agentSim) run() error {
	end := a.s.Warmup + a.s.Window
	nextTick := a.s.Interval
	ctx := context.Background()
	for {
		// The next event: a pod iteration, a tool finishing, a round, or
		// the window opening.
		t, podIdx := nextTick, -1
		if a.windowStats == nil && a.s.Warmup < t {
			t, podIdx = a.s.Warmup, -3
		}
		for i, pd := range a.pods {
			if run, wait := pd.eng.Pending(); run+wait > 0 {
				if c := pd.clk.Now().Sub(a.start); c < t {
					t, podIdx = c, i
				}
			}
		}
		for _, p := range a.progs {
			if !p.reasoning && !p.held && !p.released && p.readyAt < t {
				t, podIdx = p.readyAt, -2
			}
		}
		if t >= end {
			break
		}
		a.now = max(a.now, t)
		switch {
		case podIdx >= 0:
			pd := a.pods[podIdx]
			r := pd.eng.Step(ctx)
			if r.Err != nil {
				return r.Err
			}
			if a.measuring() {
				a.res.Preemptions += r.Preempted
			}
			a.collect(podIdx)
		case podIdx == -2:
			for _, p := range a.progs {
				if !p.reasoning && !p.held && !p.released && p.readyAt <= a.now {
					if err := a.issue(p); err != nil {
						return err
					}
				}
			}
		case podIdx == -3:
			// Counters from here on are the window's: snapshot the caches'
			// so the warm-up's hits do not count.
			for _, pd := range a.pods {
				a.windowStats = append(a.windowStats, pd.eng.KVStats())
				a.windowBusy = append(a.windowBusy, pd.x.Busy())
			}
		default:
			if err := a.round(); err != nil {
				return err
			}
			nextTick += a.s.Interval
		}
		if a.slotFreed {
			if err := a.admitWaiting(); err != nil {
				return err
			}
		}
		if a.onEvent != nil {
			a.onEvent()
		}
	}
	a.closeWindow(end)
	return nil
}

// closeWindow counts the steps still unfinished at the end of the window
// at their wait so far, and the window's prefix-cache hit rate.
func (a *agentSim) closeWindow(end time.Duration) {
	for _, p := range a.progs {
		if p.released || (!p.reasoning && !p.held) {
			continue
		}
		wait := end - p.issuedAt
		a.res.StepLatency = append(a.res.StepLatency, wait)
		a.res.Unfinished++
		if p.held {
			a.res.HeldAtEnd++
			a.res.MaxWait = max(a.res.MaxWait, wait)
		}
	}
	var hits, queries int64
	for i, pd := range a.pods {
		st := pd.eng.KVStats()
		a.res.OffloadedBlocks += st.Offloaded
		a.res.RestoredBlocks += st.Restored
		a.res.SpilledBlocks += st.Spilled
		a.res.EvictedBlocks += st.Evicted
		hits += st.Hits
		queries += st.Queries
		b := pd.x.Busy()
		a.res.ComputeTime += b.Compute
		a.res.CopyTime += b.Copy
		a.res.CopyStall += b.CopyStall
		if i < len(a.windowStats) {
			hits -= a.windowStats[i].Hits
			queries -= a.windowStats[i].Queries
			a.res.ComputeTime -= a.windowBusy[i].Compute
			a.res.CopyTime -= a.windowBusy[i].Copy
			a.res.CopyStall -= a.windowBusy[i].CopyStall
		}
	}
	a.res.PrefixHits, a.res.PrefixQueries = hits, queries
	if queries > 0 {
		a.res.PrefixHitRate = float64(hits) / float64(queries)
	}
	a.res.StepsPerMinute = float64(a.res.Steps) / a.s.Window.Minutes()
}

// issue is a program's next request at a.now: the gate.
func (a *agentSim) issue(p *agentProgram) error {
	if p.step > 0 {
		// The tool result joins the context.
		p.lastTool = a.w.ToolResult.Sample(p.rng.Uint64())
		p.tokens = a.appendRandom(p, p.tokens, p.lastTool)
	}
	p.issuedAt = a.now
	if p.paused {
		a.hold(p, a.serviceNext())
		return nil
	}
	if p.pod < 0 {
		if a.s.Policy.Mode == placement.ModeDefault {
			i, ok := a.leastPrograms()
			if !ok {
				a.hold(p, -1) // waits for a slot under ProgramCap
				return nil
			}
			p.pod, p.runSince = i, a.now
		} else if i, holder := a.gateNew(); i >= 0 {
			p.pod, p.runSince = i, a.now
		} else {
			p.paused, p.pausedAt = true, a.now
			a.hold(p, holder)
			return nil
		}
	}
	return a.submit(p)
}

func (a *agentSim) hold(p *agentProgram, pod int) {
	p.held, p.heldAt = true, pod
}

func (a *agentSim) submit(p *agentProgram) error {
	if p.held && a.measuring() {
		a.res.MaxWait = max(a.res.MaxWait, a.now-p.issuedAt)
	}
	p.held, p.heldAt = false, -1
	pd := a.pods[p.pod]
	pd.clk.Set(a.start.Add(a.now)) // an idle pod wakes now; a busy one at its next step
	out := a.w.Output.Sample(p.rng.Uint64())
	st, err := pd.eng.Submit(context.Background(), &engine.Request{
		ID: p.id, ProgramID: p.id, Prompt: p.tokens,
		Params: engine.Params{MaxTokens: min(out, a.s.Replica.MaxModelLen-len(p.tokens)), IgnoreEOS: true},
	})
	if err != nil {
		return fmt.Errorf("program %s step %d: %w", p.id, p.step, err)
	}
	p.stream, p.promptLen, p.reasoning, p.lastTrans = st, len(p.tokens), true, a.now
	p.reported = max(p.reported, int64(len(p.tokens))) // the runtime's Started
	pd.live = append(pd.live, p)
	return nil
}

// admitWaiting starts programs waiting under ProgramCap, oldest first,
// while a pod has a free slot.
func (a *agentSim) admitWaiting() error {
	a.slotFreed = false
	for {
		var next *agentProgram
		for _, p := range a.progs {
			if p.held && !p.paused && !p.released && (next == nil || p.issuedAt < next.issuedAt) {
				next = p
			}
		}
		if next == nil {
			return nil
		}
		i, ok := a.leastPrograms()
		if !ok {
			return nil
		}
		next.pod, next.runSince = i, a.now
		if err := a.submit(next); err != nil {
			return err
		}
	}
}

// collect drains the pod's streams after an iteration.
func (a *agentSim) collect(podIdx int) {
	pd := a.pods[podIdx]
	done, cancel := context.WithCancel(context.Background())
	cancel()
	at := pd.clk.Now().Sub(a.start)
	j := 0
	for _, p := range pd.live {
		finished := false
		for {
			c, err := p.stream.Next(done)
			if err != nil {
				break
			}
			p.tokens = append(p.tokens, c.TokenIDs...)
			if c.Done {
				finished = true
				a.finishStep(p, c, at, pd)
				break
			}
		}
		if !finished {
			pd.live[j] = p
			j++
		}
	}
	clear(pd.live[j:])
	pd.live = pd.live[:j]
}

func (a *agentSim) finishStep(p *agentProgram, c engine.Chunk, at time.Duration, pd *agentPod) {
	fresh := int64(max(0, p.promptLen-p.computed))
	computed := int64(c.Usage.PromptTokens - c.Usage.CachedTokens)
	if a.measuring() {
		a.res.Steps++
		a.res.StepLatency = append(a.res.StepLatency, at-p.issuedAt)
		a.res.FreshTokens += fresh
		a.res.RecomputedTokens += max(0, computed-fresh)
	}
	p.computed = len(p.tokens) - 1    // the last output token is computed by the next step
	p.reported = int64(len(p.tokens)) // the runtime's End: prompt + output
	p.reasoning, p.lastTrans, p.stream = false, at, nil
	p.step++
	if p.step >= p.steps || len(p.tokens)+a.w.ToolResult.Max+a.w.Output.Max >= a.s.Replica.MaxModelLen {
		// Released (done, or its context is full): a new program takes its place.
		p.released, p.pod = true, -1
		a.slotFreed = true
		a.newProgram(at)
		return
	}
	p.readyAt = at + time.Duration(a.w.ToolTime.Sample(p.rng.Uint64()))*time.Millisecond
	if p.marked {
		a.pause(p, at)
	} else if a.s.Policy.Mode == placement.ModeDefault && a.s.HostBlocks > 0 {
		pd.eng.OffloadPrefix(p.tokens)
	}
}

func (a *agentSim) pause(p *agentProgram, at time.Duration) {
	if p.pod >= 0 {
		a.pods[p.pod].eng.OffloadPrefix(p.tokens)
	}
	p.paused, p.marked, p.lastPod, p.pod, p.pausedAt = true, false, p.pod, -1, at
	if a.measuring() {
		a.res.Pauses++
	}
}

// round is one controller round: snapshot, decide, apply.
func (a *agentSim) round() error {
	// Drop released programs.
	j := 0
	for _, p := range a.progs {
		if !p.released {
			a.progs[j] = p
			j++
		}
	}
	a.progs = a.progs[:j]
	snap, byID := a.snapshot()
	dec, err := a.sched.Decide(snap, a.start.Add(a.now))
	if err != nil {
		return err
	}
	if a.measuring() {
		a.res.FairnessPauses += len(dec.FairnessPaused)
	}
	a.room = a.room[:0]
	for _, pd := range a.pods {
		c := dec.Pod(pd.name).Capacity
		a.room = append(a.room, c.Total-c.Used)
	}
	for _, pdDec := range dec.Pods {
		i := a.podIndex[pdDec.Pod]
		for _, id := range pdDec.Pause {
			a.pause(byID[id], a.now)
		}
		for _, id := range pdDec.Mark {
			byID[id].marked = true
		}
		for _, id := range pdDec.Unmark {
			byID[id].marked = false
		}
		for _, id := range pdDec.Place {
			p := byID[id]
			if p.paused && a.measuring() {
				a.res.Resumes++
			}
			if p.paused && p.lastPod == i {
				// Back where its KV was offloaded: restore it now, ahead
				// of its next request.
				a.pods[i].eng.RestorePrefix(p.tokens)
			}
			p.paused, p.pod, p.runSince = false, i, a.now
			if p.held {
				if err := a.submit(p); err != nil {
					return err
				}
			}
		}
	}
	if a.onRound != nil {
		a.onRound(dec, byID)
	}
	return nil
}

// snapshot is what the controller reads from the pods: the programs they
// know, at the sizes they report.
func (a *agentSim) snapshot() (placement.Snapshot, map[string]*agentProgram) {
	snap := placement.Snapshot{}
	for _, pd := range a.pods {
		snap.Pods = append(snap.Pods, placement.Pod{Name: pd.name, Ready: true, CapacityTokens: a.capTok,
			HostTokens: int64(a.s.HostBlocks * a.s.Replica.BlockSize)})
	}
	byID := map[string]*agentProgram{}
	for _, p := range a.progs {
		if p.step == 0 && !p.reasoning && (!p.held || !p.paused) {
			// No pod knows it yet: its first request has not been sent, or
			// waits client-side for a slot under ProgramCap.
			continue
		}
		byID[p.id] = p
		pr := placement.Program{
			ID: p.id, ContextTokens: p.reported, Steps: p.step + 1,
			LastTransition: a.start.Add(p.lastTrans), HasHeldRequest: p.held, MarkedForPause: p.marked,
			RunningSince: a.start.Add(p.runSince),
			Status:       placement.StatusActing, State: placement.StateActive,
		}
		if p.reasoning {
			pr.Status = placement.StatusReasoning
		}
		switch {
		case p.paused:
			pr.State, pr.PausedSince = placement.StatePaused, a.start.Add(p.pausedAt)
			if p.lastPod >= 0 {
				pr.CachedOn = a.pods[p.lastPod].name
			}
		case p.pod >= 0:
			pr.Pod = a.pods[p.pod].name
		}
		snap.Programs = append(snap.Programs, pr)
	}
	return snap, byID
}

// leastPrograms is Default mode's pod for a new program: the one with the
// fewest programs; false when that pod is at ProgramCap.
func (a *agentSim) leastPrograms() (int, bool) {
	counts := make([]int, len(a.pods))
	for _, p := range a.progs {
		if p.pod >= 0 {
			counts[p.pod]++
		}
	}
	best := 0
	for i, c := range counts {
		if c < counts[best] {
			best = i
		}
	}
	return best, a.s.ProgramCap <= 0 || counts[best] < a.s.ProgramCap
}

// serviceNext is the pod the Service in front of the pool hands the next
// request to: round robin.
func (a *agentSim) serviceNext() int {
	a.rr++
	return a.rr % len(a.pods)
}

// gateNew is the runtime's gate (programs.Table.Route) for a new program in
// ProgramAware mode, with the pod's own view of sizes (the programs'
// reported contexts; the new one is not tokenized yet): the pod the Service
// picked runs it if it has room for a program's buffer and holds no
// request; else it goes to the other pod with the most room in the last
// round's placement, if that is at least a buffer; else the picked pod
// holds it (-1, and the holding pod) until a round places it.
func (a *agentSim) gateNew() (pod, holder int) {
	first := a.serviceNext()
	buffer := a.s.Policy.BufferTokensPerProgram
	room, held := a.capTok, 0
	for _, p := range a.progs {
		if p.pod == first && !p.paused && !p.released {
			room -= p.reported + buffer
		}
		if p.held && p.heldAt == first {
			held++
		}
	}
	if room >= buffer && held == 0 {
		return first, -1
	}
	best, most := -1, buffer-1
	for i, r := range a.room {
		if i != first && r > most {
			best, most = i, r
		}
	}
	if best >= 0 {
		return best, -1
	}
	return -1, first
}
