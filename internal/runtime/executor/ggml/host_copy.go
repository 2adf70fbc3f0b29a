//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

var _ batch.BlockCopier = (*Executor)(nil)

// ReserveHostBlocks allocates the host tier: n blocks of every layer's keys
// and values, in page-locked memory on a GPU (hostFloats). (Page-locked
// host memory has not run on a GPU here: it came after the H100 run.)
func (e *Executor) ReserveHostBlocks(n, blockSize int) error {
	if err := batch.ValidateHostReserve(n, blockSize, e.blockSize); err != nil {
		return fmt.Errorf("ggml executor: %w", err)
	}
	if e.hostBuf != 0 {
		e.a.bufferFree(e.hostBuf)
		e.hostBuf, e.host = 0, nil
	}
	buf, host, err := e.hostFloats(n * e.hostBlockFloats())
	if err != nil {
		return fmt.Errorf("ggml executor: %d host blocks: %w", n, err)
	}
	e.hostBuf, e.host = buf, host
	e.hostBlocks = n
	return nil
}

// hostBlockFloats is one block's KV across all layers: keys, then values.
func (e *Executor) hostBlockFloats() int { return 2 * e.cfg.Layers * e.blockSize * e.kvDim }

// CopyBlocks copies whole blocks, every layer's keys and values, in order.
// A block's keys are one contiguous run of the key tensor, and so are its
// values.
func (e *Executor) CopyBlocks(ctx context.Context, ts []kvcache.Transfer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := batch.ValidateTransfers(ts, e.numBlocks, e.hostBlocks); err != nil {
		return fmt.Errorf("ggml executor: %w", err)
	}
	bs, kv := e.blockSize, e.kvDim
	for _, t := range ts {
		h := e.host[int(t.Host)*e.hostBlockFloats():]
		move := func(tensor cTensor, off int, dst []float32) {
			p, size := unsafe.Pointer(&dst[0]), uintptr(4*len(dst))
			if t.Kind == kvcache.CopyOut {
				e.a.tensorGet(tensor, p, uintptr(4*off), size)
			} else {
				e.a.tensorSet(tensor, p, uintptr(4*off), size)
			}
		}
		d := int(t.Device) * bs
		for l := range e.cfg.Layers {
			lk := h[2*l*bs*kv:]
			move(e.kc[l], d*kv, lk[:bs*kv])
			move(e.vc[l], d*kv, lk[bs*kv:2*bs*kv])
		}
	}
	return nil
}
