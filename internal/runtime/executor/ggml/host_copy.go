//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

var _ batch.OverlappingCopier = (*Executor)(nil)

// ReserveHostBlocks allocates the host tier: n blocks of every layer's keys
// and values (keys only for an MLA model's latents) in the cache's own type (a q8_0 block costs the host what it
// costs the device), in page-locked memory on a GPU (hostBytes).
// (Run on an H100 on 2026-11-26, TestEngineRestoresBesideIterations.)
func (e *Executor) ReserveHostBlocks(n, blockSize int) error {
	if err := batch.ValidateHostReserve(n, blockSize, e.blockSize); err != nil {
		return fmt.Errorf("ggml executor: %w", err)
	}
	if e.hostBuf != 0 {
		e.a.bufferFree(e.hostBuf)
		e.hostBuf, e.host = 0, nil
	}
	buf, host, err := e.hostBytes(n * e.hostBlockBytes())
	if err != nil {
		return fmt.Errorf("ggml executor: %d host blocks: %w", n, err)
	}
	e.hostBuf, e.host = buf, host
	e.hostBlocks = n
	return nil
}

// hostBlockBytes is one block's KV across all layers: keys, then values
// unless the cache keeps keys only (kvcache's BytesPerBlock of the
// cache's geometry).
func (e *Executor) hostBlockBytes() int { return int(e.kv.BytesPerBlock(e.blockSize)) }

// CopyBlocks copies whole blocks, every layer's keys and values (layerRows),
// in order. A block's keys are one contiguous run of the key tensor, and
// so are its values.
func (e *Executor) CopyBlocks(ctx context.Context, ts []kvcache.Transfer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := batch.ValidateTransfers(ts, e.numBlocks, e.hostBlocks); err != nil {
		return fmt.Errorf("ggml executor: %w", err)
	}
	run := e.blockSize * e.kvRow // one block of one layer's keys (or values)
	rows := e.kv.RowsPerLayer()
	for _, t := range ts {
		h := e.host[int(t.Host)*e.hostBlockBytes():]
		move := func(tensor cTensor, dst []byte) {
			p, off := unsafe.Pointer(&dst[0]), uintptr(int(t.Device)*run)
			if t.Kind == kvcache.CopyOut {
				e.a.tensorGet(tensor, p, off, uintptr(run))
			} else {
				e.a.tensorSet(tensor, p, off, uintptr(run))
			}
		}
		for j, l := range e.kvLayers {
			for i, tensor := range e.layerRows(l) {
				move(tensor, h[(rows*j+i)*run:(rows*j+i+1)*run])
			}
		}
	}
	return nil
}

// CopyBudget is no limit: the engine starts every queued copy beside the
// iteration and waits, after it, for what the iteration did not hide.
func (e *Executor) CopyBudget(*batch.Batch) int { return 0 }

// StartCopyBlocks runs the copies on a goroutine of its own, locked to its
// OS thread, while Execute computes; the engine guarantees the iteration
// touches none of the blocks they name. On the CPU they are memory copies
// on the other cores. On CUDA ggml copies a tensor's bytes with
// cudaMemcpyAsync on the calling thread's default stream
// (cudaStreamPerThread), which is not the backend's compute stream, from
// the page-locked host tier: so the copy engines move the blocks while the
// SMs run the batch. (On an H100 the tokens equalled those of the same
// schedule with the copies made inline: TestEngineRestoresBesideIterations.)
func (e *Executor) StartCopyBlocks(ctx context.Context, ts []kvcache.Transfer) {
	if e.copyDone == nil {
		e.copyDone = make(chan error, 1)
	}
	e.copying = true
	if e.inlineCopies {
		e.copyDone <- e.CopyBlocks(ctx, ts)
		return
	}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		e.copyDone <- e.CopyBlocks(ctx, ts)
	}()
}

// WaitCopyBlocks waits for the copies StartCopyBlocks started.
func (e *Executor) WaitCopyBlocks(context.Context) error {
	if !e.copying {
		return nil
	}
	e.copying = false
	return <-e.copyDone
}
