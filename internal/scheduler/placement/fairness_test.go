package placement

import (
	"testing"
	"time"
)

func withFairness(bound time.Duration) func(*Policy) {
	return func(p *Policy) {
		p.BufferTokensPerProgram = 0
		p.FairnessBound = bound
	}
}

func TestFairnessBound(t *testing.T) {
	const bound = 2 * time.Minute
	long, short := t0.Add(-10*time.Minute), t0.Add(-time.Minute)
	overdue := t0.Add(-bound - time.Second)
	runRounds(t, []roundCase{{
		name:   "off: an overdue program waits while others run",
		policy: withFairness(0),
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r1", 1000).on("a").acting(short).running(long),
			prog("r2", 1000).on("a").running(short),
			prog("w", 800).held().paused(overdue),
		},
		want: outcome{Paused: ids("w")},
	}, {
		name:   "an ACTING program that ran longest is paused and the overdue one takes its room",
		policy: withFairness(bound),
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r1", 1000).on("a").acting(short).running(long),
			prog("r2", 1000).on("a").acting(short).running(t0.Add(-5 * time.Minute)),
			prog("w", 800).held().paused(overdue),
		},
		want: outcome{
			Place:          onPod("a", "w"),
			Pause:          onPod("a", "r1"),
			Paused:         ids("r1"),
			FairnessPaused: ids("r1"),
		},
	}, {
		name:   "a REASONING program is marked, never paused mid-request; the overdue one waits for its tool call",
		policy: withFairness(bound),
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r1", 1000).on("a").running(long),
			prog("r2", 1000).on("a").running(short),
			prog("w", 800).held().paused(overdue),
		},
		want: outcome{
			Mark:           onPod("a", "r1"),
			Paused:         ids("w"),
			FairnessPaused: ids("r1"),
		},
	}, {
		name:   "the mark is kept in the next round, though the pod is within capacity, and no second victim is taken",
		policy: withFairness(bound),
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r1", 1000).on("a").running(long).marked(),
			prog("r2", 1000).on("a").running(long.Add(time.Second)),
			prog("w", 800).held().paused(overdue),
		},
		want: outcome{Paused: ids("w")},
	}, {
		name:   "programs that ran less than one bound are not paused for fairness",
		policy: withFairness(bound),
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r1", 1000).on("a").acting(short).running(short),
			prog("r2", 1000).on("a").acting(short),
			prog("w", 800).held().paused(overdue),
		},
		want: outcome{Paused: ids("w")},
	}, {
		name:   "a program waiting less than the bound does not pause anyone",
		policy: withFairness(bound),
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r1", 1000).on("a").acting(short).running(long),
			prog("r2", 1000).on("a").acting(short).running(long),
			prog("w", 800).held().paused(t0.Add(-bound)),
		},
		want: outcome{Paused: ids("w")},
	}, {
		name:   "idle programs (no request waiting) never pause anyone",
		policy: withFairness(bound),
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r1", 1000).on("a").acting(short).running(long),
			prog("r2", 1000).on("a").acting(short).running(long),
			prog("w", 800).acting(t0.Add(-time.Hour)).paused(overdue),
		},
		want: outcome{Paused: ids("w")},
	}, {
		name:   "the pod that fits best once its longest runner leaves",
		policy: withFairness(bound),
		pods:   []Pod{pod("a", 2000), pod("b", 2000)},
		progs: []*programBuilder{
			// a frees 1500 for 800 (700 left over), b frees 900 (100 left).
			prog("a1", 1500).on("a").acting(short).running(long),
			prog("a2", 500).on("a").running(short),
			prog("b1", 900).on("b").acting(short).running(long),
			prog("b2", 1100).on("b").running(short),
			prog("w", 800).held().paused(overdue),
		},
		want: outcome{
			Place:          onPod("b", "w"),
			Pause:          onPod("b", "b1"),
			Paused:         ids("b1"),
			FairnessPaused: ids("b1"),
		},
	}, {
		name:   "overdue programs resume before larger ones and before higher classes",
		policy: withFairness(bound),
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("big", 900).held().paused(short),
			prog("old", 600).steps(1).held().paused(overdue),
		},
		want: outcome{Place: onPod("a", "old"), Paused: ids("big")},
	}})
}

// ResumeFirstAfter: within a class programs resume smallest first, so the
// largest waits longest; one that has waited past the limit goes first.
func TestResumeFirstAfter(t *testing.T) {
	first := func(d time.Duration) func(*Policy) {
		return func(p *Policy) { p.BufferTokensPerProgram, p.WaitAging, p.ResumeFirstAfter = 0, 0, d }
	}
	snap := []*programBuilder{
		prog("small", 300).held().paused(t0.Add(-time.Minute)),
		prog("large", 800).held().paused(t0.Add(-6 * time.Minute)),
	}
	runRounds(t, []roundCase{{
		name:   "off: smallest first, the large one waits",
		policy: first(0),
		pods:   []Pod{pod("a", 1000)},
		progs:  snap,
		want:   outcome{Place: onPod("a", "small"), Paused: ids("large")},
	}, {
		name:   "the large one waited past the limit and goes first",
		policy: first(5 * time.Minute),
		pods:   []Pod{pod("a", 1000)},
		progs:  snap,
		want:   outcome{Place: onPod("a", "large"), Paused: ids("small")},
	}, {
		name:   "not past the limit yet",
		policy: first(10 * time.Minute),
		pods:   []Pod{pod("a", 1000)},
		progs:  snap,
		want:   outcome{Place: onPod("a", "small"), Paused: ids("large")},
	}})
}

func TestWaitAging(t *testing.T) {
	aging := func(a time.Duration) func(*Policy) {
		return func(p *Policy) { p.BufferTokensPerProgram = 0; p.WaitAging = a }
	}
	snap := []*programBuilder{
		prog("held", 900).held().paused(t0.Add(-time.Minute)),
		// New (class 1) but waiting 10 minutes.
		prog("fresh", 600).steps(1).held().paused(t0.Add(-10 * time.Minute)),
	}
	runRounds(t, []roundCase{{
		name:   "off: classes alone order the resume",
		policy: aging(0),
		pods:   []Pod{pod("a", 1000)},
		progs:  snap,
		want:   outcome{Place: onPod("a", "held"), Paused: ids("fresh")},
	}, {
		name:   "a program that waited long enough is aged into the held class, smaller first",
		policy: aging(5 * time.Minute),
		pods:   []Pod{pod("a", 1000)},
		progs:  snap,
		want:   outcome{Place: onPod("a", "fresh"), Paused: ids("held")},
	}, {
		name:   "not yet aged",
		policy: aging(15 * time.Minute),
		pods:   []Pod{pod("a", 1000)},
		progs:  snap,
		want:   outcome{Place: onPod("a", "held"), Paused: ids("fresh")},
	}})
}

func TestPolicyRejectsNegativeFairness(t *testing.T) {
	for _, edit := range []func(*Policy){
		func(p *Policy) { p.WaitAging = -time.Second },
		func(p *Policy) { p.FairnessBound = -time.Second },
		func(p *Policy) { p.ResumeFirstAfter = -time.Second },
	} {
		if _, err := New(policyWith(edit)); err == nil {
			t.Errorf("New accepted %+v", policyWith(edit))
		}
	}
}
