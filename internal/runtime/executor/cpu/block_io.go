package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

var _ batch.BlockIO = (*Executor)(nil)

// BlockFormat is float32 keys and values (KVGeometry) in blocks of the
// executor's size.
func (e *Executor) BlockFormat() batch.BlockFormat {
	return batch.BlockFormat{Geometry: KVGeometry(e.cfg), BlockSize: e.blockSize, Contents: true}
}

// ReadBlock encodes the block at p, layer by layer, keys then values.
func (e *Executor) ReadBlock(p kvcache.Place, dst []byte) error {
	return e.blockIO(p, dst, false)
}

// WriteBlock decodes src into the block at p.
func (e *Executor) WriteBlock(p kvcache.Place, src []byte) error {
	return e.blockIO(p, src, true)
}

func (e *Executor) blockIO(p kvcache.Place, buf []byte, write bool) error {
	if err := batch.ValidatePlace(p, e.numBlocks, e.hostBlocks); err != nil {
		return fmt.Errorf("cpu executor: %w", err)
	}
	span := e.blockSize * e.kvDim
	if want := 2 * e.cfg.Layers * span * 4; len(buf) != want {
		return fmt.Errorf("cpu executor: block of %d bytes, want %d", len(buf), want)
	}
	k, v, off := e.kCache, e.vCache, int(p.Block)*span
	if p.OnHost {
		k, v, off = e.hostK, e.hostV, int(p.Slot)*span
	}
	for l := range e.cfg.Layers {
		for i, rows := range [2][]float32{k[l][off : off+span], v[l][off : off+span]} {
			b := buf[(2*l+i)*span*4:]
			for j := range rows {
				if write {
					rows[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
				} else {
					binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(rows[j]))
				}
			}
		}
	}
	return nil
}
