// Package programs is the runtime pod's program table and gate: it tracks
// the agent programs whose requests reach this pod, decides per request
// whether it runs here, is forwarded to the pod the program is placed on,
// or is held while the program is paused, and applies the placements the
// controller pushes. It is plain Go: the HTTP server and the control API
// wrap it.
package programs

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// Defaults for Config.
const (
	DefaultIdleTimeout = 10 * time.Minute
	DefaultMaxPause    = placement.DefaultMaxPauseDuration
	DefaultBuffer      = placement.DefaultBufferTokensPerProgram
	// DefaultFetchTimeout bounds a KV fetch from another pod: a 30k-token
	// context of Llama-3-8B is 4 GB, 0.1 s at 2×200 Gb/s and 3 s at 10
	// Gb/s; past the bound, recomputing is the faster way.
	DefaultFetchTimeout = 30 * time.Second
)

// Config configures a Table.
type Config struct {
	// Pod is this pod's name, as reported.
	Pod string
	// Addr is this pod's API address (host:port) as the controller's
	// placements name it.
	Addr string
	// KV reads the engine's KV cache size and use.
	KV func() wire.KVReport
	// Offload moves a paused program's cached KV blocks (its context,
	// cached under its last request's cache salt) out of the way of the
	// programs that run: to the host tier when the engine has one, else to
	// the front of the eviction order (engine.OffloadSaltedPrefix).
	Offload func(cacheSalt string, tokens []int32)
	// Restore brings a resumed program's offloaded KV blocks back to the
	// device ahead of its next request (engine.RestoreSaltedPrefix).
	Restore func(cacheSalt string, tokens []int32)
	// FetchKV starts fetching program id's KV from the pod whose control
	// API is at controlAddr (control.KVTransfer.Fetch), for a placement's
	// Fetch, and returns at once; it calls done once the fetch has ended,
	// whichever way (done may run before FetchKV returns). The program's
	// requests are held until then, and then run, recomputing what did not
	// arrive. ctx ends at FetchTimeout: the fetch must stop (and call done)
	// by then. nil: placements' Fetch is ignored and the programs
	// recompute.
	FetchKV func(ctx context.Context, id, controlAddr string, done func())
	// FetchTimeout bounds one FetchKV (default DefaultFetchTimeout).
	FetchTimeout time.Duration
	// IdleTimeout ends a program that has been ACTING this long with no
	// request (default 10 min).
	IdleTimeout time.Duration
	// MaxPause bounds how long a request is held before the pod
	// force-resumes its program (default 30 min; the controller's
	// placements override it with the policy's value).
	MaxPause time.Duration
	// Buffer is the per-program headroom in tokens (default 100).
	Buffer int64
	// MaxProgramsPerOwner bounds the live programs one owner (API key) has
	// on this pod: a request that would start one more is refused (Route
	// kind Limited) until one of them ends. 0: no bound.
	MaxProgramsPerOwner int
	Clock               clock.Clock
	Logger              *slog.Logger
}

// RouteKind is the gate's verdict for one request.
type RouteKind uint8

const (
	// Local: run the request on this pod's engine.
	Local RouteKind = iota
	// Forward: send it once to Route.Addr.
	Forward
	// Hold: wait on Route.Wait, then ask again (the program is paused).
	Hold
	// Limited: refused, the owner has MaxProgramsPerOwner live programs
	// here; Route.RetryAfter says when the first of them idles out.
	Limited
	// Unavailable: refused for now, the pod is draining and the held
	// request has nowhere to go; a retry reaches a pod that stays (only
	// Gate.Drain says it).
	Unavailable
)

func (k RouteKind) String() string {
	switch k {
	case Local:
		return "local"
	case Forward:
		return "forward"
	case Limited:
		return "limited"
	case Unavailable:
		return "unavailable"
	}
	return "hold"
}

// Route is where one request goes.
type Route struct {
	Kind RouteKind
	// Addr is the API address of the pod to forward to (Forward only).
	Addr string
	// Wait is closed when the program's routing changes (Hold only).
	Wait <-chan struct{}
	// RetryAfter is when a retry may find room under the owner's limit
	// (Limited only).
	RetryAfter time.Duration
	// Ticket is the request's hold on its program (Local and Hold): pass
	// it to Started and End or Abandon (Local), or to Unhold (Hold).
	Ticket Ticket
}

