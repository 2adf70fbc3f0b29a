package simulator

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kvpilot/kvpilot/internal/fleet"
	"github.com/kvpilot/kvpilot/internal/runtime/control"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// retryBackoff is how long a client waits before sending again a request
// that failed because its pod left the pool.
const retryBackoff = time.Second

// agentPod is one runtime pod: its engine on the sim executor (with its own
// virtual clock, which runs ahead of the pool's by at most one iteration)
// and its program table, wired as cmd/runtime wires them.
type agentPod struct {
	// name is the pod's name, addr its API and control address.
	name, addr string
	eng        *engine.Engine
	clk        *clock.Virtual
	x          *sim.Executor
	table      *programs.Table
	live       []*agentProgram // programs with a request in its engine
	// draining: the Service no longer sends it requests; gone: it left.
	draining, gone bool
	// lastBusy is when its last iteration ended.
	lastBusy time.Duration
	// nic is its node's network link (AgentSetup.NICBandwidth), nil when
	// transfers are not charged.
	nic *sim.NetLink
	// stateTokens is what a hybrid model's recurrent state costs in KV
	// tokens (wire.KVReport.StateTokens); 0 for other models.
	stateTokens int64
}

// Now is the pool's virtual time: the clock of the program tables (the
// engines keep their own, see agentPod).
func (a *agentSim) Now() time.Time { return a.start.Add(a.now) }

func (a *agentSim) newPod(i int, links []*sim.HostLink) (*agentPod, error) {
	r, host := a.s.Replica, a.s.HostBlocks
	if len(a.s.Profiles) > 0 {
		r.Accelerator, host = a.s.Profiles[i].Accelerator, a.s.Profiles[i].HostBlocks
	}
	x, clk, blocks, err := r.buildWith(nil, links) // lengths come from the workload
	if err != nil {
		return nil, err
	}
	a.vocab = x.Vocabulary()
	if a.s.DeviceBlocks > 0 {
		blocks = a.s.DeviceBlocks
	}
	if a.s.HostAsDevice {
		blocks, host = blocks+host, 0
	}
	// A hybrid model's host tier keeps state checkpoints beside blocks,
	// as the runtime splits it.
	geo := x.Geometry()
	host, hostStates := kvcache.SplitHostTier(host, geo.KV().BytesPerBlock(r.BlockSize), geo.StateBytes())
	eng, err := engine.New(engine.Config{
		MaxNumSeqs: r.MaxNumSeqs, MaxNumBatchedTokens: r.MaxNumBatchedTokens,
		MaxQueue: 1 << 20, MaxModelLen: r.MaxModelLen, VocabSize: x.Vocabulary().Size(),
		KV: kvcache.Config{NumBlocks: blocks, BlockSize: r.BlockSize, EnablePrefixCache: true, HostBlocks: host,
			DropEvicted: a.s.HostDropEvicted},
		EOS: []int32{x.EOS()}, Decoder: x.Vocabulary(), Clock: clk, SerialCopies: a.s.SerialCopies,
		StateCheckpoints: a.s.StateCheckpoints, HostStateSlots: hostStates,
	}, x)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("pod-%d", i)
	pd := &agentPod{name: name, addr: name + ":8000", eng: eng, clk: clk, x: x}
	var bytesPerToken int64
	if f, ok := eng.BlockFormat(); ok {
		bytesPerToken = f.Geometry.BytesPerToken()
	}
	// What one running program's state costs in KV tokens
	// (wire.KVReport.StateTokens), as the runtime reports it.
	stateTokens := kvcache.StateTokens(geo.StateBytes(), geo.KV().BytesPerBlock(r.BlockSize), r.BlockSize)
	pd.stateTokens = stateTokens
	pd.table = programs.New(programs.Config{
		Pod: name, Addr: pd.addr, Clock: a, Logger: discardLogger,
		KV: func() wire.KVReport {
			st := eng.KVStats()
			return wire.KVReport{BlockSize: eng.BlockSize(), TotalBlocks: st.Total, UsedBlocks: st.Used, CachedBlocks: st.Cached,
				HostTotalBlocks: st.HostTotal, HostUsedBlocks: st.HostUsed, BytesPerToken: bytesPerToken, MaxModelLen: r.MaxModelLen,
				StateTokens: stateTokens}
		},
		FetchKV: func(_ context.Context, id, addr string, done func()) { a.fetchKV(pd, id, addr, done) },
		Offload: func(salt string, tokens []int32) {
			if host == 0 && a.s.PauseKeepsLRU {
				return
			}
			eng.OffloadSaltedPrefix(salt, tokens)
		},
		Restore: func(salt string, tokens []int32) { eng.RestoreSaltedPrefix(salt, tokens) },
	})
	return pd, nil
}

