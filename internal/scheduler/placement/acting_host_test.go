package placement

import (
	"testing"
	"time"
)

// TestActingOnHost: on a pod with a host KV tier, ACTING programs are
// charged only for the share of their tokens that the tier's room cannot
// hold (Policy.ActingOnHost), so fewer programs wait.
func TestActingOnHost(t *testing.T) {
	ago := t0.Add(-10 * time.Second)
	withHost := func(name string, capacity, host int64) Pod {
		p := pod(name, capacity)
		p.HostTokens = host
		return p
	}
	acting := func() []*programBuilder {
		return []*programBuilder{prog("x", 600).on("a").acting(ago), prog("y", 300).on("a").acting(ago)}
	}
	runRounds(t, []roundCase{{
		name:   "the host tier holds the acting programs' KV: a held program resumes",
		policy: noBuffer,
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs:  append(acting(), prog("p", 500).paused(ago).held()),
		want:   outcome{Place: onPod("a", "p")},
	}, {
		name:   "off: acting programs take device room, the held program waits",
		policy: func(p *Policy) { noBuffer(p); p.ActingOnHost = false; p.DeviceOvercommit = 1 },
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs:  append(acting(), prog("p", 500).paused(ago).held()),
		want:   outcome{Paused: ids("p")},
	}, {
		name:   "no host tier: as before",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000)},
		progs:  append(acting(), prog("p", 500).paused(ago).held()),
		want:   outcome{Paused: ids("p")},
	}, {
		// 900 acting tokens, 300 of host room: 2/3 stay on the device (600),
		// 400 left, not enough for p.
		name:   "a host tier too small for them: the rest counts on the device",
		policy: noBuffer,
		pods:   []Pod{withHost("a", 1000, 300)},
		progs:  append(acting(), prog("p", 500).paused(ago).held()),
		want:   outcome{Paused: ids("p")},
	}, {
		// 100 tokens of room: 600 + 300 - 100 = 800 on the device, 200 left.
		name:   "enough host room for p's 100 after the KV of a paused program it keeps",
		policy: noBuffer,
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs: append(acting(), prog("kept", 900).paused(ago).acting(ago).cachedOn("a"),
			prog("p", 100).paused(ago).held()),
		want: outcome{Place: onPod("a", "p"), Paused: ids("kept")},
	}, {
		name:   "the same without the kept KV's room: p would not fit after kept",
		policy: noBuffer,
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs: append(acting(), prog("kept", 900).paused(ago).acting(ago).cachedOn("a"),
			prog("p", 300).paused(ago).held()),
		want: outcome{Paused: ids("kept", "p")},
	}})
}

// TestDeviceOvercommit: on a pod with a host KV tier, the programs placed
// may be charged up to DeviceOvercommit times its device capacity, the
// excess bounded by the tier's room (Policy.DeviceOvercommit).
func TestDeviceOvercommit(t *testing.T) {
	ago := t0.Add(-10 * time.Second)
	withHost := func(name string, capacity, host int64) Pod {
		p := pod(name, capacity)
		p.HostTokens = host
		return p
	}
	overcommit := func(f float64) func(*Policy) {
		return func(p *Policy) { noBuffer(p); p.DeviceOvercommit = f }
	}
	// 900 reasoning tokens on a 1000-token device: a held 500 does not fit.
	reasoning := func() []*programBuilder {
		return []*programBuilder{prog("x", 600).on("a"), prog("y", 300).on("a")}
	}
	runRounds(t, []roundCase{{
		name:   "off: the held program waits",
		policy: overcommit(1),
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs:  append(reasoning(), prog("p", 500).paused(ago).held()),
		want:   outcome{Paused: ids("p")},
	}, {
		name:   "2×: the device is charged up to 2000, p resumes",
		policy: overcommit(2),
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs:  append(reasoning(), prog("p", 500).paused(ago).held()),
		want:   outcome{Place: onPod("a", "p")},
	}, {
		name:   "1.3×: up to 1300, not enough for p",
		policy: overcommit(1.3),
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs:  append(reasoning(), prog("p", 500).paused(ago).held()),
		want:   outcome{Paused: ids("p")},
	}, {
		name:   "no host tier: never overcommitted",
		policy: overcommit(2),
		pods:   []Pod{pod("a", 1000)},
		progs:  append(reasoning(), prog("p", 500).paused(ago).held()),
		want:   outcome{Paused: ids("p")},
	}, {
		name:   "a host tier of 300: the excess is bounded by it",
		policy: overcommit(2),
		pods:   []Pod{withHost("a", 1000, 300)},
		progs:  append(reasoning(), prog("p", 500).paused(ago).held()),
		want:   outcome{Paused: ids("p")},
	}, {
		// Host 1000 less kept's 600 less the acting z's 100 (on host, so
		// charged nothing on the device): 300 of excess, capacity 1300;
		// 900 + 450 > 1300.
		name:   "the tier's room after the KV it keeps for a paused program and holds for an acting one",
		policy: overcommit(2),
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs: append(reasoning(), prog("z", 100).on("a").acting(ago), prog("kept", 600).paused(ago).acting(ago).cachedOn("a"),
			prog("p", 450).paused(ago).held()),
		want: outcome{Paused: ids("kept", "p")},
	}, {
		name:   "the same with a p of 400: it fits in 1300",
		policy: overcommit(2),
		pods:   []Pod{withHost("a", 1000, 1000)},
		progs: append(reasoning(), prog("z", 100).on("a").acting(ago), prog("kept", 600).paused(ago).acting(ago).cachedOn("a"),
			prog("p", 400).paused(ago).held()),
		want: outcome{Place: onPod("a", "p"), Paused: ids("kept")},
	}})
}
