package placement

import (
	"testing"
	"time"
)

func TestResume(t *testing.T) {
	ago := t0.Add(-time.Minute)
	runRounds(t, []roundCase{{
		name:   "held programs before new ones before idle ones",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("idle", 900).acting(ago).paused(ago),
			prog("new", 900).steps(1).paused(ago),
			prog("held", 900).paused(ago),
		},
		want: outcome{Place: onPod("a", "held"), Paused: ids("idle", "new")},
	}, {
		name:   "new programs before idle ones",
		policy: noAging,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("idle", 900).acting(ago).paused(ago),
			prog("new", 900).steps(1),
		},
		want: outcome{Place: onPod("a", "new"), Paused: ids("idle")},
	}, {
		name:   "an ACTING program whose request arrived is held",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("new", 900).steps(1).paused(ago),
			prog("held", 900).acting(ago).held().paused(ago),
		},
		want: outcome{Place: onPod("a", "held"), Paused: ids("new")},
	}, {
		name:   "smallest first onto the pod with the most room, re-chosen after each placement",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000), pod("b", 800)},
		progs: []*programBuilder{
			prog("p200", 200).paused(ago),
			prog("p300", 300).paused(ago),
			prog("p500", 500).paused(ago),
			prog("p600", 600).paused(ago),
		},
		// p200→a (a 800, b 800), p300→a (first by name on the tie; a 500),
		// p500→b (b 300), p600 fits nowhere and waits: three programs run
		// where largest first would run p600 and p500 and leave p300 and
		// p200 for the gaps.
		want: outcome{Place: map[string][]string{"a": {"p200", "p300"}, "b": {"p500"}}, Paused: ids("p600")},
	}, {
		name:   "a program goes back to the pod holding its cache when it fits there",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000), pod("b", 800)},
		progs: []*programBuilder{
			prog("p600", 600).paused(ago).cachedOn("b"),
			prog("p500", 500).paused(ago).cachedOn("b"),
			prog("p300", 300).paused(ago).cachedOn("gone"),
		},
		// p300's pod is gone: most room, a (a 700); p500→b (its cache; b
		// 300 left); p600 does not fit b: most room, a.
		want: outcome{Place: map[string][]string{"a": {"p300", "p600"}, "b": {"p500"}}},
	}, {
		name:   "cache affinity does not take a pod reserved for a higher class",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000), pod("b", 1000)},
		progs: []*programBuilder{
			prog("runA", 600).on("a"),
			prog("runB", 500).on("b"),
			prog("held", 700).paused(ago),
			prog("idle", 300).acting(ago).paused(ago).cachedOn("b"),
		},
		// held fits nowhere and reserves b (most room); idle may not use b
		// although its cache is there, and takes a.
		want: outcome{Place: onPod("a", "idle"), Paused: ids("held")},
	}, {
		name:  "a program exactly filling the remaining capacity fits",
		pods:  []Pod{pod("a", 1000)},
		progs: []*programBuilder{prog("r0", 400).on("a"), prog("p1", 400).paused(ago)},
		want:  outcome{Place: onPod("a", "p1")},
	}, {
		name:   "equal room: first pod by name",
		policy: noBuffer,
		pods:   []Pod{pod("b", 1000), pod("a", 1000)},
		progs:  []*programBuilder{prog("p1", 100).paused(ago)},
		want:   outcome{Place: onPod("a", "p1")},
	}, {
		name:   "equal size: first program by id",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs:  []*programBuilder{prog("p2", 600).paused(ago), prog("p1", 600).paused(ago)},
		want:   outcome{Place: onPod("a", "p1"), Paused: ids("p2")},
	}, {
		name:   "a program that fits nowhere waits; smaller ones of its class fill in",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("r0", 500).on("a"),
			prog("big", 800).paused(ago),
			prog("small", 400).paused(ago),
		},
		want: outcome{Place: onPod("a", "small"), Paused: ids("big")},
	}, {
		name:   "a waiting program reserves its pod against lower classes",
		policy: noAging,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("r0", 500).on("a"),
			prog("held", 800).paused(ago),
			prog("new", 50).steps(1).paused(ago),
		},
		want: outcome{Paused: ids("held", "new")},
	}, {
		name:   "lower classes still use the pods not reserved",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000), pod("b", 500)},
		progs: []*programBuilder{
			prog("ra", 600).on("a"),
			prog("rb", 300).on("b"),
			prog("held", 700).paused(ago),              // fits nowhere; reserves a (b is too small)
			prog("new300", 300).steps(1),               // would fit a's 400, not b's 200
			prog("new150", 150).steps(1),               // fits b
			prog("idle40", 40).acting(ago).paused(ago), // fits b's remaining 50
		},
		want: outcome{Place: onPod("b", "idle40", "new150"), Paused: ids("held", "new300")},
	}, {
		name:   "a program larger than every pod reserves nothing",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs: []*programBuilder{
			prog("huge", 5000).paused(ago),
			prog("new", 300).steps(1).paused(ago),
		},
		want: outcome{Place: onPod("a", "new"), Paused: ids("huge")},
	}, {
		name:   "decay off: a held program resumes as soon as it fits, not after the pause limit",
		policy: noBuffer,
		pods:   []Pod{pod("a", 10_000)},
		progs: []*programBuilder{
			prog("a0", 2000).on("a").acting(ago),
			prog("held", 3000).held().paused(t0.Add(-time.Second)),
		},
		want: outcome{Place: onPod("a", "held")},
	}, {
		name:  "a new program is placed",
		pods:  []Pod{pod("a", 10_000)},
		progs: []*programBuilder{prog("n1", 100).steps(1)},
		want:  outcome{Place: onPod("a", "n1")},
	}, {
		name:  "an active program on a pod gone from the snapshot is placed again",
		pods:  []Pod{pod("a", 10_000)},
		progs: []*programBuilder{prog("p1", 100).on("gone")},
		want:  outcome{Place: onPod("a", "p1")},
	}, {
		name: "a pod that is not ready gets nothing, and its programs are left alone",
		pods: []Pod{notReadyPod("a", 100)},
		progs: []*programBuilder{
			prog("a0", 5000).on("a").acting(ago).marked(),
			prog("p1", 10).paused(ago),
		},
		want: outcome{Paused: ids("p1")},
	}, {
		name:   "resume fits a waiting program's whole context: its sharing does not travel",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs:  []*programBuilder{prog("p1", 1200).shared(600).paused(ago)},
		want:   outcome{Paused: ids("p1")},
	}, {
		name:   "decay: resume sees long-acting programs decayed, then pauses them undecayed",
		policy: withDecay,
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("a0", 1500).on("a").acting(t0.Add(-10 * time.Second)),
			prog("held", 1000).paused(ago),
		},
		want: outcome{Place: onPod("a", "held"), Pause: onPod("a", "a0"), Paused: ids("a0")},
	}, {
		name:   "decay off: the same snapshot resumes nothing",
		policy: noBuffer,
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("a0", 1500).on("a").acting(t0.Add(-10 * time.Second)),
			prog("held", 1000).paused(ago),
		},
		want: outcome{Paused: ids("held")},
	}, {
		name: "decay with a long half-life barely decays",
		policy: func(p *Policy) {
			withDecay(p)
			p.ActingDecay.HalfLife = time.Hour
		},
		pods: []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("a0", 1500).on("a").acting(t0.Add(-10 * time.Second)),
			prog("held", 1000).paused(ago),
		},
		want: outcome{Paused: ids("held")},
	}, {
		name:   "decay applies to ACTING programs only",
		policy: withDecay,
		pods:   []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r0", 1500).on("a"),
			prog("held", 1000).paused(ago),
		},
		want: outcome{Paused: ids("held")},
	}})
}