// Ticket ties one request to the program entry it was counted on. A
// released id that comes back is a new program with a new entry while the
// old one's requests may still run; their Started, End, Abandon and Unhold
// apply to the old entry (gone from the table, or TERMINATED), never to
// the new one. The zero Ticket applies to nothing.
type Ticket struct{ e *entry }

// kvContext is a program's context as the KV cache holds it.
type kvContext struct {
	salt   string
	tokens []int32
}

type entry struct {
	id     string
	owner  Owner
	placed bool // runs here: its KV cache is on this pod
	state  placement.State
	status placement.Status
	marked bool

	contextTokens, sharedTokens int64
	tokens                      []int32 // the last context, for Offload and Restore
	salt                        string  // its cache salt
	nextSalt                    string  // the salt of the request in flight
	steps                       int
	lastTransition              time.Time
	pausedSince                 time.Time
	runningSince                time.Time // last placed or resumed here
	inflight, held              int
	wake                        chan struct{}
	// reported: a Report listed it TERMINATED; terminatedAt: when it
	// ended. Tick deletes a TERMINATED entry once reported (see
	// terminatedRetention).
	reported     bool
	terminatedAt time.Time
	// waitingRoom: a new program held because no pod had room; it runs
	// here as soon as this pod has room again (see admitWaitingLocked).
	waitingRoom bool
	// fetching: its KV is being fetched from another pod (Config.FetchKV);
	// its requests wait for it.
	fetching bool
	// byPlacement: a placement's Place created it (MaxPlacedEntries).
	byPlacement bool
}

// Table is the pod's program table. It is safe for concurrent use.
type Table struct {
	cfg Config

	mu      sync.Mutex
	progs   map[string]*entry
	version int64
	routes  map[string]string // program → pod address, for programs placed elsewhere
	room    map[string]int64  // pod address → remaining tokens; "" is this pod
	nHeld   int
	// mode is the placement mode of the controller's last placement, ""
	// before the first one.
	mode placement.Mode
	// capacity is the gate's capacity model (capacity.go).
	capacity capacityState
	// moved keeps the contexts of programs that moved away (kv_move.go).
	moved movedContexts
	// polled: a Report was taken (a controller polls the control API), so
	// programs that end wait for a report before their entries go.
	polled bool
}

// terminatedRetention bounds how long a TERMINATED entry waits to be
// reported once a controller has polled: twelve rounds at the fleet
// loop's default interval. A controller that stops polling must not make
// ended programs pile up; one back later than this misses those ends, and
// the pods where such a program still runs end it when it idles out.
const terminatedRetention = time.Minute

