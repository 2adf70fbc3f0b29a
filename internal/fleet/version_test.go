package fleet

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// A pod reporting a placement version no loop sends (an older pod that
// took 2^63-1 from another sender, or one pushed near the bound pods take)
// is left out of step alone: the loop does not continue from it, so its
// versions never overflow and every other pod still gets its placements.
func TestRoundIgnoresOutlandishPodVersions(t *testing.T) {
	for _, v := range []int64{math.MaxInt64, 1 << 53, 1<<52 + 1} {
		c := &fakePods{
			reports: map[string]*wire.Report{
				"a:9000": fakeReport("a", 16000, acting("p1", 1000)),
				"b:9000": fakeReport("b", 16000, acting("q1", 1000)),
			},
			pushed: map[string][]*wire.Placement{},
		}
		c.reports["a:9000"].PlacementVersion = v
		pods := []Pod{
			{Name: "a", APIAddr: "a:8000", ControlAddr: "a:9000", Ready: true},
			{Name: "b", APIAddr: "b:8000", ControlAddr: "b:9000", Ready: true},
		}
		f, err := New(placement.DefaultPolicy(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(10_000, 0)
		for round := range 3 {
			c.reports["a:9000"].PlacementVersion = v // it applies nothing older
			sum, err := f.Round(context.Background(), pods, now.Add(time.Duration(round)*5*time.Second))
			if err == nil || len(sum.Errors) != 1 {
				t.Fatalf("pod a at version %d: want one error naming it, got %v", v, err)
			}
			if sum.Version != int64(round+1) {
				t.Fatalf("pod a at version %d, round %d: the loop pushed version %d, want %d", v, round+1, sum.Version, round+1)
			}
			got := c.pushed["b:9000"]
			if len(got) != round+1 || got[round].Version != int64(round+1) {
				t.Fatalf("pod a at version %d, round %d: pod b got %d placements, the last %+v", v, round+1, len(got), got[len(got)-1])
			}
		}
	}
}

// The loop continues from the highest version its pods report below the
// bound, and at the bound pods take it stops pushing rather than wrap.
func TestRoundNeverWrapsTheVersion(t *testing.T) {
	c := &fakePods{
		reports: map[string]*wire.Report{"a:9000": fakeReport("a", 16000, acting("p1", 1000))},
		pushed:  map[string][]*wire.Placement{},
	}
	c.reports["a:9000"].PlacementVersion = 1 << 40
	pods := []Pod{{Name: "a", APIAddr: "a:8000", ControlAddr: "a:9000", Ready: true}}
	f, err := New(placement.DefaultPolicy(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(10_000, 0)
	if sum, err := f.Round(context.Background(), pods, now); err != nil || sum.Version != 1<<40+1 {
		t.Fatalf("a new leader after a pod at 2^40: version %d, %v", sum.Version, err)
	}
	f.version = 1 << 53 // 2^52 rounds later
	sum, err := f.Round(context.Background(), pods, now.Add(5*time.Second))
	if err == nil || sum.Version != 1<<53 || len(c.pushed["a:9000"]) != 1 {
		t.Fatalf("at the bound: version %d, %d pushes, %v; want no push and an error", sum.Version, len(c.pushed["a:9000"]), err)
	}
}
