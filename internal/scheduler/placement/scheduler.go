package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Scheduler runs placement rounds under one Policy. It keeps only scratch
// memory between rounds, so that a round allocates nothing once the pool's
// size is steady; every decision depends on the snapshot alone. A Scheduler
// is not safe for concurrent use: the controller keeps one per pool and
// builds a new one when the pool's policy changes.
type Scheduler struct {
	policy Policy
	// model is the policy's CapacityModel.
	model CapacityModel

	pods     []podState
	podIndex map[string]int32
	progs    []progState
	seen     map[string]struct{}
	// members holds, grouped by pod, the programs placed on serving pods
	// before the round; members of pod i are members[start[i]:start[i+1]].
	members []int32
	start   []int32
	cands   []candidate
	dec     Decision
}

// podState is one pod during a round.
type podState struct {
	name  string
	total int64
	// host is the pod's host KV tier in tokens (Pod.HostTokens).
	host int64
	// podLoad is what the programs on the pod charge it: its used (the
	// undecayed charge of the programs on the pod, which the round's steps
	// keep up to date), marked, programs and the sums Capacity's formula
	// reads, as step 1 loads them.
	podLoad
	// resumeUsed is used with ACTING programs decayed, for resume.
	resumeUsed int64
	// actingShare is the fraction of ACTING tokens charged to the pod.
	actingShare float64
	ready       bool
	draining    bool
	// serving pods take new programs: ready and not draining.
	serving bool
	// kvBytesPerToken is Pod.KVBytesPerToken (0: moves no KV);
	// maxModelLen is Pod.MaxModelLen (0: unknown).
	kvBytesPerToken, maxModelLen int64
}

func (p *podState) remaining() int64 { return p.total - p.used }

func (p *podState) resumeRemaining() int64 { return p.total - p.resumeUsed }

// progState is one live (not terminated) program during a round.
type progState struct {
	id string
	// charge is what the program costs the pod it is on, undecayed;
	// resumeCharge the same, decayed (see Scheduler.resumeCharge).
	charge, resumeCharge int64
	// footprint is what the program would cost a pod it is placed on;
	// contextTokens is Program.ContextTokens, what a move of its KV sends.
	footprint, contextTokens int64
	// waitSince is when it started waiting; zero when unknown or when the
	// round itself paused it.
	waitSince time.Time
	// pod is the program's pod, -1 while waiting.
	pod int32
	// cachedOn is the pod that may hold its KV cache while it waits, -1
	// when unknown. kvOn is the same, or the draining pod it is moved off:
	// where a fetch of its KV comes from.
	cachedOn, kvOn int32
	class          uint8
	// acting: the reported status is ACTING.
	acting bool
	// markedIn is the reported mark; marked is the mark after the round.
	markedIn, marked bool
	// movable programs were placed on a serving pod before the round, so
	// pause-until-safe may pause or mark them.
	movable bool
	// runningSince is Program.RunningSince; keepMark protects a mark that
	// makes room for an overdue program from being dropped as spare.
	runningSince time.Time
	keepMark     bool
}

// candidate is a program in a sort: by class, then tokens, then id.
type candidate struct {
	id     string
	tokens int64
	idx    int32
	class  uint8
}