// New builds an empty table.
func New(cfg Config) *Table {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxPause <= 0 {
		cfg.MaxPause = DefaultMaxPause
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.Offload == nil {
		cfg.Offload = func(string, []int32) {}
	}
	if cfg.Restore == nil {
		cfg.Restore = func(string, []int32) {}
	}
	return &Table{cfg: cfg, progs: map[string]*entry{}, routes: map[string]string{}, room: map[string]int64{}}
}

// Route is RouteFor for the owner "" (a pod that requires no API key).
func (t *Table) Route(id string, forwarded bool) Route { return t.RouteFor("", id, forwarded) }

// RouteFor decides where a request of program id goes; id is the table's
// (owner.Scope of the client's), owner the API key's that sent it. forwarded
// marks a request another pod already forwarded: it is never forwarded
// again. A Local route counts the request in flight: call End (or Abandon)
// with its Ticket when it finishes. A Hold route counts it held: when Wait
// closes, call RouteFor again (after Unhold with its Ticket), or Unhold if
// the client gives up. A Limited route counts nothing.
//
// A held request asks again as not forwarded, even if it came forwarded:
// its Wait closed because this table's routing of the program changed (a
// placement resumed or moved it, a release, a KV fetch ending, the pause
// limit), so this table's view is now newer than the sender's was. Asked
// as forwarded, a request held where its program's cache was paused would
// run there after a placement moved the program to another pod, placing
// it on both.
func (t *Table) RouteFor(owner Owner, id string, forwarded bool) Route {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Clock.Now()
	e := t.progs[id]
	if e != nil && e.state == placement.StateTerminated {
		// A released id that comes back is a new program. Requests still
		// in flight or held on the old entry keep it through their
		// Tickets.
		delete(t.progs, id)
		e = nil
	}
	if e == nil {
		addr, known := t.routes[id]
		// limited refuses a program new to this pod when it would be one
		// more of its owner's than the limit.
		limited := func() (Route, bool) {
			wait, full := t.ownerFullLocked(owner, now)
			return Route{Kind: Limited, RetryAfter: wait}, full
		}
		switch {
		case forwarded:
		case known && addr == "":
			// Paused on another pod: hold it here until it is resumed.
			e = t.newEntry(id, owner, now)
			e.state, e.pausedSince = placement.StatePaused, now
			return t.holdLocked(e)
		case known:
			return Route{Kind: Forward, Addr: addr}
		case t.localRoomLocked() >= t.cfg.Buffer && t.nHeld == 0:
		default:
			if best := t.mostRoomLocked(); best != "" {
				return Route{Kind: Forward, Addr: best}
			}
			if t.mayHoldLocked() {
				if r, full := limited(); full {
					return r
				}
				// Nowhere has room: hold it as a new paused program until
				// a placement resumes it or room frees here.
				e = t.newEntry(id, owner, now)
				e.state, e.pausedSince, e.waitingRoom = placement.StatePaused, now, true
				return t.holdLocked(e)
			}
			// No controller schedules programs (or it runs in Default
			// mode): nothing would ever resume a held program but the
			// pause limit, so run it here; the engine queues what does
			// not fit yet.
		}
		if r, full := limited(); full {
			return r
		}
		e = t.newEntry(id, owner, now)
		e.placed, e.runningSince = true, now
	}
	switch {
	case e.fetching && e.placed && e.state == placement.StateActive:
		// Its KV is on its way from another pod: running now would
		// recompute it. Held without a pause: the fetch is bounded.
		e.held++
		t.nHeld++
		return Route{Kind: Hold, Wait: e.wake, Ticket: Ticket{e}}
	case e.state == placement.StatePaused:
		if forwarded && !e.placed {
			break // the sender resumed it here; our view is stale
		}
		return t.holdLocked(e)
	case !e.placed:
		if addr, ok := t.routes[id]; ok && addr != "" && !forwarded {
			return Route{Kind: Forward, Addr: addr}
		}
		e.placed, e.runningSince = true, now
	}
	e.state = placement.StateActive
	if e.inflight == 0 {
		e.status = placement.StatusReasoning
		e.lastTransition = now
	}
	e.inflight++
	e.steps++
	return Route{Kind: Local, Ticket: Ticket{e}}
}

// ownerFullLocked reports whether owner has MaxProgramsPerOwner live
// programs on this pod (placed here, or waiting for room here), and if so
// how long until the first of its idle ones ends (at least a second; the
// idle timeout when all of them run).
func (t *Table) ownerFullLocked(owner Owner, now time.Time) (time.Duration, bool) {
	limit := t.cfg.MaxProgramsPerOwner
	if limit <= 0 {
		return 0, false
	}
	live, wait := 0, t.cfg.IdleTimeout
	for _, e := range t.progs {
		if e.owner != owner || e.state == placement.StateTerminated || !(e.placed || e.waitingRoom) {
			continue
		}
		live++
		if e.status == placement.StatusActing && e.inflight == 0 && e.held == 0 {
			wait = min(wait, e.lastTransition.Add(t.cfg.IdleTimeout).Sub(now))
		}
	}
	return max(wait, time.Second), live >= limit
}

// mayHoldLocked reports whether the gate may hold a new program for want of
// room: only once a controller has sent a placement, and not in Default
// mode, which never pauses.
func (t *Table) mayHoldLocked() bool {
	return t.version > 0 && t.mode != placement.ModeDefault
}

// admitWaitingLocked lets new programs held for want of room run here,
// longest-waiting first, while this pod has room for a program's buffer: a
// program ending or released must not leave them waiting for the next
// placement (or, without one, the pause limit).
func (t *Table) admitWaitingLocked() {
	for t.localRoomLocked() >= t.cfg.Buffer {
		var next *entry
		for _, e := range t.progs {
			if e.waitingRoom && e.held > 0 && e.state == placement.StatePaused &&
				(next == nil || e.pausedSince.Before(next.pausedSince) || (e.pausedSince.Equal(next.pausedSince) && e.id < next.id)) {
				next = e
			}
		}
		if next == nil {
			return
		}
		next.waitingRoom, next.placed, next.runningSince = false, true, t.cfg.Clock.Now()
		next.state, next.pausedSince = placement.StateActive, time.Time{}
		t.wakeLocked(next)
	}
}

// newEntry adds program id of owner. Entries the controller creates (a
// placement naming a program new here) take the owner from the id.
func (t *Table) newEntry(id string, owner Owner, now time.Time) *entry {
	e := &entry{id: id, owner: owner, state: placement.StateActive, status: placement.StatusActing, lastTransition: now, wake: make(chan struct{})}
	t.progs[id] = e
	return e
}

func (t *Table) holdLocked(e *entry) Route {
	e.held++
	t.nHeld++
	if e.pausedSince.IsZero() {
		e.pausedSince = t.cfg.Clock.Now()
	}
	return Route{Kind: Hold, Wait: e.wake, Ticket: Ticket{e}}
}

// Unhold takes back the held request of tk (its wait ended: the client
// went away, or it is about to ask Route again).
func (t *Table) Unhold(tk Ticket) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := tk.e; e != nil && e.held > 0 {
		e.held--
		t.nHeld--
		if e.held == 0 && !e.placed && e.inflight == 0 && e.state != placement.StatePaused && t.progs[e.id] == e {
			delete(t.progs, e.id)
		}
	}
}

