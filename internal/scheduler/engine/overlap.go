package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// overlap lets copies between the tiers run while iterations compute, with
// an executor that can (batch.OverlappingCopier).
//
// Run serially, a restore stalls the whole pod: a resumed program's 30k-token
// context is ~1,900 blocks, ~80 ms over PCIe Gen5, several decode iterations
// of every other sequence. So a sequence admitted with KV on the host tier
// loads: its copies (the copy-ins and the spills of the blocks it took) join
// a backlog that the executor works through beside the iterations, as many
// per iteration as it says it can carry without making the iteration wait
// (CopyBudget), in the order the block manager decided them; the sequence
// joins the batch once all of its copies have landed.
//
// Which copies may wait in the backlog is decided per transfer, so it is
// right whatever the block manager did. Every transfer has a number, in the
// block manager's order, and each device block and host slot remembers the
// last backlog transfer that names it. A candidate is a transfer decided
// before planning (offloads and restores between iterations) or by a loading
// sequence's admission; it goes to the backlog unless it names a device block
// the batch took while planning (a grown sequence's new blocks, an admitted
// one's table). Everything else runs before the iteration, after the backlog
// up to the last transfer it depends on (one naming its block or slot), and
// so does the backlog up to any transfer naming a block the batch took. The
// backlog keeps the block manager's order, so its transfers depend on each
// other as they were decided.
type overlap struct {
	copier batch.OverlappingCopier

	next    uint64   // number of the next transfer decided
	base    uint64   // number of this iteration's first transfer
	landed  uint64   // every transfer numbered ≤ landed has landed
	flushTo uint64   // backlog transfers numbered ≤ flushTo run before the batch
	backlog []queued // started ones first
	flushed int      // backlog[:flushed] runs before this iteration's batch
	started int      // backlog[:started] are with the executor
	cand    [][2]int // ranges of this iteration's transfers that may wait
	serial  []queued
	async   []kvcache.Transfer // scratch: what is started
	isAsync []bool
	loading int // sequences still loading at the last plan

	// devLast and hostLast: the number of the last backlog transfer naming
	// each device block and host slot; touched (== epoch): blocks this
	// iteration's batch took while planning.
	devLast, hostLast []uint64
	touched           []uint32
	epoch             uint32
}

type queued struct {
	t kvcache.Transfer
	n uint64
}

func newOverlap(c batch.OverlappingCopier, numBlocks, hostBlocks int) *overlap {
	return &overlap{copier: c, next: 1, devLast: make([]uint64, numBlocks), hostLast: make([]uint64, hostBlocks),
		touched: make([]uint32, numBlocks)}
}

// begin starts an iteration's planning; the first pre transfers were decided
// before it.
func (o *overlap) begin(pre int) {
	o.epoch++
	if o.epoch == 0 { // wrapped: old marks could match again
		clear(o.touched)
		o.epoch = 1
	}
	o.base, o.flushTo, o.loading = o.next, 0, 0
	o.cand = o.cand[:0]
	if pre > 0 {
		o.cand = append(o.cand, [2]int{0, pre})
	}
}

// ready reports whether s's copies have all landed.
func (o *overlap) ready(s *sequence) bool {
	if s.loadUntil <= o.landed {
		return true
	}
	o.loading++
	return false
}

// touch records device blocks that sequences of this iteration's batch took;
// backlog transfers naming them must land first.
func (o *overlap) touch(blocks []kvcache.BlockID) {
	for _, b := range blocks {
		o.touched[b] = o.epoch
		if n := o.devLast[b]; n > o.landed {
			o.flushTo = max(o.flushTo, n)
		}
	}
}

// load records that s loads, its admission having decided this iteration's
// transfers [from, to).
func (o *overlap) load(s *sequence, from, to int) {
	s.loadUntil = o.base + uint64(to) - 1
	o.loading++
	o.cand = append(o.cand, [2]int{from, to})
}

