package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// TestHybridStateChargedPerProgram: pods of a hybrid model report what a
// program's recurrent state costs in KV tokens (wire.KVReport.StateTokens),
// and the round charges every program its state besides its context: four
// programs of 3,000 tokens fit a 16,000-token pod (12,400 with the
// policy's buffer), but not with 1,500 tokens of state each (18,400), and
// the placements tell the pods the per-program charge.
func TestHybridStateChargedPerProgram(t *testing.T) {
	for _, tc := range []struct {
		state  int64
		pauses int
	}{{0, 0}, {1500, 1}} {
		clk := clock.NewVirtual(time.Unix(10_000, 0))
		a := newPod(t, "a", 16000, clk)
		a.kv.StateTokens = tc.state
		for _, id := range []string{"p1", "p2", "p3", "p4"} {
			run(a, id, 3000)
		}
		f := newFleet(t, placement.DefaultPolicy())
		sum, err := f.Round(context.Background(), []Pod{a.fleetPod()}, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if sum.Pauses != tc.pauses {
			t.Errorf("state %d tokens a program: %d pauses, want %d", tc.state, sum.Pauses, tc.pauses)
		}
		if want := placement.DefaultPolicy().BufferTokensPerProgram + tc.state; f.policy.BufferTokensPerProgram != want {
			t.Errorf("state %d: the round charges %d tokens a program besides its context, want %d", tc.state, f.policy.BufferTokensPerProgram, want)
		}
	}
}
