package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// The loop moves a program's KV only to a pod whose max model length
// (reported with its KV) holds the program's context: a pod with a shorter
// one would refuse the chain, and the program recomputes there instead.
func TestRoundMovesKVOnlyWhereTheContextFits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxModelLen int
		fetch       bool
	}{
		{"longer", 8192, true},
		{"fits exactly", 3000, true},
		{"shorter than the context", 2048, false},
		{"unknown (an older pod)", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bytesPerToken = 128 << 10
			c := &fakePods{
				reports: map[string]*wire.Report{
					"a:9000": fakeReport("a", 16000, acting("p1", 3000)),
					"b:9000": fakeReport("b", 16000),
				},
				pushed: map[string][]*wire.Placement{},
			}
			c.reports["a:9000"].KV.BytesPerToken, c.reports["a:9000"].KV.MaxModelLen = bytesPerToken, 8192
			c.reports["b:9000"].KV.BytesPerToken, c.reports["b:9000"].KV.MaxModelLen = bytesPerToken, tc.maxModelLen
			policy := placement.DefaultPolicy()
			policy.KVTransferBandwidth = placement.DefaultKVTransferBandwidth
			f, err := New(policy, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			pods := []Pod{
				{Name: "a", APIAddr: "a:8000", ControlAddr: "a:9000", Ready: true, Draining: true},
				{Name: "b", APIAddr: "b:8000", ControlAddr: "b:9000", Ready: true},
			}
			sum, err := f.Round(context.Background(), pods, time.Unix(10_000, 0))
			if err != nil {
				t.Fatal(err)
			}
			pl := c.pushed["b:9000"][0]
			if len(pl.Place) != 1 || pl.Place[0] != "p1" {
				t.Fatalf("p1 not moved to b: %+v", pl)
			}
			if _, fetch := pl.Fetch["p1"]; fetch != tc.fetch || (sum.KVFetches == 1) != tc.fetch {
				t.Fatalf("fetch of p1's KV on b: %v (%d counted), want %v", pl.Fetch, sum.KVFetches, tc.fetch)
			}
		})
	}
}