func byClassLargestFirst(a, b candidate) int {
	if c := cmp.Compare(a.class, b.class); c != 0 {
		return c
	}
	if c := cmp.Compare(b.tokens, a.tokens); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

func byClassSmallestFirst(a, b candidate) int {
	if c := cmp.Compare(a.class, b.class); c != 0 {
		return c
	}
	if c := cmp.Compare(a.tokens, b.tokens); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// New returns a Scheduler for policy, or the error Validate gives.
func New(policy Policy) (*Scheduler, error) {
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	return &Scheduler{
		policy:   policy,
		model:    policy.CapacityModel(),
		podIndex: make(map[string]int32),
		seen:     make(map[string]struct{}),
	}, nil
}

// Policy returns the policy the Scheduler was built with.
func (s *Scheduler) Policy() Policy { return s.policy }

// Decide runs one round over snap at time now (see the package comment for
// the steps). It neither modifies snap nor keeps it. The Decision belongs to
// the Scheduler and is overwritten by the next Decide, even one that fails:
// apply it, or Clone it, before calling again. The error wraps ErrInvalidSnapshot when snap
// breaks a contract of Pod or Program; no Decision comes with it.
func (s *Scheduler) Decide(snap Snapshot, now time.Time) (*Decision, error) {
	if err := s.load(snap, now); err != nil {
		return nil, err
	}
	if s.policy.Mode == ModeDefault {
		s.placeLeastPrograms()
		s.unmarkAll()
	} else {
		s.forceResume(now)
		s.resume(now)
		s.fairness(now)
		s.pauseUntilSafe()
	}
	s.report()
	return &s.dec, nil
}

// load checks snap, charges every placed program to its pod, and empties
// draining pods (step 1).
func (s *Scheduler) load(snap Snapshot, now time.Time) error {
	s.pods = s.pods[:0]
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if err := p.validate(); err != nil {
			return err
		}
		s.pods = append(s.pods, podState{
			name:  p.Name,
			total: p.CapacityTokens,
			host:  p.HostTokens,

			kvBytesPerToken: p.KVBytesPerToken,
			maxModelLen:     p.MaxModelLen,
			// All ACTING tokens count until chargeActingOnHost says otherwise.
			actingShare: 1,
			ready:       p.Ready,
			draining:    p.Draining,
			serving:     p.Ready && !p.Draining,
		})
	}
	slices.SortFunc(s.pods, func(a, b podState) int { return strings.Compare(a.name, b.name) })
	clear(s.podIndex)
	for i := range s.pods {
		if i > 0 && s.pods[i].name == s.pods[i-1].name {
			return fmt.Errorf("%w: duplicate pod %q", ErrInvalidSnapshot, s.pods[i].name)
		}
		s.podIndex[s.pods[i].name] = int32(i)
	}
	s.dec.reset(s.pods)

	clear(s.seen)
	s.progs = s.progs[:0]
	for i := range snap.Programs {
		p := &snap.Programs[i]
		if err := p.validate(); err != nil {
			return err
		}
		if _, dup := s.seen[p.ID]; dup {
			return fmt.Errorf("%w: duplicate program %q", ErrInvalidSnapshot, p.ID)
		}
		s.seen[p.ID] = struct{}{}
		if p.State != StateTerminated {
			s.addProgram(p, now)
		}
	}
	if s.policy.ActingOnHost {
		s.chargeActingOnHost()
	}
	if s.policy.DeviceOvercommit > 1 {
		s.overcommitOnHost()
	}
	s.groupMembers()
	return nil
}

// chargeActingOnHost scales, on each pod with a host KV tier, the charges
// of its ACTING programs down to the share of their tokens that the tier's
// room cannot hold (Policy.ActingOnHost, CapacityModel.actingShare).
func (s *Scheduler) chargeActingOnHost() {
	scaled := false
	for i := range s.pods {
		p := &s.pods[i]
		p.actingShare = s.model.actingShare(&p.podLoad, p.host)
		scaled = scaled || p.actingShare != 1
	}
	if !scaled {
		return
	}
	for k := range s.progs {
		ps := &s.progs[k]
		if ps.pod < 0 || !ps.acting || s.pods[ps.pod].actingShare == 1 {
			continue
		}
		p := &s.pods[ps.pod]
		c, r := s.model.scaleActing(ps.charge, p.actingShare), s.model.scaleActing(ps.resumeCharge, p.actingShare)
		p.used += c - ps.charge
		p.resumeUsed += r - ps.resumeCharge
		ps.charge, ps.resumeCharge = c, r
	}
}

// overcommitOnHost raises the capacity of each pod with a host KV tier
// (Policy.DeviceOvercommit, CapacityModel.total).
func (s *Scheduler) overcommitOnHost() {
	for i := range s.pods {
		p := &s.pods[i]
		p.total = s.model.total(&p.podLoad, p.total, p.host, p.actingShare)
	}
}

func (s *Scheduler) addProgram(p *Program, now time.Time) {
	ps := progState{
		id:        p.ID,
		footprint: s.model.footprint(p),
		pod:       -1,
		cachedOn:  -1,
		kvOn:      -1,
		class:     classOf(p),
		acting:    p.Status == StatusActing,
		markedIn:  p.MarkedForPause,

		runningSince:  p.RunningSince,
		contextTokens: p.ContextTokens,
	}
	at := int32(-1)
	if p.State == StateActive && p.Pod != "" {
		if i, ok := s.podIndex[p.Pod]; ok {
			at = i
		}
	}
	if at < 0 {
		if i, ok := s.podIndex[p.CachedOn]; ok && p.CachedOn != "" {
			ps.cachedOn, ps.kvOn = i, i
		}
		ps.charge = ps.footprint
		ps.waitSince = p.PausedSince
		if ps.cachedOn >= 0 {
			s.pods[ps.cachedOn].keep(ps.footprint)
		}
		s.progs = append(s.progs, ps)
		return
	}
	pod := &s.pods[at]
	if pod.draining && ps.acting {
		// Moved off the pod: paused there now, resumable elsewhere in this
		// very round. Its wait starts now, so it is not force-resumed. Its
		// cache is on the draining pod: no affinity.
		s.dec.Pods[at].Pause = append(s.dec.Pods[at].Pause, p.ID)
		ps.cachedOn, ps.kvOn = -1, at
		ps.charge = ps.footprint
		s.progs = append(s.progs, ps)
		return
	}
	ps.pod = at
	ps.charge = s.model.placedCharge(p)
	ps.marked = ps.markedIn
	switch {
	case pod.draining:
		// REASONING: its request finishes here, then the pod pauses it.
		if !ps.markedIn {
			s.dec.Pods[at].Mark = append(s.dec.Pods[at].Mark, p.ID)
		}
		ps.marked = true
	case pod.ready:
		ps.movable = true
	}
	ps.resumeCharge = s.resumeCharge(p, ps.charge, now)
	pod.place(s.model, ps.charge, ps.acting, ps.marked)
	pod.resumeUsed += ps.resumeCharge
	s.progs = append(s.progs, ps)
}

// groupMembers lists movable programs by pod with a counting sort.
func (s *Scheduler) groupMembers() {
	n := len(s.pods)
	s.start = slices.Grow(s.start[:0], n+1)[:n+1]
	clear(s.start)
	movable := 0
	for i := range s.progs {
		if ps := &s.progs[i]; ps.movable {
			s.start[ps.pod+1]++
			movable++
		}
	}
	for i := 1; i <= n; i++ {
		s.start[i] += s.start[i-1]
	}
	s.members = slices.Grow(s.members[:0], movable)[:movable]
	// Fill from the back so that start ends up at each group's beginning,
	// without a second offsets array.
	for i := len(s.progs) - 1; i >= 0; i-- {
		if ps := &s.progs[i]; ps.movable {
			s.start[ps.pod+1]--
			s.members[s.start[ps.pod+1]] = int32(i)
		}
	}
	// start[i+1] now holds group i's beginning; shift to the usual layout.
	copy(s.start, s.start[1:])
	s.start[n] = int32(movable)
}

// place puts a waiting program on a pod.
func (s *Scheduler) place(idx, at int32) {
	ps := &s.progs[idx]
	pod := &s.pods[at]
	ps.pod = at
	pod.used += ps.charge
	pod.resumeUsed += ps.charge
	pod.programs++
	s.dec.Pods[at].Place = append(s.dec.Pods[at].Place, ps.id)
	if from := ps.kvOn; from >= 0 && from != at && s.movesKV(ps, from, at) {
		s.dec.Pods[at].Fetch = append(s.dec.Pods[at].Fetch, Fetch{Program: ps.id, From: s.pods[from].name})
	}
}

// report fills in capacity, the waiting programs and the replica count
// (step 5).
func (s *Scheduler) report() {
	for i := range s.pods {
		p := &s.pods[i]
		d := &s.dec.Pods[i]
		d.Capacity = Capacity{Used: p.used, Total: p.total, Marked: p.marked, Programs: p.programs}
		// Sorted, so that a delta does not depend on the order of the
		// snapshot or of the steps that produced it.
		slices.Sort(d.Place)
		slices.Sort(d.Pause)
		slices.Sort(d.Mark)
		slices.Sort(d.Unmark)
		slices.SortFunc(d.Fetch, func(a, b Fetch) int { return strings.Compare(a.Program, b.Program) })
	}
	for i := range s.progs {
		if ps := &s.progs[i]; ps.pod < 0 {
			s.dec.Paused = append(s.dec.Paused, ps.id)
		}
	}
	slices.Sort(s.dec.Paused)
	s.dec.RecommendedReplicas = s.recommendReplicas()
}
