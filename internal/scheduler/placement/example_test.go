package placement_test

import (
	"fmt"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

func ExampleScheduler_Decide() {
	s, err := placement.New(placement.DefaultPolicy())
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	snap := placement.Snapshot{
		Pods: []placement.Pod{
			{Name: "pod-a", Ready: true, CapacityTokens: 16_000},
			{Name: "pod-b", Ready: true, CapacityTokens: 16_000},
		},
		Programs: []placement.Program{
			// pod-a is over capacity: 9100 + 5100 + 4100 = 18300 > 16000.
			{ID: "tool-user", Pod: "pod-a", State: placement.StateActive, Status: placement.StatusActing,
				ContextTokens: 4000, Steps: 5, LastTransition: now.Add(-20 * time.Second)},
			{ID: "planner", Pod: "pod-a", State: placement.StateActive, Status: placement.StatusReasoning,
				ContextTokens: 9000, Steps: 3},
			{ID: "coder", Pod: "pod-a", State: placement.StateActive, Status: placement.StatusReasoning,
				ContextTokens: 5000, Steps: 8},
			// A request waits for a paused program, and pod-b has room.
			{ID: "reviewer", State: placement.StatePaused, Status: placement.StatusReasoning,
				ContextTokens: 12_000, Steps: 4, HasHeldRequest: true, PausedSince: now.Add(-time.Minute)},
		},
	}
	d, err := s.Decide(snap, now)
	if err != nil {
		panic(err)
	}
	for _, p := range d.Pods {
		fmt.Printf("%s: place %v pause %v mark %v, %d/%d tokens\n",
			p.Pod, p.Place, p.Pause, p.Mark, p.Capacity.Used, p.Capacity.Total)
	}
	// tool-user (4100 tokens) now fits on neither pod (1800 and 3900 left),
	// so the pool asks for one more pod.
	fmt.Println("waiting:", d.Paused, "replicas:", d.RecommendedReplicas)
	// Output:
	// pod-a: place [] pause [tool-user] mark [], 14200/16000 tokens
	// pod-b: place [reviewer] pause [] mark [], 12100/16000 tokens
	// waiting: [tool-user] replicas: 3
}
