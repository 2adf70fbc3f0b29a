package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// The pod's gate and the controller compute the same room for a pod: both
// call placement.PodCapacity, the gate with the capacity model the
// controller pushes. With a host tier, ACTING programs and a REASONING
// one, under the shipped defaults
// (ACTING tokens on the host tier, device overcommit) and under other
// models, a round that changes nothing leaves the gate's room equal to the
// room the round gave the pod.
func TestGateAndControllerComputeTheSameRoom(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy func(*placement.Policy)
	}{
		{"defaults", func(*placement.Policy) {}},
		{"no acting on host, no overcommit", func(p *placement.Policy) { p.ActingOnHost, p.DeviceOvercommit = false, 1 }},
		{"acting weight 0.5, overcommit 3", func(p *placement.Policy) { p.ActingTokenWeight, p.DeviceOvercommit = 0.5, 3 }},
		{"Default mode", func(p *placement.Policy) { p.Mode = placement.ModeDefault }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewVirtual(time.Unix(10_000, 0))
			a := newPod(t, "a", 40000, clk)
			b := newPod(t, "b", 40000, clk)
			a.kv.HostTotalBlocks = 1000 // 16,000 tokens
			run(a, "acting-1", 6000)
			run(a, "acting-2", 9000)
			run(b, "acting-3", 3000)
			r := a.table.Route("thinking", false)
			if r.Kind != programs.Local {
				t.Fatalf("route: %v", r.Kind)
			}
			a.table.Started(r.Ticket, 7000, "")
			policy := placement.DefaultPolicy()
			tc.policy(&policy)
			f := newFleet(t, policy)
			pods := []Pod{a.fleetPod(), b.fleetPod()}
			for round := range 3 {
				sum, err := f.Round(context.Background(), pods, clk.Now())
				if err != nil {
					t.Fatal(err)
				}
				if sum.Pauses+sum.Resumes+sum.Marks != 0 {
					t.Fatalf("round %d changed placements: %+v", round, sum)
				}
				for _, p := range []*testPod{a, b} {
					local, placed, ok := p.table.Room()
					if !ok || local != placed {
						t.Errorf("round %d, pod %s: the gate's room %d, the controller's %d (pushed: %v)", round, p.name, local, placed, ok)
					}
				}
				clk.Advance(5 * time.Second)
			}
		})
	}
}
