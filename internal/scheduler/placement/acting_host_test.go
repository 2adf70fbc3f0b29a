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
		policy: func(p *Policy) { noBuffer(p); p.ActingOnHost = false },
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