// simPodClient is the fleet loop's control API client, in process: a
// state read and a placement push (control.Apply, as the control API's
// handler applies it), without HTTP. A pod's API address is also its
// control address.
type simPodClient struct{ a *agentSim }

var _ fleet.PodClient = simPodClient{}

func (c simPodClient) pod(addr string) (*agentPod, error) {
	i, ok := c.a.byAddr[addr]
	if !ok || c.a.pods[i].gone {
		return nil, fmt.Errorf("pod %s is not in the pool", addr)
	}
	return c.a.pods[i], nil
}

func (c simPodClient) State(ctx context.Context, addr string) (*wire.Report, error) {
	pd, err := c.pod(addr)
	if err != nil {
		return nil, err
	}
	r := pd.table.Report()
	return &r, nil
}

func (c simPodClient) Push(ctx context.Context, addr string, p *wire.Placement) (*wire.PlacementResult, error) {
	pd, err := c.pod(addr)
	if err != nil {
		return nil, err
	}
	return control.Apply(pd.table, p)
}

// dispatch sends p's request to pod i (forwarded: another pod's gate sent
// it) and carries it through that pod's gate as the runtime's server does.
func (a *agentSim) dispatch(p *agentProgram, i int, forwarded bool) error {
	pd := a.pods[i]
	if pd.gone {
		// The pod left the pool: the request fails (the forwarding pod
		// answers 502, or the connection is refused).
		a.retryLater(p, retryBackoff)
		return nil
	}
	g := pd.table.Gate("", p.id, forwarded)
	return a.follow(p, i, g, g.Route())
}

// follow does what the gate of pod i said for p's request (rt, a Route
// of g), as the server's transport does: run it there, forward it once,
// refuse it, or keep it held until its wait ends (wakeHeld) or the pod
// drains (the server's Await sees a drain at once; so does this).
func (a *agentSim) follow(p *agentProgram, i int, g programs.Gate, rt programs.Route) error {
	pd := a.pods[i]
	switch rt.Kind {
	case programs.Local:
		p.ticket = rt.Ticket
		return a.submit(p, i)
	case programs.Forward:
		j, ok := a.byAddr[rt.Addr]
		if !ok {
			// The server forwards to any address; its client gets a 502
			// and retries. A pool whose pods name unknown ones is a bug
			// of the simulation.
			return fmt.Errorf("program %s: %s forwards to unknown pod %q", p.id, pd.name, rt.Addr)
		}
		return a.dispatch(p, j, true)
	case programs.Limited:
		a.retryLater(p, rt.RetryAfter)
		return nil
	case programs.Unavailable:
		a.retryLater(p, retryBackoff)
		return nil
	}
	if pd.draining {
		return a.follow(p, i, g, g.Drain())
	}
	p.held, p.heldAt, p.gate, p.wait = true, i, g, rt.Wait
	a.held = append(a.held, p)
	return nil
}

// retryLater is the client's answer to a failed request (a 503 from a
// draining pod, a pod gone, a 429 for its key's program limit): it sends
// it again through the Service once after has passed, by when the fleet
// loop has placed its program elsewhere. The step's latency runs on.
func (a *agentSim) retryLater(p *agentProgram, after time.Duration) {
	p.retry, p.readyAt = true, a.now+after
	heap.Push(&a.ready, p)
}

// unheld takes p off the held list's bookkeeping: its gate says what the
// request does next.
func (p *agentProgram) unheld() programs.Gate {
	g := p.gate
	p.held, p.wait, p.gate = false, nil, programs.Gate{}
	return g
}

// submit starts p's step on pod i's engine, as the server does once the
// gate says Local.
func (a *agentSim) submit(p *agentProgram, i int) error {
	if a.measuring() {
		a.res.MaxWait = max(a.res.MaxWait, a.now-p.issuedAt)
	}
	p.submittedAt = a.now
	pd := a.pods[i]
	pd.clk.Set(a.Now()) // an idle pod wakes now; a busy one at its next step
	out := p.shape.Output.Sample(p.rng.Uint64())
	st, err := pd.eng.Submit(context.Background(), &engine.Request{
		ID: p.id, ProgramID: p.id, Prompt: p.tokens,
		Params: engine.Params{MaxTokens: min(out, a.s.Replica.MaxModelLen-len(p.tokens)), IgnoreEOS: true},
	})
	if err != nil {
		return fmt.Errorf("program %s step %d on %s: %w", p.id, p.step, pd.name, err)
	}
	pd.table.Started(p.ticket, int64(len(p.tokens)), "")
	p.stream, p.promptLen, p.running, p.pod, p.firstSeen = st, len(p.tokens), true, i, false
	pd.live = append(pd.live, p)
	return nil
}

