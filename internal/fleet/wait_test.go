package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// TestRoundReportsOldestWaitAndHostTier: a program paused for want of room
// shows in the summary's oldest wait as it waits, and a pod's host tier is
// reported apart from its device capacity.
func TestRoundReportsOldestWaitAndHostTier(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(10_000, 0))
	a := newPod(t, "a", 16000, clk)
	a.kv.HostTotalBlocks, a.kv.HostUsedBlocks = 4000, 300
	for _, id := range []string{"p1", "p2", "p3", "p4"} {
		run(a, id, 5000)
	}
	// The four ACTING programs overfill the device; with ActingOnHost or
	// device overcommit the host tier would hold them and nobody would wait.
	policy := placement.DefaultPolicy()
	policy.ActingOnHost, policy.DeviceOvercommit = false, 1
	f := newFleet(t, policy)
	pods := []Pod{a.fleetPod()}
	sum, err := f.Round(context.Background(), pods, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sum.ProgramsPaused != 1 || sum.OldestWait != 0 {
		t.Fatalf("first round: %d paused, oldest wait %v; want 1 just paused", sum.ProgramsPaused, sum.OldestWait)
	}
	if ps := sum.Pods[0]; ps.HostTokens != 4000*16 || ps.HostUsedTokens != 300*16 || ps.CapacityTokens != 16000 {
		t.Fatalf("pod summary %+v: want host tier 64000 tokens (4800 used) apart from 16000 device tokens", ps)
	}
	clk.Advance(40 * time.Second)
	sum, err = f.Round(context.Background(), pods, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sum.ProgramsPaused != 1 || sum.OldestWait != 40*time.Second {
		t.Fatalf("second round: %d paused, oldest wait %v; want 1 waiting 40s", sum.ProgramsPaused, sum.OldestWait)
	}
}
