package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Moving a program's KV between pods: the source pod reads the blocks of
// the program's cached context chunk by chunk (ExportBlocks), the
// destination writes them into its own cache as prefix-cache entries
// (ImportBlocks), so the program's next request there is a prefix hit
// instead of a recompute. Each call holds the engine between two
// iterations for one chunk only, so a long context moves without stalling
// the pod for its whole length.

// ErrNoBlockIO is returned by the export and import calls of an engine
// whose executor cannot read or write block contents (batch.BlockIO).
var ErrNoBlockIO = errors.New("engine: the executor cannot move KV blocks (no batch.BlockIO)")

// ErrRecurrentMove is returned by the export of an engine whose executor
// keeps recurrent states: its blocks alone do not resume a sequence.
var ErrRecurrentMove = errors.New("engine: a hybrid model's KV cannot move between pods: its recurrent states do not move yet")

// BlockFormat is what this engine's blocks hold, with its block size; ok is
// false when the executor cannot move blocks, or keeps recurrent states
// (a hybrid model's blocks alone do not resume a sequence, and moving
// states is not built).
func (e *Engine) BlockFormat() (f batch.BlockFormat, ok bool) {
	io, ok := e.exec.(batch.BlockIO)
	if !ok || e.slots != nil {
		return batch.BlockFormat{}, false
	}
	return e.format(io), true
}

// CachedChainBlocks is how many leading full blocks of tokens' chain under
// cacheSalt are cached on this engine (either tier): what an export of
// them would send.
func (e *Engine) CachedChainBlocks(salt kvcache.Salt, tokens []int32) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.kv.ChainPlaces(nil, salt, tokens, 0, len(tokens)/e.blockSize))
}

// ExportBlocks reads the contents of blocks from … from+n−1 of tokens'
// cached chain under salt into dst (reused when large enough), block after
// block, stopping at the first block that is not cached. It returns how
// many blocks it read and the bytes (n × BlockFormat().BlockBytes()).
func (e *Engine) ExportBlocks(ctx context.Context, salt kvcache.Salt, tokens []int32, from, n int, dst []byte) (int, []byte, error) {
	if e.slots != nil {
		return 0, dst, ErrRecurrentMove
	}
	io, ok := e.exec.(batch.BlockIO)
	if !ok {
		return 0, dst[:0], ErrNoBlockIO
	}
	size := e.blockBytes(io)
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	// A block just offloaded is still on its way to the host slot the
	// block manager names: every copy lands before anything is read.
	if err := e.settleCopies(ctx); err != nil {
		return 0, dst[:0], err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	places := e.kv.ChainPlaces(nil, salt, tokens, from, n)
	if cap(dst) < len(places)*size {
		dst = make([]byte, len(places)*size)
	}
	dst = dst[:len(places)*size]
	for i, p := range places {
		if err := io.ReadBlock(p, dst[i*size:(i+1)*size]); err != nil {
			return i, dst[:i*size], fmt.Errorf("engine: read KV block %d of the chain: %w", from+i, err)
		}
	}
	return len(places), dst, nil
}

// ImportBlocks writes blocks from … from+n−1 of tokens' chain under salt,
// whose contents (n × the block bytes of format) are data, into this
// engine's cache as prefix-cache entries (kvcache.Manager.Import): the
// blocks before from must be cached here already. format is the sending
// pod's (BlockFormat); blocks of another geometry, element type or block
// size are refused, changing nothing. It returns how many of the n blocks
// are now cached here: fewer when the cache has no room for the rest.
func (e *Engine) ImportBlocks(ctx context.Context, format batch.BlockFormat, salt kvcache.Salt, tokens []int32, from, n int, data []byte) (int, error) {
	io, ok := e.exec.(batch.BlockIO)
	if !ok {
		return 0, ErrNoBlockIO
	}
	own := e.format(io)
	if err := own.Compatible(format); err != nil {
		return 0, fmt.Errorf("engine: refusing KV blocks: %w", err)
	}
	size := e.blockBytes(io)
	if len(data) != n*size {
		return 0, fmt.Errorf("engine: %d KV blocks in %d bytes, want %d", n, len(data), n*size)
	}
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	imported, err := e.kv.Import(nil, salt, tokens, from, n)
	e.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	if len(imported) > 0 {
		e.signal() // an idle loop still runs the spills' copies
	}
	// The device blocks the import took may be spilling their old contents
	// to the host: those copies land before the new contents are written.
	if err := e.settleCopies(ctx); err != nil {
		e.mu.Lock()
		e.kv.DropImported(imported)
		e.mu.Unlock()
		return 0, err
	}
	for i, b := range imported {
		k := b.Index - from
		if err := io.WriteBlock(b.Place, data[k*size:(k+1)*size]); err != nil {
			e.mu.Lock()
			e.kv.DropImported(imported[i:])
			e.mu.Unlock()
			return b.Index - from, fmt.Errorf("engine: write KV block %d of the chain: %w", b.Index, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(0, len(e.kv.ChainPlaces(nil, salt, tokens, 0, from+n))-from), nil
}

// format is io's block format; an executor without contents leaves the
// block size to the engine.
func (e *Engine) format(io batch.BlockIO) batch.BlockFormat {
	f := io.BlockFormat()
	if f.BlockSize == 0 {
		f.BlockSize = e.blockSize
	}
	return f
}

// blockBytes is one block's size in io's format.
func (e *Engine) blockBytes(io batch.BlockIO) int { return e.format(io).BlockBytes() }

// settleCopies carries out every copy between the tiers that the block
// manager has decided, the overlap backlog's included, so the executor's
// memory holds what the block manager says it does. The caller holds
// stepMu, so no copy runs beside an iteration meanwhile.
func (e *Engine) settleCopies(ctx context.Context) error {
	if e.copier == nil {
		return nil
	}
	e.mu.Lock()
	xf := e.kv.Transfers()
	if len(xf) == 0 && (e.overlap == nil || len(e.overlap.backlog) == 0) {
		e.mu.Unlock()
		return nil
	}
	if e.overlap != nil {
		e.overlap.begin(len(xf))
	}
	e.xfer = append(e.xfer[:0], xf...)
	e.kv.ClearTransfers()
	if e.overlap != nil {
		e.xfer = e.overlap.split(e.xfer, true)
	}
	e.mu.Unlock()
	err := e.copyBlocks(ctx)
	if e.overlap != nil {
		if err != nil {
			e.mu.Lock()
			e.abandonCopiesLocked(err, e.clk.Now())
			e.mu.Unlock()
		} else {
			e.overlap.landedFlushed()
		}
	}
	return err
}
