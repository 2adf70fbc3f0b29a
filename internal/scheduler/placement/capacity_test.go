package placement

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCapacity(t *testing.T) {
	long := t0.Add(-time.Hour)
	tests := []struct {
		name   string
		policy func(*Policy)
		progs  []*programBuilder
		want   Capacity
	}{{
		name:  "reasoning: context plus buffer",
		progs: []*programBuilder{prog("p1", 1000).on("a")},
		want:  Capacity{Used: 1100, Total: 10_000, Programs: 1},
	}, {
		name:  "acting at weight 1 counts fully",
		progs: []*programBuilder{prog("p1", 1000).on("a").acting(long)},
		want:  Capacity{Used: 1100, Total: 10_000, Programs: 1},
	}, {
		name:   "acting weighted, rounded to the nearest token",
		policy: func(p *Policy) { p.ActingTokenWeight = 0.5 },
		progs: []*programBuilder{
			prog("p1", 1001).on("a").acting(long),
			prog("p2", 1000).on("a"),
		},
		want: Capacity{Used: 501 + 100 + 1000 + 100, Total: 10_000, Programs: 2},
	}, {
		name: "shared tokens subtracted",
		progs: []*programBuilder{
			prog("p1", 1000).shared(300).on("a"),
			prog("p2", 1000).shared(300).on("a").acting(long),
		},
		want: Capacity{Used: 700 + 700 + 200, Total: 10_000, Programs: 2},
	}, {
		name:   "acting shared tokens weighted too, so no charge is negative",
		policy: func(p *Policy) { p.ActingTokenWeight = 0 },
		progs:  []*programBuilder{prog("p1", 1000).shared(800).on("a").acting(long)},
		want:   Capacity{Used: 100, Total: 10_000, Programs: 1},
	}, {
		name: "shared tokens clamped to [0, context]",
		progs: []*programBuilder{
			prog("p1", 1000).shared(5000).on("a"),
			prog("p2", 1000).shared(-5).on("a"),
		},
		want: Capacity{Used: 100 + 1100, Total: 10_000, Programs: 2},
	}, {
		name:   "buffer per program",
		policy: func(p *Policy) { p.BufferTokensPerProgram = 250 },
		progs: []*programBuilder{
			prog("p1", 0).on("a"), prog("p2", 0).on("a"), prog("p3", 0).on("a").acting(long),
		},
		want: Capacity{Used: 750, Total: 10_000, Programs: 3},
	}, {
		name:   "decay leaves reported capacity undecayed",
		policy: func(p *Policy) { p.ActingDecay.Enabled = true },
		progs:  []*programBuilder{prog("p1", 1000).on("a").acting(long)},
		want:   Capacity{Used: 1100, Total: 10_000, Programs: 1},
	}, {
		name:  "terminated programs take nothing",
		progs: []*programBuilder{prog("p1", 1000).on("a").terminated()},
		want:  Capacity{Total: 10_000},
	}, {
		name:  "placed program charged its whole context: its sharing here is unknown",
		progs: []*programBuilder{prog("p1", 1000).shared(500).paused(t0)},
		want:  Capacity{Used: 1100, Total: 10_000, Programs: 1},
	}, {
		name:   "acting program placed is weighted",
		policy: func(p *Policy) { p.ActingTokenWeight = 0.25 },
		progs:  []*programBuilder{prog("p1", 1000).acting(long).paused(t0)},
		want:   Capacity{Used: 250 + 100, Total: 10_000, Programs: 1},
	}, {
		name:   "held acting program placed counts fully: it reasons at once",
		policy: func(p *Policy) { p.ActingTokenWeight = 0.25 },
		progs:  []*programBuilder{prog("p1", 1000).acting(long).held().paused(t0)},
		want:   Capacity{Used: 1100, Total: 10_000, Programs: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := Snapshot{Pods: []Pod{pod("a", 10_000)}, Programs: programs(tt.progs...)}
			d := decide(t, policyWith(tt.policy), snap, t0)
			if diff := cmp.Diff(tt.want, d.Pod("a").Capacity); diff != "" {
				t.Errorf("capacity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapacityMarkedTokens(t *testing.T) {
	// 2700 used against 2000: the existing mark on p1 (1100) covers the
	// excess, so it stays and is reported as Marked.
	snap := Snapshot{
		Pods: []Pod{pod("a", 2000)},
		Programs: programs(
			prog("p1", 1000).on("a").marked(),
			prog("p2", 1500).on("a"),
		),
	}
	d := decide(t, DefaultPolicy(), snap, t0)
	want := Capacity{Used: 2700, Total: 2000, Marked: 1100, Programs: 2}
	if diff := cmp.Diff(want, d.Pod("a").Capacity); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
	if diff := diffOutcome(outcome{}, d); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
}