// split numbers this iteration's transfers xf, queues those that may wait
// and returns those that must run before the batch, in the order the
// block manager issued them: the backlog up to flushTo and the rest of
// xf. With all (an iteration with no batch) everything runs now.
func (o *overlap) split(xf []kvcache.Transfer, all bool) []kvcache.Transfer {
	o.isAsync = slices.Grow(o.isAsync[:0], len(xf))[:len(xf)]
	clear(o.isAsync)
	for _, r := range o.cand {
		for i := r[0]; i < r[1]; i++ {
			o.isAsync[i] = !all && o.touched[xf[i].Device] != o.epoch
		}
	}
	o.serial = o.serial[:0]
	for i, t := range xf {
		n := o.base + uint64(i)
		if o.isAsync[i] {
			o.backlog = append(o.backlog, queued{t, n})
			o.devLast[t.Device], o.hostLast[t.Host] = n, n
			continue
		}
		if d := max(o.devLast[t.Device], o.hostLast[t.Host]); d > o.landed {
			o.flushTo = max(o.flushTo, d)
		}
		o.serial = append(o.serial, queued{t, n})
	}
	o.next = o.base + uint64(len(xf))
	if all && len(o.backlog) > 0 {
		o.flushTo = o.backlog[len(o.backlog)-1].n
	}
	// The backlog's head up to flushTo runs first (the started part has
	// landed: the last iteration waited for it).
	k := 0
	for k < len(o.backlog) && o.backlog[k].n <= o.flushTo {
		k++
	}
	o.flushed = k
	// In transfer order: a flushed transfer of this iteration may come
	// after a serial one that it conflicts with (it copies a block out to
	// a host slot that the serial one first copies back in).
	out := xf[:0]
	for i, j := 0, 0; i < k || j < len(o.serial); {
		if j == len(o.serial) || (i < k && o.backlog[i].n < o.serial[j].n) {
			out = append(out, o.backlog[i].t)
			i++
			continue
		}
		out = append(out, o.serial[j].t)
		j++
	}
	return out
}

// landedFlushed records that the transfers split returned have landed.
func (o *overlap) landedFlushed() {
	o.backlog = append(o.backlog[:0], o.backlog[o.flushed:]...)
	o.flushed = 0
	o.setLanded()
}

// setLanded: every transfer numbered below the backlog's head has landed
// (those that never waited ran before their iteration).
func (o *overlap) setLanded() {
	o.landed = o.next - 1
	if len(o.backlog) > 0 {
		o.landed = o.backlog[0].n - 1
	}
}

// start hands the executor the head of the backlog, as much as it can carry
// beside b, and reports whether it started any.
func (o *overlap) start(ctx context.Context, b *batch.Batch) bool {
	budget := o.copier.CopyBudget(b)
	outs, ins, k := 0, 0, 0
	for ; k < len(o.backlog); k++ {
		if o.backlog[k].t.Kind == kvcache.CopyIn {
			ins++
		} else {
			outs++
		}
		if budget > 0 && max(outs, ins) > budget && k > 0 {
			break
		}
	}
	if k == 0 {
		return false
	}
	o.async = o.async[:0]
	for _, q := range o.backlog[:k] {
		o.async = append(o.async, q.t)
	}
	o.started = k
	o.copier.StartCopyBlocks(ctx, o.async)
	return true
}

// landedStarted records that the started transfers have landed.
func (o *overlap) landedStarted() {
	o.backlog = append(o.backlog[:0], o.backlog[o.started:]...)
	o.started = 0
	o.setLanded()
}

// waitCopies waits for the started copies.
func (e *Engine) waitCopies(ctx context.Context) error {
	o := e.overlap
	err := o.copier.WaitCopyBlocks(ctx)
	if err == nil {
		o.landedStarted()
		return nil
	}
	err = fmt.Errorf("iteration %d: copy %d KV blocks between device and host beside the iteration: %w", e.iter, len(o.async), err)
	if e.aborting() {
		e.log.Info("drain deadline passed during a KV block transfer; aborting the loading sequences", "iteration", e.iter, "transfers", len(o.async))
	} else {
		e.log.Error("KV block transfer failed; dropping the blocks and failing the loading sequences", "iteration", e.iter, "transfers", len(o.async), "err", err)
	}
	return err
}

// abandonCopiesLocked handles a failed copy: every transfer still in the
// backlog (started or not) is dropped as copyBlocks drops failed ones, and
// every sequence whose copies had not all landed fails. It returns how many
// it ended.
func (e *Engine) abandonCopiesLocked(err error, now time.Time) int {
	o := e.overlap
	failed := make([]kvcache.Transfer, len(o.backlog))
	for i, q := range o.backlog {
		failed[i] = q.t
	}
	e.kv.FailTransfers(failed)
	was := o.landed
	o.backlog, o.started, o.flushed, o.landed = o.backlog[:0], 0, 0, o.next-1
	n := 0
	for _, s := range e.running {
		if s.loadUntil <= was || s.state != stateRunning {
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
