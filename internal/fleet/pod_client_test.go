package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// fakePods is an in-memory PodClient: reports by control address, and the
// placements pushed to each. A pod in down fails both calls.
type fakePods struct {
	mu      sync.Mutex
	reports map[string]*wire.Report
	down    map[string]bool
	pushed  map[string][]*wire.Placement
}

var _ PodClient = (*fakePods)(nil)

func (f *fakePods) State(_ context.Context, addr string) (*wire.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[addr] {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	r, ok := f.reports[addr]
	if !ok {
		return nil, errors.New("no such pod")
	}
	cp := *r
	return &cp, nil
}

func (f *fakePods) Push(_ context.Context, addr string, p *wire.Placement) (*wire.PlacementResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[addr] {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	f.pushed[addr] = append(f.pushed[addr], p)
	f.reports[addr].PlacementVersion = p.Version
	return &wire.PlacementResult{Version: p.Version, Applied: true}, nil
}

func fakeReport(pod string, capacity int, progs ...wire.ProgramReport) *wire.Report {
	return &wire.Report{Pod: pod, KV: wire.KVReport{BlockSize: 16, TotalBlocks: capacity / 16}, Programs: progs}
}

func acting(id string, tokens int64) wire.ProgramReport {
	return wire.ProgramReport{ID: id, Status: "ACTING", State: "ACTIVE", Placed: true, ContextTokens: tokens, Steps: 1,
		LastTransition: time.Unix(9_000, 0)}
}

// The loop needs only a PodClient; everything per pod is keyed by name,
// whatever order the pods come in, repeated or not, and a pod that sits a
// round out gets its routes in full the round after, the others deltas.
func TestRoundKeysPodsByName(t *testing.T) {
	now := time.Unix(10_000, 0)
	c := &fakePods{
		reports: map[string]*wire.Report{
			"a:9000": fakeReport("a", 16000, acting("p1", 5000), acting("p2", 5000), acting("p3", 5000), acting("p4", 5000)),
			"b:9000": fakeReport("b", 16000),
			"c:9000": fakeReport("c", 16000, acting("q1", 1000)),
		},
		down:   map[string]bool{"c:9000": true},
		pushed: map[string][]*wire.Placement{},
	}
	pod := func(name string) Pod {
		return Pod{Name: name, APIAddr: name + ":8000", ControlAddr: name + ":9000", Ready: true}
	}
	f, err := New(placement.DefaultPolicy(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Out of order, and b twice (two Endpoints for one pod).
	sum, err := f.Round(context.Background(), []Pod{pod("c"), pod("b"), pod("a"), pod("b")}, now)
	if err == nil || len(sum.Errors) != 1 {
		t.Fatalf("pod c is down: want one error, got %v", err)
	}
	if len(sum.Pods) != 3 {
		t.Fatalf("%d pod summaries for pods a, b, c: %+v", len(sum.Pods), sum.Pods)
	}
	byName := map[string]PodSummary{}
	for i, ps := range sum.Pods {
		if i > 0 && sum.Pods[i-1].Name >= ps.Name {
			t.Errorf("summaries not in name order: %+v", sum.Pods)
		}
		byName[ps.Name] = ps
	}
	if a := byName["a"]; !a.Reachable || a.Paused != 1 || a.CapacityTokens != 16000 {
		t.Errorf("pod a: %+v (want reachable, one program paused)", a)
	}
	if b := byName["b"]; !b.Reachable || b.Paused != 0 {
		t.Errorf("pod b: %+v", b)
	}
	if cs := byName["c"]; cs.Reachable || cs.Programs != 0 {
		t.Errorf("pod c: %+v (want unreachable, nothing placed)", cs)
	}
	if sum.Pauses != 1 || len(c.pushed["a:9000"]) != 1 || len(c.pushed["b:9000"]) != 1 || len(c.pushed["c:9000"]) != 0 {
		t.Fatalf("pauses %d; pushes a %d, b %d, c %d", sum.Pauses, len(c.pushed["a:9000"]), len(c.pushed["b:9000"]), len(c.pushed["c:9000"]))
	}
	if pl := c.pushed["a:9000"][0]; len(pl.Pause) != 1 || !pl.FullRoutes || pl.Room["b:8000"] != 16000 || pl.Mode != "ProgramAware" {
		t.Errorf("pod a's first placement: %+v", pl)
	}

	c.mu.Lock()
	c.down["c:9000"] = false
	c.mu.Unlock()
	if _, err := f.Round(context.Background(), []Pod{pod("a"), pod("b"), pod("c")}, now.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for name, full := range map[string]bool{"a": false, "b": false, "c": true} {
		got := c.pushed[name+":9000"]
		if len(got) == 0 || got[len(got)-1].FullRoutes != full {
			t.Errorf("pod %s, second round: pushes %d, want full routes %v", name, len(got), full)
		}
	}
}
