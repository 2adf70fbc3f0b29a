package placement

import (
	"testing"
	"time"
)

// moving makes pods able to move KV, at bytes per token.
func moving(bytesPerToken int64, pods ...Pod) []Pod {
	for i := range pods {
		pods[i].KVBytesPerToken = bytesPerToken
	}
	return pods
}

func withHost(p Pod, host int64) Pod { p.HostTokens = host; return p }

func withMaxModelLen(p Pod, n int64) Pod { p.MaxModelLen = n; return p }

// Llama-3-8B's KV in bf16: 128 KiB a token.
const llama8B = 128 << 10

func TestKVMoves(t *testing.T) {
	waited := t0.Add(-10 * time.Second)
	full := prog("busy", 9_900).on("a")
	cases := []roundCase{{
		name:  "a program leaving a draining pod fetches its KV from it",
		pods:  moving(llama8B, drainingPod("a", 10_000), pod("b", 10_000)),
		progs: []*programBuilder{prog("a1", 500).on("a").acting(waited)},
		want: outcome{Pause: onPod("a", "a1"), Place: onPod("b", "a1"),
			Fetch: map[string][]Fetch{"b": {{Program: "a1", From: "a"}}}},
	}, {
		name:  "a program waiting for room on the pod holding its KV moves there instead of waiting",
		pods:  moving(llama8B, withHost(pod("a", 10_000), 50_000), pod("b", 10_000)),
		progs: []*programBuilder{full, prog("p1", 2_000).paused(waited).cachedOn("a").held()},
		want:  outcome{Place: onPod("b", "p1"), Fetch: map[string][]Fetch{"b": {{Program: "p1", From: "a"}}}},
	}, {
		name:  "without moves it waits for its pod (cache affinity)",
		pods:  []Pod{withHost(pod("a", 10_000), 50_000), pod("b", 10_000)},
		progs: []*programBuilder{full, prog("p1", 2_000).paused(waited).cachedOn("a").held()},
		want:  outcome{Paused: ids("p1")},
	}, {
		name:   "when the transfer takes longer than the wait left, it waits",
		policy: func(p *Policy) { p.KVTransferBandwidth = 2_000 * llama8B / 10 }, // 2,000 tokens in 10 s
		pods:   moving(llama8B, withHost(pod("a", 10_000), 50_000), pod("b", 10_000)),
		progs:  []*programBuilder{full, prog("p1", 2_000).paused(t0.Add(-55 * time.Second)).cachedOn("a").held()},
		want:   outcome{Paused: ids("p1")},
	}, {
		name:   "a transfer slower than recomputing is not asked for",
		policy: func(p *Policy) { p.PrefillTokensPerSecond = 1e9 },
		pods:   moving(llama8B, drainingPod("a", 10_000), pod("b", 10_000)),
		progs:  []*programBuilder{prog("a1", 500).on("a").acting(waited)},
		want:   outcome{Pause: onPod("a", "a1"), Place: onPod("b", "a1")},
	}, {
		name:  "pods of different KV sizes move nothing",
		pods:  []Pod{{Name: "a", Ready: true, Draining: true, CapacityTokens: 10_000, KVBytesPerToken: llama8B}, {Name: "b", Ready: true, CapacityTokens: 10_000, KVBytesPerToken: 2 * llama8B}},
		progs: []*programBuilder{prog("a1", 500).on("a").acting(waited)},
		want:  outcome{Pause: onPod("a", "a1"), Place: onPod("b", "a1")},
	}, {
		name:  "a context longer than the receiving pod serves moves nothing: the pod would refuse it",
		pods:  moving(llama8B, withMaxModelLen(drainingPod("a", 10_000), 8_192), withMaxModelLen(pod("b", 10_000), 499)),
		progs: []*programBuilder{prog("a1", 500).on("a").acting(waited)},
		want:  outcome{Pause: onPod("a", "a1"), Place: onPod("b", "a1")},
	}, {
		name:  "a context that fits moves to a pod of a shorter max model length",
		pods:  moving(llama8B, withMaxModelLen(drainingPod("a", 10_000), 8_192), withMaxModelLen(pod("b", 10_000), 500)),
		progs: []*programBuilder{prog("a1", 500).on("a").acting(waited)},
		want: outcome{Pause: onPod("a", "a1"), Place: onPod("b", "a1"),
			Fetch: map[string][]Fetch{"b": {{Program: "a1", From: "a"}}}},
	}, {
		name:   "moves off",
		policy: func(p *Policy) { p.KVTransferBandwidth = 0 },
		pods:   moving(llama8B, drainingPod("a", 10_000), pod("b", 10_000)),
		progs:  []*programBuilder{prog("a1", 500).on("a").acting(waited)},
		want:   outcome{Pause: onPod("a", "a1"), Place: onPod("b", "a1")},
	}, {
		name:  "a program resumed where its KV is fetches nothing",
		pods:  moving(llama8B, withHost(pod("a", 10_000), 50_000), pod("b", 10_000)),
		progs: []*programBuilder{prog("p1", 2_000).paused(waited).cachedOn("a").held()},
		want:  outcome{Place: onPod("a", "p1")},
	}}
	// Pod a's host tier must not raise its device capacity: the program
	// would then fit there.
	for i := range cases {
		edit := cases[i].policy
		cases[i].policy = func(p *Policy) {
			p.DeviceOvercommit = 1
			p.KVTransferBandwidth = DefaultKVTransferBandwidth
			if edit != nil {
				edit(p)
			}
		}
	}
	runRounds(t, cases)
}

func TestKVMovePolicyValidation(t *testing.T) {
	p := DefaultPolicy()
	if p.KVTransferBandwidth != 0 {
		t.Fatal("transfers are on by default; docs/benchmarks.md says why they are not")
	}
	p.KVTransferBandwidth = DefaultKVTransferBandwidth
	p.PrefillTokensPerSecond = 0
	if p.Validate() == nil {
		t.Fatal("transfers on with no prefill rate: valid")
	}
	p.KVTransferBandwidth = 0
	if err := p.Validate(); err != nil {
		t.Fatalf("transfers off with no prefill rate: %v", err)
	}
	p.KVTransferBandwidth = -1
	if p.Validate() == nil {
		t.Fatal("negative bandwidth: valid")
	}
}

// A scheduler reused for the next round forgets the last round's fetches.
func TestKVFetchesAreOneRounds(t *testing.T) {
	p := DefaultPolicy()
	p.KVTransferBandwidth = DefaultKVTransferBandwidth
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	snap := Snapshot{Pods: moving(llama8B, drainingPod("a", 10_000), pod("b", 10_000)),
		Programs: programs(prog("a1", 500).on("a").acting(t0))}
	d, err := s.Decide(snap, t0)
	if err != nil || len(d.Pod("b").Fetch) != 1 {
		t.Fatalf("first round: %+v, %v", d.Pod("b"), err)
	}
	snap.Programs = programs(prog("a1", 500).on("b").acting(t0))
	d, err = s.Decide(snap, t0.Add(time.Second))
	if err != nil || len(d.Pod("b").Fetch) != 0 {
		t.Fatalf("second round: %+v, %v", d.Pod("b"), err)
	}
}