// End records that the Local request of tk finished with the program's
// context now contextTokens long (prompt + output; tokens are those ids,
// kept to offload the cache if the program is paused), sharedTokens
// of it shared with other programs through the prefix cache.
func (t *Table) End(tk Ticket, contextTokens, sharedTokens int64, tokens []int32) {
	t.end(tk, &stepResult{contextTokens, sharedTokens, tokens})
}

// stepResult is the program's context after a request (End's arguments).
type stepResult struct {
	contextTokens, sharedTokens int64
	tokens                      []int32
}

// end counts the Local request of tk finished; res is nil when it left the
// program's context as it was (Abandon).
func (t *Table) end(tk Ticket, res *stepResult) {
	t.mu.Lock()
	e := tk.e
	if e == nil || e.inflight == 0 {
		t.mu.Unlock()
		return
	}
	now := t.cfg.Clock.Now()
	e.inflight--
	if res != nil {
		e.contextTokens, e.sharedTokens = res.contextTokens, res.sharedTokens
		if e.state != placement.StateTerminated {
			// An ended program's context is never offloaded or moved.
			e.tokens = append(e.tokens[:0], res.tokens...)
		}
		e.salt = e.nextSalt
	}
	var pause *kvContext
	if e.inflight == 0 {
		e.status, e.lastTransition = placement.StatusActing, now
		if e.marked {
			e.marked = false
			e.state, e.pausedSince = placement.StatePaused, now
			pause = &kvContext{e.salt, e.tokens}
		}
	}
	t.mu.Unlock()
	if pause != nil {
		t.cfg.Offload(pause.salt, pause.tokens)
	}
}

// Started records the prompt length of the Local request of tk: while it
// runs, the program's context is at least its prompt, so capacity counts a
// REASONING program at its current size, not its last step's. cacheSalt is
// the request's (engine.Request.CacheSalt): the context End records is
// cached under it.
func (t *Table) Started(tk Ticket, promptTokens int64, cacheSalt string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := tk.e
	if e == nil || e.inflight == 0 {
		return
	}
	e.nextSalt = cacheSalt
	if promptTokens > e.contextTokens {
		e.contextTokens = promptTokens
	}
}

// Abandon records that the Local request of tk ended without a result
// (rejected, failed or cancelled): the program's context is unchanged.
func (t *Table) Abandon(tk Ticket) { t.end(tk, nil) }

// RouteOf returns the address of the pod program id runs on, if that is
// another pod.
func (t *Table) RouteOf(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	addr, ok := t.routes[id]
	return addr, ok && addr != ""
}

// ReleaseRouted is Release for POST /programs/release received on this
// pod, with the pod program id was routed to before it ("" when none):
// the pod that runs it, which whoever received the release tells too (the
// server, unless the release came forwarded). The route is read first,
// since releasing a program this pod only routes forgets its route.
func (t *Table) ReleaseRouted(id string) (released bool, routedTo string) {
	routedTo, _ = t.RouteOf(id)
	return t.Release(id), routedTo
}

// Release ends program id (POST /programs/release); false if unknown.
func (t *Table) Release(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.progs[id]
	if e == nil {
		if _, known := t.routes[id]; !known {
			return false
		}
		// It runs, or waits, on another pod: report it released so the
		// controller ends it there.
		e = t.newEntry(id, ownerOfID(id), t.cfg.Clock.Now())
		delete(t.routes, id)
	}
	t.terminateLocked(e, t.cfg.Clock.Now())
	t.wakeLocked(e)
	t.admitWaitingLocked()
	return true
}

