package sim

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

var _ batch.OverlappingCopier = (*Executor)(nil)

// transferLatency is the fixed cost of one batch of block copies: DMA
// launches and the synchronisation before the next iteration.
const transferLatency = 10 * time.Microsecond

// ReserveHostBlocks records the host tier's size; the simulated device has no
// memory to allocate, but copies are checked against it.
func (e *Executor) ReserveHostBlocks(n, blockSize int) error {
	if n < 0 || blockSize <= 0 {
		return fmt.Errorf("sim: %d host blocks of %d tokens", n, blockSize)
	}
	if e.opts.Accelerator.HostLinkBandwidth <= 0 {
		return fmt.Errorf("sim: accelerator %q has no host link bandwidth for KV offload", e.opts.Accelerator.Name)
	}
	e.hostBlocks, e.blockSize = n, blockSize
	return nil
}

// TransferTime is the modelled duration of moving out blocks to the host and
// in blocks back: each device of the replica moves its shard of every block
// over its own host link, both directions at once (PCIe is full duplex), at
// BandwidthEfficiency of the link's peak.
func (e *Executor) TransferTime(out, in int) time.Duration {
	if out == 0 && in == 0 {
		return 0
	}
	perBlock := float64(e.blockSize) * float64(e.opts.Geometry.KVBytesPerTokenPerDevice(e.opts.TensorParallel))
	bw := e.opts.Accelerator.HostLinkBandwidth * e.opts.BandwidthEfficiency
	sec := float64(max(out, in)) * perBlock / bw
	return time.Duration(math.Ceil(sec*float64(time.Second))) + transferLatency
}

// HostLink is a link to host memory that several devices share: the uplink
// of a PCIe switch with two GPUs behind it, or a node's host memory. Each
// direction carries one device's copy at a time at Bandwidth × the
// executor's BandwidthEfficiency, in the order the copies start, so two
// devices copying at once each get about half. A copy ends when its bytes
// have crossed the device's own link and every shared link on its path.
// Devices of one simulation share a HostLink from their own virtual clocks,
// which the caller keeps within an iteration of each other; it is safe for
// concurrent use.
type HostLink struct {
	// Bandwidth is bytes/s in each direction.
	Bandwidth float64

	mu   sync.Mutex
	free [2]time.Time // when each direction (out, in) is next free
}

// reserve books d of the link's direction dir from at (or from when it is
// free, if later) and returns when that ends.
func (l *HostLink) reserve(dir int, at time.Time, d time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := at
	if l.free[dir].After(start) {
		start = l.free[dir]
	}
	l.free[dir] = start.Add(d)
	return l.free[dir]
}

// now is the executor's time: its virtual clock's when it has one that
// tells the time, else the wall clock.
func (e *Executor) now() time.Time {
	if c, ok := e.opts.Virtual.(interface{ Now() time.Time }); ok {
		return c.Now()
	}
	return time.Now()
}

// linkTime is how long copies of out blocks to the host and in blocks back,
// starting now, take over the device's own link and the shared ones
// (Options.HostLinks), which it books.
func (e *Executor) linkTime(out, in int) time.Duration {
	d := e.TransferTime(out, in)
	if len(e.opts.HostLinks) == 0 || d == 0 {
		return d
	}
	now := e.now()
	end := now.Add(d)
	perBlock := float64(e.blockSize) * float64(e.opts.Geometry.KVBytesPerTokenPerDevice(e.opts.TensorParallel))
	for _, l := range e.opts.HostLinks {
		bw := l.Bandwidth * e.opts.BandwidthEfficiency
		for dir, n := range [2]int{out, in} {
			if n == 0 || bw <= 0 {
				continue
			}
			busy := time.Duration(math.Ceil(float64(n) * perBlock / bw * float64(time.Second)))
			if t := l.reserve(dir, now, busy); t.After(end) {
				end = t
			}
		}
	}
	return end.Sub(now)
}

// CopyBlocks charges the copies' time on the host link; the simulated KV has
// no contents to move.
func (e *Executor) CopyBlocks(ctx context.Context, ts []kvcache.Transfer) error {
	d, err := e.copyTime(ts)
	if err != nil {
		return err
	}
	e.busy.Copy += d
	e.busy.CopyStall += d
	if e.opts.Virtual != nil {
		e.opts.Virtual.Advance(d)
		return nil
	}
	return sleep(ctx, d)
}

// CopyBudget is how many blocks each way the host link moves in b's step
// time.
func (e *Executor) CopyBudget(b *batch.Batch) int {
	per := e.TransferTime(1, 1) - transferLatency
	return max(1, int((e.StepTime(b)-transferLatency)/per))
}

// StartCopyBlocks starts the copies on the host link, which runs them while
// the next Execute computes (a GPU's copy engines work beside its SMs; the
// few percent of HBM bandwidth the copies take are not charged).
func (e *Executor) StartCopyBlocks(ctx context.Context, ts []kvcache.Transfer) {
	d, err := e.copyTime(ts)
	e.async = asyncCopy{pending: true, d: d, err: err, start: time.Now()}
	if err == nil {
		e.busy.Copy += d
	}
}

// WaitCopyBlocks waits for the link: the started copies' time less the
// compute that ran since they started.
func (e *Executor) WaitCopyBlocks(ctx context.Context) error {
	a := e.async
	e.async = asyncCopy{}
	if !a.pending || a.err != nil {
		return a.err
	}
	if e.opts.Virtual != nil {
		if rest := a.d - a.overlapped; rest > 0 {
			e.busy.CopyStall += rest
			e.opts.Virtual.Advance(rest)
		}
		return nil
	}
	rest := a.d - time.Since(a.start)
	if rest > 0 {
		e.busy.CopyStall += rest
	}
	return sleep(ctx, rest)
}

// asyncCopy is the copies StartCopyBlocks started.
type asyncCopy struct {
	pending    bool
	d          time.Duration // their time on the link
	overlapped time.Duration // virtual compute time since they started
	start      time.Time     // when they started, in real time
	err        error
}

// copyTime checks the transfers and models their time on the host link.
func (e *Executor) copyTime(ts []kvcache.Transfer) (time.Duration, error) {
	out, in := 0, 0
	for _, t := range ts {
		if int(t.Host) >= e.hostBlocks || t.Host < 0 || t.Device < 0 {
			return 0, fmt.Errorf("sim: transfer %v of block %d and host slot %d outside the %d reserved host blocks", t.Kind, t.Device, t.Host, e.hostBlocks)
		}
		switch t.Kind {
		case kvcache.CopyOut:
			out++
		case kvcache.CopyIn:
			in++
		default:
			return 0, fmt.Errorf("sim: transfer of kind %v", t.Kind)
		}
	}
	return e.linkTime(out, in), nil
}
