package placement

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// t0 is the time of every test round unless a test says otherwise.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// pod returns a ready, non-draining pod.
func pod(name string, capacity int64) Pod {
	return Pod{Name: name, Ready: true, CapacityTokens: capacity}
}

func drainingPod(name string, capacity int64) Pod {
	return Pod{Name: name, Ready: true, Draining: true, CapacityTokens: capacity}
}

func notReadyPod(name string, capacity int64) Pod {
	return Pod{Name: name, CapacityTokens: capacity}
}

// programBuilder builds a Program: by default an ACTIVE, REASONING, unplaced
// program past its first step, as in MakeProgram(id).On(pod).Acting(…).Obj().
type programBuilder struct{ p Program }

func prog(id string, tokens int64) *programBuilder {
	return &programBuilder{p: Program{
		ID:            id,
		Status:        StatusReasoning,
		State:         StateActive,
		ContextTokens: tokens,
		Steps:         3,
	}}
}

func (b *programBuilder) on(pod string) *programBuilder {
	b.p.State, b.p.Pod = StateActive, pod
	return b
}

// acting makes the program ACTING since the given time.
func (b *programBuilder) acting(since time.Time) *programBuilder {
	b.p.Status, b.p.LastTransition = StatusActing, since
	return b
}

// paused makes the program PAUSED since the given time.
func (b *programBuilder) paused(since time.Time) *programBuilder {
	b.p.State, b.p.Pod, b.p.PausedSince = StatePaused, "", since
	return b
}

func (b *programBuilder) held() *programBuilder { b.p.HasHeldRequest = true; return b }

// running sets when the program was last placed or resumed.
func (b *programBuilder) running(since time.Time) *programBuilder {
	b.p.RunningSince = since
	return b
}
func (b *programBuilder) cachedOn(pod string) *programBuilder {
	b.p.CachedOn = pod
	return b
}
func (b *programBuilder) marked() *programBuilder     { b.p.MarkedForPause = true; return b }
func (b *programBuilder) steps(n int) *programBuilder { b.p.Steps = n; return b }
func (b *programBuilder) shared(n int64) *programBuilder {
	b.p.SharedTokens = n
	return b
}
func (b *programBuilder) terminated() *programBuilder {
	b.p.State = StateTerminated
	return b
}
func (b *programBuilder) obj() Program { return b.p }

func programs(bs ...*programBuilder) []Program {
	out := make([]Program, len(bs))
	for i, b := range bs {
		out[i] = b.obj()
	}
	return out
}

// policyWith returns DefaultPolicy changed by edit.
func policyWith(edit func(*Policy)) Policy {
	p := DefaultPolicy()
	if edit != nil {
		edit(&p)
	}
	return p
}

// decide runs one round with a fresh Scheduler and returns a copy of the
// decision.
func decide(t *testing.T, policy Policy, snap Snapshot, now time.Time) *Decision {
	t.Helper()
	s, err := New(policy)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	d, err := s.Decide(snap, now)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return d.Clone()
}

// outcome is a Decision without capacity, keyed by pod, for compact wants:
// pods with nothing in a list are left out of its map.
type outcome struct {
	Place, Pause, Mark, Unmark map[string][]string
	Paused, ForceResumed       []string
	FairnessPaused             []string
	// Fetch is each pod's KV fetches (Policy.KVTransferBandwidth).
	Fetch map[string][]Fetch
}

func outcomeOf(d *Decision) outcome {
	var o outcome
	add := func(m *map[string][]string, pod string, ids []string) {
		if len(ids) == 0 {
			return
		}
		if *m == nil {
			*m = map[string][]string{}
		}
		(*m)[pod] = ids
	}
	for _, p := range d.Pods {
		add(&o.Place, p.Pod, p.Place)
		add(&o.Pause, p.Pod, p.Pause)
		add(&o.Mark, p.Pod, p.Mark)
		add(&o.Unmark, p.Pod, p.Unmark)
		if len(p.Fetch) > 0 {
			if o.Fetch == nil {
				o.Fetch = map[string][]Fetch{}
			}
			o.Fetch[p.Pod] = p.Fetch
		}
	}
	o.Paused, o.ForceResumed, o.FairnessPaused = d.Paused, d.ForceResumed, d.FairnessPaused
	return o
}

// ids is shorthand for a list of program ids in a want.
func ids(s ...string) []string { return s }

// onPod is shorthand for a one-pod map in a want.
func onPod(pod string, s ...string) map[string][]string {
	return map[string][]string{pod: s}
}

// cmpEmpty treats nil and empty slices alike: a reused Decision holds empty
// ones.
var cmpEmpty = cmpopts.EquateEmpty()

func diffOutcome(want outcome, d *Decision) string {
	return cmp.Diff(want, outcomeOf(d), cmpEmpty)
}

// roundCase is one table-test round: a snapshot, a policy change and the
// outcome wanted.
type roundCase struct {
	name   string
	policy func(*Policy)
	pods   []Pod
	progs  []*programBuilder
	// now defaults to t0.
	now  time.Time
	want outcome
}

func runRounds(t *testing.T, tests []roundCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := tt.now
			if now.IsZero() {
				now = t0
			}
			snap := Snapshot{Pods: tt.pods, Programs: programs(tt.progs...)}
			d := decide(t, policyWith(tt.policy), snap, now)
			if diff := diffOutcome(tt.want, d); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// noBuffer keeps token arithmetic in tests to the programs' own tokens.
func noBuffer(p *Policy) { p.BufferTokensPerProgram = 0 }

// withDecay turns decay on with a half-life of one second, without buffer.
func withDecay(p *Policy) {
	noBuffer(p)
	p.ActingDecay = Decay{Enabled: true, HalfLife: time.Second}
}

func defaultMode(p *Policy) { p.Mode = ModeDefault }