// collect drains the pod's streams after an iteration.
func (a *agentSim) collect(podIdx int) error {
	pd := a.pods[podIdx]
	done, cancel := context.WithCancel(context.Background())
	cancel()
	at := pd.clk.Now().Sub(a.start)
	j := 0
	var finished []*agentProgram
	var chunks []engine.Chunk
	for _, p := range pd.live {
		fin := false
		for {
			c, err := p.stream.Next(done)
			if err != nil {
				break
			}
			p.tokens = append(p.tokens, c.TokenIDs...)
			if len(c.TokenIDs) > 0 && !p.firstSeen {
				p.firstSeen = true
				if p.step > 0 && a.measuring() {
					a.res.LaterTTFT = append(a.res.LaterTTFT, at-p.issuedAt)
					a.res.LaterEngineTTFT = append(a.res.LaterEngineTTFT, at-p.submittedAt)
				}
			}
			if c.Done {
				fin = true
				finished, chunks = append(finished, p), append(chunks, c)
				break
			}
		}
		if !fin {
			pd.live[j] = p
			j++
		}
	}
	clear(pd.live[j:])
	pd.live = pd.live[:j]
	for k, p := range finished {
		if err := a.finishStep(p, chunks[k], at, pd); err != nil {
			return err
		}
	}
	return nil
}

// wakeHeld asks the gates again for every held request whose wait ended
// (a placement, a timer or a release changed its program's routing), as
// the server's Await does (programs.Gate.Woken).
func (a *agentSim) wakeHeld() error {
	old := a.held
	a.held = nil
	for _, p := range old {
		select {
		case <-p.wait:
			g := p.unheld()
			if err := a.follow(p, p.heldAt, g, g.Woken()); err != nil {
				return err
			}
		default:
			a.held = append(a.held, p)
		}
	}
	return nil
}

// round is one round of the controller's fleet loop over the pods still in
// the pool.
func (a *agentSim) round(ctx context.Context) error {
	pods := make([]fleet.Pod, 0, len(a.pods))
	for _, pd := range a.pods {
		if !pd.gone {
			pods = append(pods, fleet.Pod{Name: pd.name, APIAddr: pd.addr, ControlAddr: pd.addr,
				Ready: !pd.draining, Draining: pd.draining})
		}
	}
	sum, err := a.fleet.Round(ctx, pods, a.Now())
	if err != nil {
		return fmt.Errorf("fleet round at %v: %w", a.now, err)
	}
	a.res.Rounds++
	a.res.RoundTime += sum.Duration
	a.res.MaxRoundTime = max(a.res.MaxRoundTime, sum.Duration)
	if a.measuring() {
		a.res.Pauses += sum.Pauses
		a.res.Resumes += sum.Resumes
		a.res.Moves += sum.Moves
		a.res.FairnessPauses += sum.FairnessPauses
	}
	if a.onRound != nil {
		a.onRound(sum)
	}
	a.retireDrained()
	return a.wakeHeld()
}

// drain starts draining pod i: requests held there are answered at once
// (forwarded or retried), and the fleet loop moves its programs.
func (a *agentSim) drain(i int) error {
	pd := a.pods[i]
	pd.draining = true
	old := a.held
	a.held = nil
	for _, p := range old {
		if p.heldAt != i {
			a.held = append(a.held, p)
			continue
		}
		g := p.unheld()
		if err := a.follow(p, i, g, g.Drain()); err != nil {
			return err
		}
	}
	return nil
}

// retireDrained removes draining pods with nothing left running on them.
func (a *agentSim) retireDrained() {
	for _, pd := range a.pods {
		if !pd.draining || pd.gone || len(pd.live) > 0 {
			continue
		}
		busy := false
		for _, pr := range pd.table.Report().Programs {
			if pr.Placed && pr.State == placement.StateActive.String() || pr.HeldRequests > 0 || pr.InFlight > 0 {
				busy = true
				break
			}
		}
		pd.gone = !busy
	}
}

// releaseCall is the client's POST /programs/release through the Service,
// handled as the runtime's server handles it (programs.Table.ReleaseRouted):
// the pod that gets it ends the program, and tells the pod it is routed to.
func (a *agentSim) releaseCall(id string) {
	if _, addr := a.pods[a.serviceNext()].table.ReleaseRouted(id); addr != "" {
		if j, known := a.byAddr[addr]; known && !a.pods[j].gone {
			a.pods[j].table.Release(id)
		}
	}
}
