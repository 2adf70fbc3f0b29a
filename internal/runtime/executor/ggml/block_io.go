//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

var _ batch.BlockIO = (*Executor)(nil)

// BlockFormat is the cache's geometry and type (KV) in blocks of the
// executor's size.
func (e *Executor) BlockFormat() batch.BlockFormat {
	return batch.BlockFormat{Geometry: e.kv, BlockSize: e.blockSize, Contents: true}
}

// ReadBlock copies the block at p, layer by layer, keys then values (keys
// only for an MLA model's latents): a device block's runs come from the
// backend's tensors, a host slot is already laid out so (CopyBlocks).
func (e *Executor) ReadBlock(p kvcache.Place, dst []byte) error {
	return e.blockIO(p, dst, false)
}

// WriteBlock overwrites the block at p with src.
func (e *Executor) WriteBlock(p kvcache.Place, src []byte) error {
	return e.blockIO(p, src, true)
}

func (e *Executor) blockIO(p kvcache.Place, buf []byte, write bool) error {
	if err := batch.ValidatePlace(p, e.numBlocks, e.hostBlocks); err != nil {
		return fmt.Errorf("ggml executor: %w", err)
	}
	size := e.hostBlockBytes()
	if len(buf) != size {
		return fmt.Errorf("ggml executor: block of %d bytes, want %d", len(buf), size)
	}
	if p.OnHost {
		h := e.host[int(p.Slot)*size : (int(p.Slot)+1)*size]
		if write {
			copy(h, buf)
		} else {
			copy(buf, h)
		}
		return nil
	}
	run := e.blockSize * e.kvRow
	off := uintptr(int(p.Block) * run)
	rows := e.kv.RowsPerLayer()
	for j, l := range e.kvLayers {
		for i, tensor := range e.layerRows(l) {
			b := unsafe.Pointer(&buf[(rows*j+i)*run])
			if write {
				e.a.tensorSet(tensor, b, off, uintptr(run))
			} else {
				e.a.tensorGet(tensor, b, off, uintptr(run))
			}
		}
	}
	return nil
}