// terminateLocked ends program e. Its context goes at once: a long-lived
// pod sees many programs end, and only the entry's bookkeeping is kept
// until the controller has seen the end (Tick).
func (t *Table) terminateLocked(e *entry, now time.Time) {
	if e.state != placement.StateTerminated {
		e.terminatedAt = now
	}
	e.state, e.marked = placement.StateTerminated, false
	e.tokens = nil
}

func (t *Table) wakeLocked(e *entry) {
	close(e.wake)
	e.wake = make(chan struct{})
}

// Apply is ApplyPlacement without its error: it reports whether the
// placement was applied.
func (t *Table) Apply(p *wire.Placement) bool {
	applied, _ := t.ApplyPlacement(p)
	return applied
}

// ApplyPlacement applies a placement and reports whether it was new: an
// old or repeated version changes nothing. A placement that would take the
// table past MaxPlacedEntries or MaxRoutes is refused whole with a
// *LimitError, changing nothing either.
func (t *Table) ApplyPlacement(p *wire.Placement) (bool, error) {
	t.mu.Lock()
	if p.Version <= t.version {
		t.mu.Unlock()
		return false, nil
	}
	if err := t.checkLimitsLocked(p); err != nil {
		t.mu.Unlock()
		return false, err
	}
	now := t.cfg.Clock.Now()
	t.version = p.Version
	if p.Mode != "" {
		t.mode = placement.Mode(p.Mode)
	}
	if p.MaxPauseSeconds > 0 {
		// Capped before converting: seconds beyond ~292 years overflow
		// time.Duration into a negative limit.
		t.cfg.MaxPause = time.Duration(min(p.MaxPauseSeconds, int64(MaxPauseLimit/time.Second))) * time.Second
	}
	if p.BufferTokensPerProgram > 0 {
		t.cfg.Buffer = p.BufferTokensPerProgram
	}
	t.applyCapacityLocked(p.Capacity)
	var offload, restore []kvContext
	var fetch []fetchJob
	for _, id := range p.Release {
		if e := t.progs[id]; e != nil {
			t.terminateLocked(e, now)
			t.wakeLocked(e)
		}
	}
	for _, id := range p.Pause {
		if e := t.progs[id]; e != nil && e.state == placement.StateActive {
			e.state, e.pausedSince, e.marked = placement.StatePaused, now, false
			if e.placed {
				offload = append(offload, kvContext{e.salt, e.tokens})
			}
		}
	}
	for _, id := range p.Mark {
		if e := t.progs[id]; e != nil && e.state == placement.StateActive {
			e.marked = true
		}
	}
	for _, id := range p.Unmark {
		if e := t.progs[id]; e != nil {
			e.marked = false
		}
	}
	if p.FullRoutes {
		t.routes = make(map[string]string, len(p.Routes))
	}
	for _, id := range p.Unroute {
		delete(t.routes, id)
	}
	for id, addr := range p.Routes {
		if addr == t.cfg.Addr {
			delete(t.routes, id)
			continue // placed here: Place covers it
		}
		t.routes[id] = addr
		e := t.progs[id]
		if e == nil || e.state == placement.StateTerminated {
			continue
		}
		if addr == "" {
			// Paused: a pod holding requests for it keeps holding; the
			// pod it was placed on got it in Pause.
			if !e.placed {
				e.state = placement.StatePaused
				if e.pausedSince.IsZero() {
					e.pausedSince = now
				}
			}
			continue
		}
		// Placed on another pod: its requests go there now.
		if e.placed {
			t.moved.put(id, kvContext{e.salt, e.tokens})
		}
		e.placed, e.marked, e.waitingRoom = false, false, false
		e.state, e.pausedSince = placement.StateActive, time.Time{}
		if e.held > 0 {
			t.wakeLocked(e)
		}
		if e.held == 0 && e.inflight == 0 {
			delete(t.progs, id)
		}
	}
	for _, id := range p.Place {
		e := t.progs[id]
		if e == nil {
			e = t.newEntry(id, ownerOfID(id), now)
			e.byPlacement = true
		}
		if addr := p.Fetch[id]; addr != "" && t.cfg.FetchKV != nil && !e.fetching {
			e.fetching = true
			fetch = append(fetch, fetchJob{id, addr})
		}
		if e.placed && e.state == placement.StatePaused && len(e.tokens) > 0 {
			// Resumed where its KV was offloaded: bring it back now, so the
			// copies run before its held request is admitted.
			restore = append(restore, kvContext{e.salt, e.tokens})
		}
		if !e.placed || e.state == placement.StatePaused {
			e.runningSince = now
		}
		e.placed, e.waitingRoom = true, false
		if e.state != placement.StateTerminated {
			e.state, e.pausedSince = placement.StateActive, time.Time{}
		}
		if e.held > 0 {
			t.wakeLocked(e)
		}
	}
	t.room = make(map[string]int64, len(p.Room))
	for addr, r := range p.Room {
		t.room[addr] = r
	}
	if len(p.Release) > 0 {
		t.admitWaitingLocked()
	}
	t.mu.Unlock()
	for _, c := range offload {
		t.cfg.Offload(c.salt, c.tokens)
	}
	for _, c := range restore {
		t.cfg.Restore(c.salt, c.tokens)
	}
	for _, f := range fetch {
		t.fetch(f)
	}
	return true, nil
}

