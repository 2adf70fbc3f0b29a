package placement

import (
	"testing"
	"time"
)

func TestRecommendedReplicas(t *testing.T) {
	ago := t0.Add(-time.Minute)
	full := func(name string, capacity int64) []*programBuilder {
		return []*programBuilder{prog("r-"+name, capacity-50).on(name)}
	}
	concat := func(lists ...[]*programBuilder) []*programBuilder {
		var out []*programBuilder
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	tests := []struct {
		name  string
		pods  []Pod
		progs []*programBuilder
		want  int
	}{{
		name: "nothing waits: the serving pods",
		pods: []Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000)},
		want: 3,
	}, {
		name: "programs that fit on no pod ask for pods of the largest serving size",
		pods: []Pod{pod("a", 1000), pod("b", 1000)},
		progs: concat(full("a", 1000), full("b", 1000), []*programBuilder{
			prog("w1", 600).paused(ago), prog("w2", 600).paused(ago), prog("w3", 600).paused(ago),
		}),
		want: 2 + 2, // ⌈1800 / 1000⌉
	}, {
		name: "the largest serving pod sizes the new ones",
		pods: []Pod{pod("a", 1000), pod("b", 4000)},
		progs: concat(full("a", 1000), full("b", 4000), []*programBuilder{
			prog("w1", 2500).paused(ago), prog("w2", 2500).paused(ago), prog("w3", 2500).paused(ago),
		}),
		want: 2 + 2, // ⌈7500 / 4000⌉
	}, {
		name: "a program that fits somewhere but is held back does not count",
		pods: []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("r0", 500).on("a"),
			prog("held", 800).paused(ago),         // fits nowhere: counts
			prog("new", 100).steps(1).paused(ago), // fits, held back by the reservation
		},
		want: 1 + 1,
	}, {
		name:  "a program larger than any pod does not count",
		pods:  []Pod{pod("a", 1000)},
		progs: []*programBuilder{prog("huge", 5000).paused(ago)},
		want:  1,
	}, {
		name:  "draining and not-ready pods are not counted",
		pods:  []Pod{pod("a", 1000), drainingPod("b", 1000), notReadyPod("c", 1000)},
		progs: concat(full("a", 1000), []*programBuilder{prog("w1", 600).paused(ago)}),
		want:  1 + 1,
	}, {
		name:  "no serving pod and programs waiting: one",
		pods:  []Pod{notReadyPod("a", 1000)},
		progs: []*programBuilder{prog("w1", 600).paused(ago)},
		want:  1,
	}, {
		name: "empty pool: zero",
		want: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := Snapshot{Pods: tt.pods, Programs: programs(tt.progs...)}
			d := decide(t, policyWith(noBuffer), snap, t0)
			if d.RecommendedReplicas != tt.want {
				t.Errorf("RecommendedReplicas = %d, want %d (paused %v)", d.RecommendedReplicas, tt.want, d.Paused)
			}
		})
	}
}
