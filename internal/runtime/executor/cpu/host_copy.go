package cpu

import (
	"context"
	"fmt"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

var _ batch.OverlappingCopier = (*Executor)(nil)

// ReserveHostBlocks allocates the host tier: n blocks of every layer's keys
// and values, laid out like the device cache. On this executor both live in
// the same memory, so a transfer is a copy between two Go slices; what it
// buys is what it buys on a GPU, that a paused program's KV survives its
// device blocks being reused.
func (e *Executor) ReserveHostBlocks(n, blockSize int) error {
	if err := batch.ValidateHostReserve(n, blockSize, e.blockSize); err != nil {
		return fmt.Errorf("cpu executor: %w", err)
	}
	slots := n * blockSize * e.kvDim
	e.hostK, e.hostV = make([][]float32, e.cfg.Layers), make([][]float32, e.cfg.Layers)
	for i := range e.cfg.Layers {
		e.hostK[i], e.hostV[i] = make([]float32, slots), make([]float32, slots)
	}
	e.hostBlocks = n
	return nil
}

// CopyBlocks copies whole blocks, every layer's keys and values, in order.
func (e *Executor) CopyBlocks(ctx context.Context, ts []kvcache.Transfer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := batch.ValidateTransfers(ts, e.numBlocks, e.hostBlocks); err != nil {
		return fmt.Errorf("cpu executor: %w", err)
	}
	span := e.blockSize * e.kvDim
	for _, t := range ts {
		d, h := int(t.Device)*span, int(t.Host)*span
		for l := range e.cfg.Layers {
			if t.Kind == kvcache.CopyOut {
				copy(e.hostK[l][h:h+span], e.kCache[l][d:d+span])
				copy(e.hostV[l][h:h+span], e.vCache[l][d:d+span])
			} else {
				copy(e.kCache[l][d:d+span], e.hostK[l][h:h+span])
				copy(e.vCache[l][d:d+span], e.hostV[l][h:h+span])
			}
		}
	}
	return nil
}

// CopyBudget is no limit: a copy here is a memory copy on another core, and
// the engine waits for it after the iteration anyway.
func (e *Executor) CopyBudget(*batch.Batch) int { return 0 }

// StartCopyBlocks copies on another goroutine while Execute computes: the
// engine guarantees the iteration touches none of the blocks they name, so
// the two write disjoint parts of the caches.
func (e *Executor) StartCopyBlocks(ctx context.Context, ts []kvcache.Transfer) {
	if e.copyDone == nil {
		e.copyDone = make(chan error, 1)
	}
	e.copying = true
	go func() { e.copyDone <- e.CopyBlocks(ctx, ts) }()
}

// WaitCopyBlocks waits for the copies StartCopyBlocks started.
func (e *Executor) WaitCopyBlocks(context.Context) error {
	if !e.copying {
		return nil
	}
	e.copying = false
	return <-e.copyDone
}