// Tick runs the pod's own timers: programs idle past IdleTimeout end, and
// held requests of programs paused past MaxPause are force-resumed on the
// pod with the most room (this pod when it knows of none), so a missing
// controller never holds a request forever.
func (t *Table) Tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Clock.Now()
	defer t.admitWaitingLocked() // after idle programs ended
	for id, e := range t.progs {
		switch {
		case e.state == placement.StateTerminated:
			// Kept only for a controller to see the end: once reported,
			// at once when none reads reports, and for at most
			// terminatedRetention; else every id ever seen would stay.
			if e.held == 0 && (e.reported || !t.polled || now.Sub(e.terminatedAt) > terminatedRetention) {
				delete(t.progs, id)
			}
		case !e.placed && e.held == 0 && e.inflight == 0:
			// A holder whose clients all left: the pod running the program
			// (if any) reports it; nothing is held here any more.
			delete(t.progs, id)
		case e.state == placement.StatePaused && e.held > 0 && now.Sub(e.pausedSince) > t.cfg.MaxPause:
			t.cfg.Logger.Warn("force-resuming a program held past the pause limit",
				"program", id, "paused", now.Sub(e.pausedSince).Round(time.Second), "limit", t.cfg.MaxPause)
			if best := t.mostRoomLocked(); best != "" && !e.placed {
				t.routes[id] = best
				e.state, e.pausedSince = placement.StateActive, time.Time{}
			} else {
				e.placed, e.runningSince = true, now
				e.state, e.pausedSince = placement.StateActive, time.Time{}
			}
			t.wakeLocked(e)
		case e.state == placement.StateActive && e.status == placement.StatusActing && e.inflight == 0 &&
			e.held == 0 && now.Sub(e.lastTransition) > t.cfg.IdleTimeout:
			t.terminateLocked(e, now)
		}
	}
}

// Report snapshots the table for the controller.
func (t *Table) Report() wire.Report {
	kv := wire.KVReport{}
	if t.cfg.KV != nil {
		kv = t.cfg.KV()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.polled = true
	r := wire.Report{Pod: t.cfg.Pod, PlacementVersion: t.version, KV: kv, Programs: make([]wire.ProgramReport, 0, len(t.progs))}
	for _, e := range t.progs {
		status := e.status
		if e.state == placement.StateTerminated {
			e.reported = true
		}
		r.Programs = append(r.Programs, wire.ProgramReport{
			ID: e.id, Status: status.String(), State: e.state.String(), Placed: e.placed,
			MarkedForPause: e.marked, ContextTokens: e.contextTokens, SharedTokens: e.sharedTokens,
			Steps: e.steps, LastTransition: e.lastTransition, PausedSince: e.pausedSince, RunningSince: e.runningSince,
			HeldRequests: e.held, InFlight: e.inflight,
		})
	}
	sort.Slice(r.Programs, func(i, j int) bool { return r.Programs[i].ID < r.Programs[j].ID })
	return r
}

// MaxProgramsPerOwner is the configured limit (0: none).
func (t *Table) MaxProgramsPerOwner() int { return t.cfg.MaxProgramsPerOwner }

// Version is the last applied placement version.
func (t *Table) Version() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.version
}

// mostRoomLocked is the other pod with the most room for a new program in
// the last placement, or "".
func (t *Table) mostRoomLocked() string {
	best, most := "", t.cfg.Buffer-1
	for addr, r := range t.room {
		if addr != t.cfg.Addr && (r > most || (r == most && best != "" && addr < best)) {
			best, most = addr, r
		}
	}
	return best
}
