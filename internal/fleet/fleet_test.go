package fleet

import (
	"github.com/google/go-cmp/cmp"

	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control"
	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

const token = "t0ken"

// testPod is a program table behind a real control API on loopback.
type testPod struct {
	name  string
	clk   clock.Clock
	table *programs.Table
	srv   *httptest.Server
	kv    wire.KVReport

	mu      sync.Mutex
	handler http.Handler // the control API over table
}

func newPod(t *testing.T, name string, capacityTokens int, clk clock.Clock) *testPod {
	p := &testPod{name: name, clk: clk, kv: wire.KVReport{BlockSize: 16, TotalBlocks: capacityTokens / 16}}
	p.restart()
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		h := p.handler
		p.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// restart gives the pod a new, empty program table at the same control
// address, as a runtime process that restarts has.
func (p *testPod) restart() {
	tab := programs.New(programs.Config{Pod: p.name, Addr: p.name + ":8000", Clock: p.clk,
		KV: func() wire.KVReport { return p.kv }})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.table, p.handler = tab, control.Handler(tab, token)
}

func (p *testPod) fleetPod() Pod {
	return Pod{Name: p.name, APIAddr: p.name + ":8000", ControlAddr: strings.TrimPrefix(p.srv.URL, "http://"), Ready: true}
}

func run(p *testPod, id string, context int64) {
	r := p.table.Route(id, false)
	if r.Kind != programs.Local {
		panic("expected local: " + r.Kind.String())
	}
	p.table.End(r.Ticket, context, 0, nil)
}

func find(r wire.Report, id string) wire.ProgramReport {
	for _, p := range r.Programs {
		if p.ID == id {
			return p
		}
	}
	return wire.ProgramReport{}
}

// newFleet is a fleet loop for policy that talks to the test pods with
// their control token.
func newFleet(t *testing.T, policy placement.Policy) *Fleet {
	t.Helper()
	f, err := New(policy, controlclient.New(token, 2*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRoundPausesOverflowAndResumesElsewhere(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(10_000, 0))
	a := newPod(t, "a", 16000, clk)
	b := newPod(t, "b", 16000, clk)
	// Pod a runs four programs of 5,000 tokens: 20,400 charged on 16,000.
	for _, id := range []string{"p1", "p2", "p3", "p4"} {
		run(a, id, 5000)
	}
	f, err := New(placement.DefaultPolicy(), controlclient.New(token, 2*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods := []Pod{a.fleetPod(), b.fleetPod()}
	sum, err := f.Round(ctx, pods, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Pauses != 1 {
		t.Fatalf("pauses %d, want 1 (the smallest ACTING program brings a under capacity): %+v", sum.Pauses, sum)
	}
	if sum.Pods[0].Paused != 1 || sum.Pods[1].Paused != 0 || sum.ProgramsPaused != 1 {
		t.Errorf("paused per pod: a %d, b %d, pool %d", sum.Pods[0].Paused, sum.Pods[1].Paused, sum.ProgramsPaused)
	}
	var paused string
	for _, p := range a.table.Report().Programs {
		if p.State == "PAUSED" {
			paused = p.ID
		}
	}
	if paused == "" {
		t.Fatal("no program paused on pod a")
	}
	// Its next request is held on a.
	r := a.table.Route(paused, false)
	if r.Kind != programs.Hold {
		t.Fatalf("paused program's request: %v", r.Kind)
	}
	// Next round: b has room, so the held program resumes on b and the
	// held request wakes and is forwarded there.
	sum, err = f.Round(ctx, pods, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Resumes != 1 {
		t.Fatalf("resumes %d: %+v", sum.Resumes, sum)
	}
	select {
	case <-r.Wait:
	default:
		t.Fatal("held request not woken")
	}
	a.table.Unhold(r.Ticket)
	if r := a.table.Route(paused, false); r.Kind != programs.Forward || r.Addr != "b:8000" {
		t.Fatalf("after resume elsewhere: %+v", r)
	}
	if got := find(b.table.Report(), paused); !got.Placed || got.State != "ACTIVE" {
		t.Fatalf("on b: %+v", got)
	}
	// Routes reach pods as deltas after the first full push.
	if v := a.table.Version(); v != sum.Version {
		t.Errorf("pod a at version %d, fleet %d", v, sum.Version)
	}
}

func TestNewLeaderContinuesVersionsAndLosesNothing(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(10_000, 0))
	a := newPod(t, "a", 16000, clk)
	b := newPod(t, "b", 16000, clk)
	for _, id := range []string{"p1", "p2", "p3", "p4"} {
		run(a, id, 5000)
	}
	ctx := context.Background()
	pods := []Pod{a.fleetPod(), b.fleetPod()}
	first, _ := New(placement.DefaultPolicy(), controlclient.New(token, 2*time.Second), nil)
	s1, err := first.Round(ctx, pods, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The leader dies; a new one starts from nothing but the pods' reports.
	second, _ := New(placement.DefaultPolicy(), controlclient.New(token, 2*time.Second), nil)
	s2, err := second.Round(ctx, pods, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s2.Version <= s1.Version {
		t.Fatalf("new leader version %d not after %d: pods would ignore it", s2.Version, s1.Version)
	}
	total := 0
	for _, p := range append(a.table.Report().Programs, b.table.Report().Programs...) {
		if p.Placed {
			total++
		}
	}
	if total != 4 || s2.ProgramsActive+s2.ProgramsPaused != 4 {
		t.Fatalf("programs after leader change: %d placed, summary %+v", total, s2)
	}
}

func TestUnreachablePodIsLeftAlone(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(10_000, 0))
	a := newPod(t, "a", 16000, clk)
	run(a, "p1", 1000)
	gone := Pod{Name: "z", APIAddr: "127.0.0.1:1", ControlAddr: "127.0.0.1:1", Ready: true}
	f, _ := New(placement.DefaultPolicy(), controlclient.New(token, 500*time.Millisecond), nil)
	sum, err := f.Round(context.Background(), []Pod{a.fleetPod(), gone}, clk.Now())
	if err == nil || len(sum.Errors) != 1 {
		t.Fatalf("an unreachable pod must be reported: %v", err)
	}
	if sum.Pods[1].Reachable || !sum.Pods[0].Reachable || sum.ProgramsActive != 1 {
		t.Fatalf("summary %+v", sum)
	}
}

func TestMergeRanksViews(t *testing.T) {
	t0 := time.Unix(100, 0)
	holder := &wire.ProgramReport{ID: "p", Status: "ACTING", State: "PAUSED", HeldRequests: 1, PausedSince: t0}
	cache := &wire.ProgramReport{ID: "p", Status: "ACTING", State: "PAUSED", Placed: true, ContextTokens: 900, Steps: 4, PausedSince: t0.Add(time.Second)}
	running := &wire.ProgramReport{ID: "p", Status: "REASONING", State: "ACTIVE", Placed: true, ContextTokens: 950, Steps: 5}
	for _, order := range [][]*wire.ProgramReport{{holder, cache, running}, {running, cache, holder}, {cache, running, holder}} {
		merged := map[string]*placement.Program{}
		for i, r := range order {
			mergeProgram(merged, r, fmt.Sprintf("pod-%d", i))
		}
		p := merged["p"]
		if p.State != placement.StateActive || p.Pod == "" || p.ContextTokens != 950 || !p.HasHeldRequest || p.Steps != 5 {
			t.Errorf("the running pod's view must win, with the holders' held request: %+v", p)
		}
	}
	merged := map[string]*placement.Program{}
	mergeProgram(merged, holder, "a")
	mergeProgram(merged, cache, "b")
	if p := merged["p"]; p.State != placement.StatePaused || p.CachedOn != "b" || !p.PausedSince.Equal(t0) || p.ContextTokens != 900 {
		t.Errorf("paused program: %+v", p)
	}
	mergeProgram(merged, &wire.ProgramReport{ID: "p", State: "TERMINATED"}, "c")
	if merged["p"].State != placement.StateTerminated {
		t.Error("a release seen anywhere ends the program")
	}
}

func TestReportConvertsForThePlacementAlgorithm(t *testing.T) {
	tab := programs.New(programs.Config{Pod: "pod-a", Addr: "pod-a:8000",
		KV: func() wire.KVReport { return wire.KVReport{BlockSize: 16, TotalBlocks: 1000} }})
	tab.Route("run", false)
	tab.End(tab.Route("cached", false).Ticket, 300, 16, nil)
	tab.Apply(&wire.Placement{Version: 1, Pause: []string{"cached"}})
	got := map[string]string{}
	for _, p := range tab.Report().Programs {
		pp := toPlacement(&p, "pod-a")
		if !pp.RunningSince.Equal(p.RunningSince) {
			t.Errorf("%s: RunningSince %v, reported %v", p.ID, pp.RunningSince, p.RunningSince)
		}
		got[p.ID] = pp.Status.String() + "/" + pp.State.String() + "/pod=" + pp.Pod + "/cachedOn=" + pp.CachedOn
	}
	want := map[string]string{
		"run":    "REASONING/ACTIVE/pod=pod-a/cachedOn=",
		"cached": "ACTING/PAUSED/pod=/cachedOn=pod-a",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
