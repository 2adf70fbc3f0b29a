package sim

import (
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

var _ batch.BlockIO = (*Executor)(nil)

// BlockFormat is the modelled KV geometry without contents: a simulated
// pod's blocks move between pods as token ids only (the engine fills in
// its block size).
func (e *Executor) BlockFormat() batch.BlockFormat {
	return batch.BlockFormat{Geometry: e.opts.Geometry.KV(), BlockSize: e.blockSize}
}

// ReadBlock moves nothing: the simulated KV has no contents.
func (e *Executor) ReadBlock(kvcache.Place, []byte) error { return nil }

// WriteBlock moves nothing: the simulated KV has no contents.
func (e *Executor) WriteBlock(kvcache.Place, []byte) error { return nil }
