package batch

import (
	"context"
	"fmt"

	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// BlockCopier is implemented by executors that can move KV blocks between
// their device memory and a host-memory tier: the engine needs it when the
// block manager has a host tier (kvcache.Config.HostBlocks), to offload the
// KV of paused programs instead of letting it be evicted and recomputed.
//
// Contract:
//   - The engine owns both namespaces: device block ids (the same ones block
//     tables name) and host slots 0 … n−1. The executor never chooses a
//     block or a slot; it owns only the memory behind them.
//   - ReserveHostBlocks(n, blockSize) is called once, before any
//     CopyBlocks, with the host tier's size in blocks of blockSize tokens;
//     the executor allocates host memory for n blocks of every layer's keys
//     and values (page-locked memory on a GPU, so copies can use DMA). An
//     error fails engine construction.
//   - CopyBlocks carries out transfers in order, each moving one whole
//     block (all layers, keys and values): kvcache.CopyOut reads device block
//     Device and writes host slot Host, kvcache.CopyIn the reverse. Order
//     matters: a later transfer may overwrite a block or slot an earlier one
//     reads. When CopyBlocks returns, every copy has landed (an executor that
//     overlaps copies with compute must make its next Execute wait for them).
//   - Copies are plain overwrites, so carrying out the same list again gives
//     the same memory: CopyBlocks is idempotent and may be retried.
//   - An error means no transfer of the list can be trusted: the engine drops
//     the cached contents they moved (kvcache.Manager.FailTransfers) and fails
//     the iteration's requests, as for an Execute error.
//   - CopyBlocks is never called concurrently with itself or with Execute;
//     the engine calls it at the start of an iteration, before Execute, so a
//     device block copied out is read before anything can write it again,
//     and a block copied in holds its KV before a sequence reads it.
//   - The transfers slice is reused by the engine after CopyBlocks returns.
type BlockCopier interface {
	ReserveHostBlocks(n, blockSize int) error
	CopyBlocks(ctx context.Context, transfers []kvcache.Transfer) error
}

// ValidateHostReserve checks ReserveHostBlocks' arguments against the
// executor's device block size.
func ValidateHostReserve(n, blockSize, deviceBlockSize int) error {
	if blockSize != deviceBlockSize {
		return fmt.Errorf("host blocks of %d tokens, device blocks of %d", blockSize, deviceBlockSize)
	}
	if n < 0 {
		return fmt.Errorf("%d host blocks", n)
	}
	return nil
}

// ValidateTransfers checks every transfer's kind and addresses against the
// executor's numBlocks device blocks and hostBlocks host slots, before any
// is copied.
func ValidateTransfers(ts []kvcache.Transfer, numBlocks, hostBlocks int) error {
	for _, t := range ts {
		if t.Device < 0 || int(t.Device) >= numBlocks || t.Host < 0 || int(t.Host) >= hostBlocks {
			return fmt.Errorf("%v of block %d and host slot %d: outside %d blocks and %d host slots",
				t.Kind, t.Device, t.Host, numBlocks, hostBlocks)
		}
		if t.Kind != kvcache.CopyOut && t.Kind != kvcache.CopyIn {
			return fmt.Errorf("transfer of kind %v", t.Kind)
		}
	}
	return nil
}

// OverlappingCopier is a BlockCopier that can carry out copies while an
// iteration computes: a GPU's copy engines move blocks over the host link
// while its SMs run the batch, so a restore need not stall every sequence of
// the pod for the length of the copy.
//
// Contract, on top of BlockCopier's:
//   - CopyBudget(b) is how many blocks each way the executor can copy while
//     Execute(b) runs without making it wait (≤ 0: no limit). The engine
//     starts that many of the copies it has queued (at least one).
//   - StartCopyBlocks begins transfers, to be carried out in order while the
//     engine's next Execute runs. The engine guarantees that this Execute
//     neither reads nor writes a device block they name, and it does not
//     touch the slice until WaitCopyBlocks returns.
//   - WaitCopyBlocks returns when every started copy has landed, with their
//     error (the same meaning as CopyBlocks'). The engine calls it after that
//     Execute (also when Execute failed) and before any other call that
//     touches the executor's KV; the copies' time the iteration did not hide
//     is spent here.
//   - CopyBlocks keeps its meaning: copies an iteration needs (those of
//     blocks its sequences read or write) still run before it.
type OverlappingCopier interface {
	BlockCopier
	CopyBudget(b *Batch) int
	StartCopyBlocks(ctx context.Context, transfers []kvcache.Transfer)
	WaitCopyBlocks(ctx context.Context) error
}
