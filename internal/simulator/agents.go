package simulator

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/kvpilot/kvpilot/internal/fleet"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// AgentWorkload describes agent programs shaped like coding agents on
// SWE-bench: each step sends the whole conversation so far (the context
// grows by the last output plus a tool result), then acts (runs a tool) for
// a sampled time; a program runs many steps and is then released. Closed
// loop (the default), a new program takes a released one's place, so
// Programs are always live; OpenLoop, Programs start at once and none
// replaces them.
type AgentWorkload struct {
	Programs int
	MinSteps int
	MaxSteps int
	// StepsAlpha, if positive, draws a program's step count from a Pareto
	// distribution of that shape starting at MinSteps, capped at MaxSteps
	// (a few programs run far longer than most); else uniformly in
	// [MinSteps, MaxSteps].
	StepsAlpha     float64
	InitialContext sim.LogNormal // system prompt + task, tokens
	Output         sim.LogNormal // tokens per reasoning step
	ToolResult     sim.LogNormal // tokens a tool call adds
	ToolTime       sim.LogNormal // milliseconds per tool call
	// OpenLoop starts every program at t=0 and replaces none: the run
	// ends when the last one is released (its makespan).
	OpenLoop bool
	// Then, if set, is the shape of the programs created from ThenAt on
	// (a workload shift; its Programs and OpenLoop are ignored).
	Then   *AgentWorkload
	ThenAt time.Duration
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

// steps draws a program's step count.
func (w *AgentWorkload) steps(rng *rand.Rand) int {
	if w.StepsAlpha <= 0 {
		return w.MinSteps + rng.IntN(w.MaxSteps-w.MinSteps+1)
	}
	u := 1 - rng.Float64() // (0, 1]
	n := float64(w.MinSteps) * math.Pow(u, -1/w.StepsAlpha)
	return int(min(n, float64(w.MaxSteps)))
}

// PodProfile is one pod's hardware where a pool mixes them.
type PodProfile struct {
	// Accelerator is a sim profile name ("H100-SXM", "H200").
	Accelerator string
	// HostBlocks is the pod's host-memory KV tier in blocks (0: none).
	HostBlocks int
}

// AgentSetup is the simulated pool: one runtime pod per replica, each with
// the real engine on the sim executor and the real program table (the
// pod's gate), and the controller's real fleet loop placing programs every
// Interval. Requests reach a pod through a round-robin Service and go
// through its gate exactly as in the runtime's HTTP server: run, forward
// once, or hold until the program is resumed.
type AgentSetup struct {
	Replica  Setup
	Pods     int
	Policy   placement.Policy
	Interval time.Duration // controller round interval
	Warmup   time.Duration // not measured
	Window   time.Duration // measured (OpenLoop: the longest a run may take)
	Seed     uint64
	// WorkerCap, if positive, is what a user sets in front of a pool that
	// schedules nothing: the agent framework runs at most WorkerCap ×
	// Pods programs at once, and a new program waits, in arrival order,
	// until one is released. It is the hand-tuned baseline.
	WorkerCap int
	// HostBlocks is each pod's host-memory KV tier in blocks (0: none):
	// the engine copies blocks it evicts from the device there and back
	// on a hit (spill on eviction), and the gate offloads a paused
	// program's KV there. Profiles override it per pod.
	HostBlocks      int
	HostDropEvicted bool
	// Profiles, if set, gives each pod its accelerator and host tier (one
	// per pod, in pod order); else every pod is Replica.Accelerator with
	// HostBlocks.
	Profiles []PodProfile
	// Topology, if GPUsPerSwitch is set, makes pods (one GPU each, in pod
	// order) share host links: copies between the KV tiers are charged on
	// each pod's own link and on its switch's and node's (sim.HostLink).
	Topology HostTopology
	// PauseKeepsLRU, on a pod without a host tier, leaves a paused
	// program's cached blocks in LRU order instead of putting them first in
	// line for eviction (engine.OffloadPrefix): for comparisons.
	PauseKeepsLRU bool
	// SerialCopies runs every copy between the tiers before the iteration
	// (engine.Config.SerialCopies): for comparisons.
	SerialCopies bool
	// DeviceBlocks, if positive, replaces each pod's device KV capacity in
	// blocks, everything else unchanged: the step-time model still
	// charges the KV each batch reads. The oracle arm sets it beyond
	// anything a run can fill.
	DeviceBlocks int
	// HostAsDevice adds each pod's host tier to its device KV and removes
	// the tier: the pool's memory as if it were all device memory, with no
	// copies between tiers. For a ceiling, not a configuration.
	HostAsDevice bool
	// DrainAt, if positive, drains pod-0 then: the Service stops sending
	// it requests, the fleet loop moves its programs off it, and it leaves
	// the pool once nothing runs or waits there.
	DrainAt time.Duration
	// StateCheckpoints is which recurrent states the pods' engines keep
	// for prefix hits when the model is hybrid (engine.Config: the zero
	// value is CheckpointPrograms, the product's default).
	StateCheckpoints engine.CheckpointMode
	// NICBandwidth is each node's network bandwidth, bytes/s each way,
	// over which pods move programs' KV when the placement tells a pod to
	// fetch it (Policy.KVTransferBandwidth): a transfer takes its turn on
	// the sending node's link and the receiving one's (sim.NetLink), while
	// the program's request waits. Nodes are Topology.GPUsPerNode pods
	// (one a pod when unset). 0: transfers are not charged.
	NICBandwidth float64
}

// HostTopology is how the pool's GPUs reach host memory: GPUsPerSwitch
// GPUs behind a PCIe switch whose uplink carries SwitchBandwidth bytes/s
// each way, GPUsPerNode GPUs on a node whose host memory serves
// NodeBandwidth.
type HostTopology struct {
	GPUsPerSwitch   int
	SwitchBandwidth float64
	GPUsPerNode     int
	NodeBandwidth   float64
}

// links returns, for each of n GPUs, the shared links on its way to host
// memory.
func (t HostTopology) links(n int) [][]*sim.HostLink {
	out := make([][]*sim.HostLink, n)
	if t.GPUsPerSwitch <= 0 {
		return out
	}
	var sw, node *sim.HostLink
	for i := range out {
		if i%t.GPUsPerSwitch == 0 {
			sw = &sim.HostLink{Bandwidth: t.SwitchBandwidth}
		}
		if t.GPUsPerNode > 0 && i%t.GPUsPerNode == 0 {
			node = &sim.HostLink{Bandwidth: t.NodeBandwidth}
		}
		out[i] = append(out[i], sw)
		if node != nil {
			out[i] = append(out[i], node)
		}
	}
	return out
}

// AgentResult summarises one run.
type AgentResult struct {
	Steps int // program steps completed in the window
	// ThenSteps is the part of Steps taken by programs of the workload's
	// second shape (AgentWorkload.Then): what a workload shift changed of
	// the mix.
	ThenSteps int
	// SliceSteps counts Steps by SliceLength of the window, in order:
	// when in the window an arm gains or loses its steps.
	SliceSteps     []int
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
	// the window closes at its wait so far (Unfinished of them).
	StepLatency []time.Duration
	// LaterTTFT is, for every step but a program's first whose first
	// token came in the window, issue to first token (time held
	// included); LaterEngineTTFT is the same from when the step reached
	// an engine: what the engine's prefix and state caches decide.
	LaterTTFT, LaterEngineTTFT []time.Duration
	// StepWait is, for each of StepLatency in the same order, the part the
	// step waited before it reached an engine: held by a gate, or queued
	// for a worker under WorkerCap (what a pause or a cap adds to a step).
	StepWait   []time.Duration
	Unfinished int
	// Pauses, Resumes, Moves and FairnessPauses are the fleet loop's
	// counts (fleet.Summary) over the window's rounds.
	Pauses, Resumes, Moves, FairnessPauses int
	// KVFetches counts the programs whose KV a pod fetched from another
	// in the window, KVMovedBlocks the blocks that arrived, and KVMoveTime
	// the transfers' time on the network (summed).
	KVFetches     int
	KVMovedBlocks int64
	KVMoveTime    time.Duration
	// HeldAtEnd counts programs whose request was held (by a gate, or
	// waiting for a worker under WorkerCap) when the window closed;
	// MaxWait is the longest any step in the window waited before it
	// reached an engine, those still waiting counted at their wait so far.
	HeldAtEnd int
	MaxWait   time.Duration
	// OffloadedBlocks and RestoredBlocks count host-tier transfers,
	// SpilledBlocks the offloaded blocks that were device evictions;
	// EvictedBlocks counts every device eviction of cached contents in the
	// whole run, warm-up included.
	OffloadedBlocks, RestoredBlocks, SpilledBlocks int64
	EvictedBlocks                                  int64
	// ComputeTime and CopyTime are the pods' modelled time in the window
	// (summed over pods) running iterations and copying KV blocks between
	// the tiers; CopyStall is the part of CopyTime no iteration hid.
	ComputeTime, CopyTime, CopyStall time.Duration
	// Makespan (OpenLoop) is when the last program was released, 0 if
	// some were still live at the end of the window; TailIdle is the
	// pods' idle time between each pod's last iteration and the makespan,
	// summed over pods.
	Makespan, TailIdle time.Duration
	// Rounds is the number of fleet rounds run, RoundTime their total
	// and MaxRoundTime the longest wall-clock time (this machine's, not
	// virtual): the placement's own cost at this pool size.
	Rounds                  int
	RoundTime, MaxRoundTime time.Duration
	pods                    int
}

// SliceLength is the length of the window's slices in
// AgentResult.SliceSteps.
const SliceLength = 5 * time.Minute

// P is a step-latency percentile.
func (r *AgentResult) P(q float64) time.Duration {
	return (&Result{Latencies: r.StepLatency}).Percentile(q)
}

// agentProgram is one program as its client (the agent framework) runs it.
type agentProgram struct {
	id    string
	shape *AgentWorkload
	rng   *rand.Rand
	// tokens is the context so far; computed the tokens of it computed at
	// least once.
	tokens   []int32
	computed int
	step     int
	steps    int
	// started: past the worker cap (it counts against it until released).
	started  bool
	released bool
	// held: the request waits in gate (heldAt's) until wait closes;
	// queued: it waits for a worker under WorkerCap.
	held   bool
	queued bool
	heldAt int
	gate   programs.Gate
	wait   <-chan struct{}
	// ticket is the gate's for its request while it runs.
	ticket programs.Ticket
	// retry: the request failed to reach a pod (it left the pool) and is
	// sent again at readyAt.
	retry bool
	// running: the request is in pod's engine.
	running  bool
	pod      int
	stream   *engine.Stream
	issuedAt time.Duration
	// submittedAt is when the step reached an engine (issuedAt until it does).
	submittedAt time.Duration
	// firstSeen: the running step's first token has come.
	firstSeen bool
	readyAt   time.Duration // when the tool finishes
	promptLen int
	heapIdx   int
}

type agentSim struct {
	w      AgentWorkload
	s      AgentSetup
	vocab  *sim.Vocabulary
	pods   []*agentPod
	byName map[string]int // pod name → index in pods
	byAddr map[string]int // pod address → index in pods
	fleet  *fleet.Fleet
	// live are the programs not yet released, in creation order; ready
	// orders those acting (or not started) by when they send their next
	// request; held are those whose request waits on a gate, queued those
	// waiting for a worker (WorkerCap).
	live    []*agentProgram
	ready   readyHeap
	held    []*agentProgram
	queued  []*agentProgram
	workers int // programs started and not released
	now     time.Duration
	nextID  int
	rr      int // round-robin position of the Service in front of the pods
	res     *AgentResult
	start   time.Time
	// windowStats are the pods' KV statistics and executor busy times when
	// the window opened.
	windowStats []kvcache.Stats
	windowBusy  []sim.Busy
	// fetches are the KV transfers between pods under way, ending at
	// their at.
	fetches []pendingFetch
	// onEvent, if set, runs after every event; onRound after every fleet
	// round (tests check invariants).
	onEvent func()
	onRound func(*fleet.Summary)
}

// RunAgents simulates the pool in virtual time: real engines on the sim
// executor, real program tables as the pods' gates, and the real fleet
// loop every Interval.
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
	if len(s.Profiles) != 0 && len(s.Profiles) != s.Pods {
		return nil, fmt.Errorf("agent setup: %d pod profiles for %d pods", len(s.Profiles), s.Pods)
	}
	a := &agentSim{w: w, s: s, res: &AgentResult{pods: s.Pods}, start: time.Unix(0, 0),
		byName: map[string]int{}, byAddr: map[string]int{}}
	f, err := fleet.New(s.Policy, simPodClient{a}, discardLogger)
	if err != nil {
		return nil, err
	}
	a.fleet = f
	links := s.Topology.links(s.Pods)
	var nic *sim.NetLink
	for i := range s.Pods {
		pd, err := a.newPod(i, links[i])
		if err != nil {
			return nil, err
		}
		if per := max(s.Topology.GPUsPerNode, 1); i%per == 0 && s.NICBandwidth > 0 {
			nic = &sim.NetLink{Bandwidth: s.NICBandwidth}
		}
		pd.nic = nic
		a.byName[pd.name], a.byAddr[pd.addr] = i, i
		a.pods = append(a.pods, pd)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 99))
	for range w.Programs {
		at := time.Duration(0)
		if !w.OpenLoop {
			// Stagger starts over the first interval so programs are out
			// of phase.
			at = time.Duration(rng.Int64N(int64(10 * time.Second)))
		}
		a.newProgram(at)
	}
	return a, nil
}

