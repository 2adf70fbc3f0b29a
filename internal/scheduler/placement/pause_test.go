package placement

import (
	"testing"
	"time"
)

func TestPauseUntilSafe(t *testing.T) {
	ago := t0.Add(-time.Minute)
	runRounds(t, []roundCase{{
		name:   "within capacity: nothing",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs:  []*programBuilder{prog("a1", 400).on("a").acting(ago), prog("r1", 500).on("a")},
		want:   outcome{},
	}, {
		name:   "exactly at capacity is not over it",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs:  []*programBuilder{prog("a1", 500).on("a").acting(ago), prog("r1", 500).on("a")},
		want:   outcome{},
	}, {
		name:   "ACTING programs paused smallest first, stopping once within capacity",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("a3", 300).on("a").acting(ago),
			prog("a1", 100).on("a").acting(ago),
			prog("a2", 200).on("a").acting(ago),
			prog("r1", 600).on("a"),
		},
		// 1200 − 100 − 200 = 900: a3 stays.
		want: outcome{Pause: onPod("a", "a1", "a2"), Paused: ids("a1", "a2")},
	}, {
		name:   "then REASONING programs marked smallest first",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("a1", 100).on("a").acting(ago),
			prog("r3", 500).on("a"),
			prog("r1", 300).on("a"),
			prog("r2", 400).on("a"),
		},
		// 1300 − 100 (a1) = 1200, − 300 (r1 marked) = 900.
		want: outcome{Pause: onPod("a", "a1"), Mark: onPod("a", "r1"), Paused: ids("a1")},
	}, {
		name:   "tokens already marked count as freed: nothing more is paused",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("a1", 100).on("a").acting(ago),
			prog("r1", 400).on("a").marked(),
			prog("r2", 700).on("a"),
		},
		want: outcome{},
	}, {
		name:   "marks the pod can spare are dropped, largest first",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("r1", 300).on("a").marked(),
			prog("r2", 500).on("a").marked(),
			prog("r3", 400).on("a"),
		},
		// 1200 used, 200 over: r1 alone covers it.
		want: outcome{Unmark: onPod("a", "r2")},
	}, {
		name:   "marks kept count before pausing more",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("r1", 300).on("a").marked(),
			prog("r2", 900).on("a"),
			prog("a1", 100).on("a").acting(ago),
			prog("a2", 150).on("a").acting(ago),
		},
		// 1450 − 300 marked = 1150: a1 then a2 paused.
		want: outcome{Pause: onPod("a", "a1", "a2"), Paused: ids("a1", "a2")},
	}, {
		name:   "back within capacity: every mark dropped",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("r1", 300).on("a").marked(),
			prog("a1", 200).on("a").acting(ago).marked(),
		},
		want: outcome{Unmark: onPod("a", "a1", "r1")},
	}, {
		name:   "a marked ACTING program is paused before smaller ones",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("a1", 100).on("a").acting(ago),
			prog("a2", 300).on("a").acting(ago).marked(),
			prog("r1", 800).on("a"),
		},
		want: outcome{Pause: onPod("a", "a2"), Paused: ids("a2")},
	}, {
		name:   "a stale mark on an ACTING program that stays is dropped",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("r1", 500).on("a").marked(),
			prog("r2", 600).on("a"),
			prog("a1", 100).on("a").acting(ago).marked(),
		},
		want: outcome{Unmark: onPod("a", "a1")},
	}, {
		name:   "each pod on its own",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000), pod("b", 1000)},
		progs: []*programBuilder{
			prog("a1", 600).on("a").acting(ago),
			prog("r1", 600).on("a"),
			prog("b1", 600).on("b").acting(ago),
		},
		want: outcome{Pause: onPod("a", "a1"), Paused: ids("a1")},
	}, {
		name:  "the buffer counts: pausing frees it too",
		pods:  []Pod{pod("a", 1000)},
		progs: []*programBuilder{prog("a1", 400).on("a").acting(ago), prog("r1", 450).on("a")},
		// 500 + 550 = 1050 > 1000.
		want: outcome{Pause: onPod("a", "a1"), Paused: ids("a1")},
	}, {
		name:   "programs resumed in a round are not paused by it",
		policy: withDecay,
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("a0", 500).on("a").acting(t0.Add(-time.Hour)), // decays to 0
			prog("held", 1500).paused(ago),
			prog("idle", 200).acting(ago).paused(ago),
		},
		// 2200 > 2000 undecayed: idle is the smallest ACTING program, but
		// it was just resumed; a0 goes.
		want: outcome{Place: onPod("a", "held", "idle"), Pause: onPod("a", "a0"), Paused: ids("a0")},
	}, {
		name:   "only REASONING programs: marks stop once they cover the excess",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs:  []*programBuilder{prog("r1", 700).on("a"), prog("r2", 800).on("a")},
		want:   outcome{Mark: onPod("a", "r1")},
	}})
}
