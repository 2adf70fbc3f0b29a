package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// overlap lets copies between the tiers run while an iteration computes,
// with an executor that can (batch.OverlappingCopier).
//
// Run serially, a restore stalls the whole pod: a resumed program's 30k-token
// context is ~1,900 blocks, ~80 ms over PCIe Gen5, several decode iterations
// of every other sequence. So a sequence admitted with KV on the host tier
// does not join the batch it was admitted in: it is loading, its copies (the
// copy-ins and the spills of the blocks it took) run during that batch, and
// it joins the next one, when they have landed.
//
// Which copies may overlap is decided per transfer, so it is right whatever
// the block manager did: a candidate is a transfer decided before planning
// (offloads and restores between iterations) or by a loading sequence's
// admission; it runs serially instead if it names a device block the batch
// took while planning (a grown sequence's new blocks, an admitted one's
// table), or if a serial transfer decided after it names the same block or
// host slot (which must see it done). Serial transfers run first, the others
// while Execute runs; all have landed before anything else touches the KV.
type overlap struct {
	copier batch.OverlappingCopier

	loading []*sequence // admitted this iteration, joining the next
	cand    [][2]int    // ranges of this iteration's transfers that may overlap
	async   []kvcache.Transfer
	serial  []kvcache.Transfer
	isAsync []bool

	// Per-iteration marks (== epoch): device blocks the batch took while
	// planning, and the blocks and slots of serial transfers seen so far
	// in split's backward pass.
	epoch              uint32
	touched, dev, host []uint32
}

func newOverlap(c batch.OverlappingCopier, numBlocks, hostBlocks int) *overlap {
	return &overlap{copier: c, touched: make([]uint32, numBlocks), dev: make([]uint32, numBlocks), host: make([]uint32, hostBlocks)}
}

// begin starts an iteration's planning; the first pre transfers were decided
// before it.
func (o *overlap) begin(pre int) {
	o.epoch++
	if o.epoch == 0 { // wrapped: old marks could match again
		clear(o.touched)
		clear(o.dev)
		clear(o.host)
		o.epoch = 1
	}
	clear(o.loading)
	o.loading, o.cand, o.async = o.loading[:0], o.cand[:0], o.async[:0]
	if pre > 0 {
		o.cand = append(o.cand, [2]int{0, pre})
	}
}

// touch records device blocks that sequences of this iteration's batch took.
func (o *overlap) touch(blocks []kvcache.BlockID) {
	for _, b := range blocks {
		o.touched[b] = o.epoch
	}
}

// load records s as loading, its admission having decided transfers
// [from, to).
func (o *overlap) load(s *sequence, from, to int) {
	o.loading = append(o.loading, s)
	o.cand = append(o.cand, [2]int{from, to})
}

// split keeps in o.async the transfers of xf that may run during the batch
// and returns the others, in order, to run before it.
func (o *overlap) split(xf []kvcache.Transfer) []kvcache.Transfer {
	o.isAsync = append(o.isAsync[:0], make([]bool, len(xf))...)
	for _, r := range o.cand {
		for i := r[0]; i < r[1]; i++ {
			o.isAsync[i] = o.touched[xf[i].Device] != o.epoch
		}
	}
	for i := len(xf) - 1; i >= 0; i-- {
		t := xf[i]
		if o.isAsync[i] && (o.dev[t.Device] == o.epoch || o.host[t.Host] == o.epoch) {
			o.isAsync[i] = false
		}
		if !o.isAsync[i] {
			o.dev[t.Device], o.host[t.Host] = o.epoch, o.epoch
		}
	}
	o.serial = o.serial[:0]
	for i, t := range xf {
		if o.isAsync[i] {
			o.async = append(o.async, t)
		} else {
			o.serial = append(o.serial, t)
		}
	}
	return append(xf[:0], o.serial...)
}

// start begins the overlapping copies, if any.
func (o *overlap) start(ctx context.Context) bool {
	if len(o.async) == 0 {
		return false
	}
	o.copier.StartCopyBlocks(ctx, o.async)
	return true
}

// waitCopies waits for the overlapping copies; when they failed, the
// contents they moved are dropped from the cache, as copyBlocks does.
func (e *Engine) waitCopies(ctx context.Context) error {
	o := e.overlap
	err := o.copier.WaitCopyBlocks(ctx)
	if err == nil {
		return nil
	}
	e.mu.Lock()
	e.kv.FailTransfers(o.async)
	e.mu.Unlock()
	err = fmt.Errorf("iteration %d: copy %d KV blocks between device and host during the iteration: %w", e.iter, len(o.async), err)
	if e.aborting() {
		e.log.Info("drain deadline passed during a KV block transfer; aborting the loading sequences", "iteration", e.iter, "transfers", len(o.async))
	} else {
		e.log.Error("KV block transfer failed; dropping the blocks and failing the loading sequences", "iteration", e.iter, "transfers", len(o.async), "err", err)
	}
	return err
}

// failLoadingLocked ends the loading sequences whose KV could not be copied
// in; it returns how many it ended.
func (e *Engine) failLoadingLocked(loading []*sequence, err error, now time.Time) int {
	n := 0
	for _, s := range loading {
		if s.state != stateRunning {
			continue
		}
		if e.aborting() {
			e.finishLocked(s, completion.Cancelled, ErrStopped, now)
		} else {
			e.finishLocked(s, completion.Error, err, now)
		}
		n++
	}
	if n > 0 {
		e.compactRunningLocked()
	}
	return n
}

// copiesIn reports whether xf brings any block back from the host tier.
func copiesIn(xf []kvcache.Transfer) bool {
	for _, t := range xf {
		if t.Kind == kvcache.CopyIn {
			return true
		}
	}
	return false
}