func (a *agentSim) newProgram(at time.Duration) {
	a.nextID++
	shape := &a.w
	if a.w.Then != nil && at >= a.w.ThenAt {
		shape = a.w.Then
	}
	seed := a.s.Seed*1_000_003 + uint64(a.nextID)
	p := &agentProgram{
		id: fmt.Sprintf("prog-%05d", a.nextID), shape: shape,
		rng: rand.New(rand.NewPCG(seed, 7)), pod: -1, heldAt: -1, readyAt: at,
	}
	p.steps = shape.steps(p.rng)
	p.tokens = a.appendRandom(p, nil, shape.InitialContext.Sample(p.rng.Uint64()))
	a.live = append(a.live, p)
	heap.Push(&a.ready, p)
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

// Events of the loop, in the order they run when due at the same time.
const (
	evWindow = iota
	evDrain
	evRound
	evTick
	evReady
	evFetch
	evPod
)

// tickInterval is how often a runtime pod runs its program table's timers
// (cmd/runtime ticks every second).
const tickInterval = time.Second

func (a *agentSim) run() error {
	end := a.s.Warmup + a.s.Window
	nextRound, nextTick := a.s.Interval, tickInterval
	drainAt := a.s.DrainAt
	ctx := context.Background()
	for !(a.w.OpenLoop && len(a.live) == 0) {
		t, kind, podIdx := nextRound, evRound, -1
		due := func(at time.Duration, k int) {
			if at < t || (at == t && k < kind) {
				t, kind = at, k
			}
		}
		if a.windowStats == nil {
			due(a.s.Warmup, evWindow)
		}
		if drainAt > 0 {
			due(drainAt, evDrain)
		}
		due(nextTick, evTick)
		if len(a.ready) > 0 {
			due(a.ready[0].readyAt, evReady)
		}
		for _, f := range a.fetches {
			due(f.at, evFetch)
		}
		for i, pd := range a.pods {
			if run, wait := pd.eng.Pending(); run+wait > 0 {
				if c := pd.clk.Now().Sub(a.start); c < t {
					t, kind, podIdx = c, evPod, i
				}
			}
		}
		if t >= end {
			break
		}
		a.now = max(a.now, t)
		switch kind {
		case evPod:
			pd := a.pods[podIdx]
			r := pd.eng.Step(ctx)
			if r.Err != nil {
				return r.Err
			}
			pd.lastBusy = pd.clk.Now().Sub(a.start)
			if a.measuring() {
				a.res.Preemptions += r.Preempted
			}
			if err := a.collect(podIdx); err != nil {
				return err
			}
		case evReady:
			for len(a.ready) > 0 && a.ready[0].readyAt <= a.now {
				p := heap.Pop(&a.ready).(*agentProgram)
				if err := a.issue(p); err != nil {
					return err
				}
			}
		case evFetch:
			if err := a.fetchesLanded(); err != nil {
				return err
			}
		case evWindow:
			// Counters from here on are the window's: snapshot the caches'
			// so the warm-up's hits do not count.
			for _, pd := range a.pods {
				a.windowStats = append(a.windowStats, pd.eng.KVStats())
				a.windowBusy = append(a.windowBusy, pd.x.Busy())
			}
		case evDrain:
			drainAt = 0
			if err := a.drain(0); err != nil {
				return err
			}
		case evTick:
			for _, pd := range a.pods {
				if !pd.gone {
					pd.table.Tick()
				}
			}
			nextTick += tickInterval
			if err := a.wakeHeld(); err != nil {
				return err
			}
		case evRound:
			if err := a.round(ctx); err != nil {
				return err
			}
			nextRound += a.s.Interval
		}
		if a.onEvent != nil {
			a.onEvent()
		}
	}
	if a.w.OpenLoop && len(a.live) == 0 {
		end = a.now
		a.res.Makespan = end
		for _, pd := range a.pods {
			a.res.TailIdle += max(0, end-pd.lastBusy)
		}
	}
	a.closeWindow(end)
	return nil
}

// closeWindow counts the steps still unfinished at the end of the window
// at their wait so far, and the window's cache and busy statistics.
func (a *agentSim) closeWindow(end time.Duration) {
	for _, p := range a.live {
		if !p.running && !p.held && !p.queued {
			continue
		}
		wait := end - p.issuedAt
		a.res.StepLatency = append(a.res.StepLatency, wait)
		a.res.Unfinished++
		if p.running {
			a.res.StepWait = append(a.res.StepWait, p.submittedAt-p.issuedAt)
		} else {
			a.res.StepWait = append(a.res.StepWait, wait)
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
	window := end - min(a.s.Warmup, end)
	if window > 0 {
		a.res.StepsPerMinute = float64(a.res.Steps) / window.Minutes()
	}
}

// issue is a program's next request at a.now, sent by its client.
func (a *agentSim) issue(p *agentProgram) error {
	if p.retry {
		p.retry = false
		return a.dispatch(p, a.serviceNext(), false)
	}
	if p.step > 0 {
		// The tool result joins the context.
		p.tokens = a.appendRandom(p, p.tokens, p.shape.ToolResult.Sample(p.rng.Uint64()))
	}
	p.issuedAt = a.now
	if !p.started {
		if a.s.WorkerCap > 0 && a.workers >= a.s.WorkerCap*a.s.Pods {
			p.queued = true
			a.queued = append(a.queued, p)
			return nil
		}
		p.started = true
		a.workers++
	}
	return a.dispatch(p, a.serviceNext(), false)
}

// finishStep records a completed step: the pod's table learns the
// program's new context (as the runtime's server tells it), and the client
// runs the tool, or releases the program after its last step.
func (a *agentSim) finishStep(p *agentProgram, c engine.Chunk, at time.Duration, pd *agentPod) error {
	fresh := int64(max(0, p.promptLen-p.computed))
	computed := int64(c.Usage.PromptTokens - c.Usage.CachedTokens)
	if a.measuring() {
		a.res.Steps++
		if k := int((a.now - a.s.Warmup) / SliceLength); k >= 0 {
			for len(a.res.SliceSteps) <= k {
				a.res.SliceSteps = append(a.res.SliceSteps, 0)
			}
			a.res.SliceSteps[k]++
		}
		if a.w.Then != nil && p.shape == a.w.Then {
			a.res.ThenSteps++
		}
		a.res.StepLatency = append(a.res.StepLatency, at-p.issuedAt)
		a.res.StepWait = append(a.res.StepWait, p.submittedAt-p.issuedAt)
		a.res.FreshTokens += fresh
		a.res.RecomputedTokens += max(0, computed-fresh)
	}
	pd.table.End(p.ticket, int64(c.Usage.PromptTokens+c.Usage.CompletionTokens), int64(c.Usage.SharedTokens), p.tokens)
	p.ticket = programs.Ticket{}
	p.computed = len(p.tokens) - 1 // the last output token is computed by the next step
	p.running, p.stream, p.pod = false, nil, -1
	p.step++
	if p.step >= p.steps || len(p.tokens)+p.shape.ToolResult.Max+p.shape.Output.Max >= a.s.Replica.MaxModelLen {
		// Done, or its context is full.
		return a.release(p, at)
	}
	p.readyAt = at + time.Duration(p.shape.ToolTime.Sample(p.rng.Uint64()))*time.Millisecond
	heap.Push(&a.ready, p)
	return nil
}

// release ends p as its client does: a release call through the Service
// (POST /programs/release), then, closed loop, a new program in its place
// and, under WorkerCap, the longest-queued program starts.
func (a *agentSim) release(p *agentProgram, at time.Duration) error {
	p.released = true
	a.releaseCall(p.id)
	a.workers--
	for i, q := range a.live {
		if q == p {
			a.live = append(a.live[:i], a.live[i+1:]...)
			break
		}
	}
	if !a.w.OpenLoop {
		a.newProgram(at)
	}
	if len(a.queued) > 0 && (a.s.WorkerCap <= 0 || a.workers < a.s.WorkerCap*a.s.Pods) {
		q := a.queued[0]
		a.queued = a.queued[1:]
		q.queued, q.started = false, true
		a.workers++
		if err := a.dispatch(q, a.serviceNext(), false); err != nil {
			return err
		}
	}
	return a.wakeHeld() // a release may admit programs waiting for room
}

// serviceNext is the pod the Service in front of the pool hands the next
// request to: round robin over the pods still serving.
func (a *agentSim) serviceNext() int {
	for range a.pods {
		a.rr++
		if pd := a.pods[a.rr%len(a.pods)]; !pd.draining && !pd.gone {
			return a.rr % len(a.pods)
		}
	}
	return a.rr % len(a.pods)
}

// readyHeap orders programs by the time of their next request.
type readyHeap []*agentProgram

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if h[i].readyAt != h[j].readyAt {
		return h[i].readyAt < h[j].readyAt
	}
	return h[i].id < h[j].id
}
func (h readyHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *readyHeap) Push(x any) {
	p := x.(*agentProgram)
	p.heapIdx = len(*h)
	*h = append(*h, p)
}
func (h *readyHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.heapIdx = -1
	return p
}