// TestResumeWaitsForCache: a paused program whose KV cache is on a pod
// without room now waits for that pod (up to Policy.CacheAffinityWait)
// instead of being resumed elsewhere and recomputing its whole context.
// noAging is noBuffer with classes that do not age: the cases that wait a
// minute (ago) would otherwise move up a class (DefaultWaitAging).
func noAging(p *Policy) { noBuffer(p); p.WaitAging = 0 }

// fullMeansFull is noBuffer without device overcommit: these cases are about
// a pod whose device is full, which with overcommit its host tier would
// relieve at once.
func fullMeansFull(p *Policy) { noBuffer(p); p.DeviceOvercommit = 1 }

func TestResumeWaitsForCache(t *testing.T) {
	recent := t0.Add(-10 * time.Second)
	long := t0.Add(-DefaultCacheAffinityWait - time.Second)
	full := func() *programBuilder { return prog("runB", 700).on("b") }
	runRounds(t, []roundCase{{
		name:   "waits for the pod holding its cache while that pod is full",
		policy: fullMeansFull,
		pods:   []Pod{hostPod("a", 1000), hostPod("b", 1000)},
		progs:  []*programBuilder{full(), prog("p", 500).paused(recent).cachedOn("b")},
		want:   outcome{Paused: ids("p")},
	}, {
		name:   "goes back to the pod holding its cache once it fits there",
		policy: fullMeansFull,
		pods:   []Pod{hostPod("a", 1000), hostPod("b", 1000)},
		progs:  []*programBuilder{prog("runB", 400).on("b"), prog("p", 500).paused(recent).cachedOn("b")},
		want:   outcome{Place: onPod("b", "p")},
	}, {
		name:   "past the affinity wait it is resumed where it fits",
		policy: fullMeansFull,
		pods:   []Pod{hostPod("a", 1000), hostPod("b", 1000)},
		progs:  []*programBuilder{full(), prog("p", 500).paused(long).cachedOn("b")},
		want:   outcome{Place: onPod("a", "p")},
	}, {
		name:   "affinity wait off: resumed where it fits at once",
		policy: func(p *Policy) { noBuffer(p); p.CacheAffinityWait = 0; p.DeviceOvercommit = 1 },
		pods:   []Pod{hostPod("a", 1000), hostPod("b", 1000)},
		progs:  []*programBuilder{full(), prog("p", 500).paused(recent).cachedOn("b")},
		want:   outcome{Place: onPod("a", "p")},
	}, {
		name:   "the holding pod has no host tier (its KV is likely evicted): resumed where it fits at once",
		policy: fullMeansFull,
		pods:   []Pod{pod("a", 1000), pod("b", 1000)},
		progs:  []*programBuilder{full(), prog("p", 500).paused(recent).cachedOn("b")},
		want:   outcome{Place: onPod("a", "p")},
	}, {
		name:   "no known cache: resumed where it fits at once",
		policy: fullMeansFull,
		pods:   []Pod{hostPod("a", 1000), hostPod("b", 1000)},
		progs:  []*programBuilder{full(), prog("p", 500).paused(recent)},
		want:   outcome{Place: onPod("a", "p")},
	}, {
		name:   "the holding pod is draining: resumed where it fits at once",
		policy: fullMeansFull,
		pods:   []Pod{hostPod("a", 1000), drainingPod("b", 1000)},
		progs:  []*programBuilder{prog("p", 500).paused(recent).cachedOn("b")},
		want:   outcome{Place: onPod("a", "p")},
	}, {
		name: "overdue under the fairness bound: room is made on the pod holding its cache",
		policy: func(p *Policy) {
			fullMeansFull(p)
			p.FairnessBound = 5 * time.Second
		},
		pods: []Pod{hostPod("a", 1000), hostPod("b", 1000)},
		progs: []*programBuilder{
			prog("runA", 600).on("a").running(long),
			full().running(long),
			prog("p", 500).paused(recent).held().cachedOn("b"),
		},
		// p fits neither pod; freeing either leaves 500, so a would win
		// by name, but b holds p's cache: runB is marked there.
		want: outcome{Mark: onPod("b", "runB"), FairnessPaused: ids("runB"), Paused: ids("p")},
	}})
}

// hostPod is a pod with a host KV tier as large as its device cache.
func hostPod(name string, capacity int64) Pod {
	p := pod(name, capacity)
	p.HostTokens = capacity
	return p
}
