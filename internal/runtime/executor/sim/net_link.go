package sim

import (
	"math"
	"time"
)

// NetLink is a node's network interface to the pool's other nodes (two
// 200 Gb/s NICs on an HGX node: 50e9 bytes/s each way), over which a pod
// moves a program's KV to a pod on another node. Like a HostLink, each
// direction carries one transfer at a time, in the order they start, so
// the GPUs of a node moving KV at once share it. It is safe for
// concurrent use.
type NetLink struct {
	// Bandwidth is bytes/s in each direction.
	Bandwidth float64

	link HostLink
}

// netLatency is the fixed cost of one transfer: the request over the
// control port and the stream's first bytes.
const netLatency = 200 * time.Microsecond

// KVTransferTime books moving tokens tokens of this executor's KV from a
// pod behind from to a pod behind to, starting at the executor's time (the
// receiving pod's), and returns how long until it has landed: out of
// from's link and into to's, each at its Bandwidth and taking its turn. A
// nil link is not charged; two pods behind the same link (one node) copy
// over NVLink or PCIe, which this does not model, and are charged the
// link's turn like any other.
func (e *Executor) KVTransferTime(tokens int, from, to *NetLink) time.Duration {
	if tokens <= 0 {
		return 0
	}
	bytes := float64(tokens) * float64(e.opts.Geometry.KVBytesPerToken())
	now := e.now()
	end := now
	for dir, l := range [2]*NetLink{from, to} {
		if l == nil || l.Bandwidth <= 0 {
			continue
		}
		busy := time.Duration(math.Ceil(bytes / l.Bandwidth * float64(time.Second)))
		if t := l.link.reserve(dir, now, busy); t.After(end) {
			end = t
		}
	}
	return end.Sub(now) + netLatency
}
