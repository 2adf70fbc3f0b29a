package placement

import (
	"testing"
	"time"
)

func TestDefaultMode(t *testing.T) {
	ago := t0.Add(-time.Minute)
	runRounds(t, []roundCase{{
		name:   "programs stay on their pod, over capacity or not: nothing is paused",
		policy: defaultMode,
		pods:   []Pod{pod("a", 1000), pod("b", 100_000)},
		progs: []*programBuilder{
			prog("a1", 500).on("a").acting(ago),
			prog("a2", 500).on("a").acting(ago),
			prog("r1", 500).on("a"),
		},
		want: outcome{},
	}, {
		name:   "new programs go to the pod with the fewest programs, first by name on a tie",
		policy: defaultMode,
		pods:   []Pod{pod("c", 10), pod("b", 10), pod("a", 1_000_000)},
		progs: []*programBuilder{
			prog("a1", 1).on("a"), prog("a2", 1).on("a"),
			prog("b1", 1).on("b"),
			prog("c1", 1).on("c"),
			prog("n300", 300).steps(1),
			prog("n200", 200).steps(1),
			prog("n100", 100).steps(1),
		},
		// n300→b (b:2), n200→c (c:2), n100→a (all 2; a by name).
		want: outcome{Place: map[string][]string{"a": {"n100"}, "b": {"n300"}, "c": {"n200"}}},
	}, {
		name:   "paused programs are resumed at once and marks are dropped",
		policy: defaultMode,
		pods:   []Pod{pod("a", 100)},
		progs: []*programBuilder{
			prog("r1", 500).on("a").marked(),
			prog("p1", 500).paused(ago),
		},
		want: outcome{Place: onPod("a", "p1"), Unmark: onPod("a", "r1")},
	}, {
		name:   "no serving pod: programs wait",
		policy: defaultMode,
		pods:   []Pod{notReadyPod("a", 1000)},
		progs:  []*programBuilder{prog("n1", 10).steps(1)},
		want:   outcome{Paused: ids("n1")},
	}, {
		name:   "overdue programs are simply placed, not force-resumed",
		policy: defaultMode,
		pods:   []Pod{pod("a", 1000)},
		progs:  []*programBuilder{prog("p1", 10).paused(t0.Add(-time.Hour))},
		want:   outcome{Place: onPod("a", "p1")},
	}})
}
