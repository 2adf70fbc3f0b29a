package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// ErrRecurrentMove is returned by the export and import calls of an
// engine whose executor keeps recurrent states (a hybrid model's) when its
// states cannot move: the executor cannot read or write them
// (batch.StateIO), or the engine keeps no checkpoints (prefix caching off,
// or CheckpointNone), so blocks alone would resume nothing.
var ErrRecurrentMove = errors.New("engine: a hybrid model's KV moves with its recurrent-state checkpoints, which this engine cannot move (no batch.StateIO, or no checkpoints kept)")

// ErrNoCheckpointSlot is returned by ImportState when every checkpoint
// slot holds a running sequence's state.
var ErrNoCheckpointSlot = errors.New("engine: no free recurrent-state checkpoint slot")

// BlockFormat is what this engine's blocks (and, for a hybrid model, its
// recurrent states) hold, with its block size; ok is false when the
// executor cannot move blocks, or keeps recurrent states it cannot move
// (ErrRecurrentMove).
func (e *Engine) BlockFormat() (f batch.BlockFormat, ok bool) {
	_, _, f, err := e.moveIO()
	return f, err == nil
}

// moveIO is the executor's block and state IO (sio nil for a model
// without states) and the format they move, or why they cannot.
func (e *Engine) moveIO() (io batch.BlockIO, sio batch.StateIO, f batch.BlockFormat, err error) {
	io, ok := e.exec.(batch.BlockIO)
	if !ok {
		return nil, nil, f, ErrNoBlockIO
	}
	f = io.BlockFormat()
	if f.BlockSize == 0 {
		f.BlockSize = e.blockSize // an executor without contents leaves it to the engine
	}
	if e.slots == nil {
		return io, nil, f, nil
	}
	sio, ok = e.exec.(batch.StateIO)
	if !ok || sio.StateBytes() <= 0 || e.slots.ck == nil {
		return nil, nil, batch.BlockFormat{}, ErrRecurrentMove
	}
	f.StateBytes = sio.StateBytes()
	return io, sio, f, nil
}

// CachedChainBlocks is how many leading full blocks of tokens' chain under
// cacheSalt are cached on this engine (either tier): what an export of
// them would send. For a hybrid model it is as far as the deepest
// recurrent-state checkpoint within them: a destination resumes from that
// checkpoint, so the blocks past it would resume nothing.
func (e *Engine) CachedChainBlocks(salt kvcache.Salt, tokens []int32) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.kv.ChainPlaces(nil, salt, tokens, 0, len(tokens)/e.blockSize))
	if e.slots != nil {
		n, _ = e.slots.ck.deepest(salt, tokens, e.blockSize, n)
	}
	return n
}

// ExportBlocks reads the contents of blocks from … from+n−1 of tokens'
// cached chain under salt into dst (reused when large enough), block after
// block, stopping at the first block that is not cached. It returns how
// many blocks it read and the bytes (n × BlockFormat().BlockBytes()).
func (e *Engine) ExportBlocks(ctx context.Context, salt kvcache.Salt, tokens []int32, from, n int, dst []byte) (int, []byte, error) {
	io, _, format, err := e.moveIO()
	if err != nil {
		return 0, dst[:0], err
	}
	size := format.BlockBytes()
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
	io, _, own, err := e.moveIO()
	if err != nil {
		return 0, err
	}
	if err := own.Compatible(format); err != nil {
		return 0, fmt.Errorf("engine: refusing KV blocks: %w", err)
	}
	size := own.BlockBytes()
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

// A hybrid model's program moves with its recurrent-state checkpoint: the
// source reads the deepest checkpoint within the chain it sent
// (ExportState), the destination installs it as a checkpoint keyed the
// same (ImportState), so the program's next request there resumes from
// it as from one of its own (state_slots.go).

// ExportState reads into dst (reused when large enough) the deepest
// recurrent-state checkpoint of tokens' chain under salt within its first
// maxBlocks blocks: the state after its first k blocks. It returns k (0:
// no checkpoint, or a model without states) and the bytes
// (BlockFormat().StateBytes).
func (e *Engine) ExportState(ctx context.Context, salt kvcache.Salt, tokens []int32, maxBlocks int, dst []byte) (int, []byte, error) {
	_, sio, _, err := e.moveIO()
	if err != nil || sio == nil {
		return 0, dst[:0], err
	}
	maxBlocks = min(maxBlocks, len(tokens)/e.blockSize)
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	// A checkpoint just moved to the host lands there before it is read.
	if err := e.settleStatesLocked(sio); err != nil {
		return 0, dst[:0], err
	}
	k, idx := e.slots.ck.deepest(salt, tokens, e.blockSize, maxBlocks)
	if k == 0 {
		return 0, dst[:0], nil
	}
	if cap(dst) < sio.StateBytes() {
		dst = make([]byte, sio.StateBytes())
	}
	dst = dst[:sio.StateBytes()]
	if err := sio.ReadState(e.slots.ck.slot(idx), dst); err != nil {
		return 0, dst[:0], fmt.Errorf("engine: read the recurrent state after %d blocks: %w", k, err)
	}
	return k, dst, nil
}

// ImportState installs data, a recurrent state in format (the sending
// pod's BlockFormat), as the checkpoint after the first k blocks of
// tokens' chain under salt, whose blocks must be cached here already
// (ImportBlocks): the next request extending them resumes from it. It
// takes a free or the least recently used checkpoint slot no running
// sequence owns, on the device when it can (a valid checkpoint there
// spills to the host tier as an eviction does), else on the host; with
// none it returns ErrNoCheckpointSlot. A state of another format is
// refused, changing nothing.
func (e *Engine) ImportState(ctx context.Context, format batch.BlockFormat, salt kvcache.Salt, tokens []int32, k int, data []byte) error {
	_, sio, own, err := e.moveIO()
	if err != nil {
		return err
	}
	if err := own.Compatible(format); err != nil {
		return fmt.Errorf("engine: refusing a recurrent state: %w", err)
	}
	switch {
	case sio == nil:
		return errors.New("engine: a recurrent state for a model that keeps none")
	case len(data) != own.StateBytes:
		return fmt.Errorf("engine: a recurrent state of %d bytes, want %d", len(data), own.StateBytes)
	case k <= 0 || k > len(tokens)/e.blockSize:
		return fmt.Errorf("engine: a recurrent state after %d blocks of a %d-token chain", k, len(tokens))
	}
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if got := len(e.kv.ChainPlaces(nil, salt, tokens, 0, k)); got < k {
		return fmt.Errorf("engine: a recurrent state after %d blocks, %d of them cached here", k, got)
	}
	// Copies decided before may read or write the slot this one takes.
	if err := e.settleStatesLocked(sio); err != nil {
		return err
	}
	h := newPrefixHasher(salt)
	h.add(tokens[:k*e.blockSize])
	idx, spill, spilled, ok := e.slots.ck.take(h.k)
	if !ok {
		return ErrNoCheckpointSlot
	}
	if idx < 0 {
		return nil // already checkpointed here
	}
	if spilled {
		if err := e.copyStatesLocked(sio, []batch.StateCopy{spill}); err != nil {
			return err
		}
		e.slots.spilled++
	}
	if err := sio.WriteState(e.slots.ck.slot(idx), data); err != nil {
		return fmt.Errorf("engine: write the recurrent state after %d blocks: %w", k, err)
	}
	e.slots.ck.install(idx, h.k)
	e.slots.imported++
	return nil
}

// settleStatesLocked carries out the state copies decided between
// iterations (a paused program's checkpoint moving to the host), which
// otherwise wait for the next iteration, so every checkpoint slot holds
// the state its key names.
func (e *Engine) settleStatesLocked(sio batch.StateIO) error {
	err := e.copyStatesLocked(sio, e.slots.pending)
	e.slots.pending = e.slots.pending[:0]
	return err
}

// copyStatesLocked copies states between slots through host memory, in
// order; after a failure the checkpoints the copies were writing are
// dropped (their slots hold no state).
func (e *Engine) copyStatesLocked(sio batch.StateIO, copies []batch.StateCopy) error {
	if len(copies) == 0 {
		return nil
	}
	e.stateBuf = slices.Grow(e.stateBuf[:0], sio.StateBytes())[:sio.StateBytes()]
	for i, cp := range copies {
		err := sio.ReadState(cp.From, e.stateBuf)
		if err == nil {
			err = sio.WriteState(cp.To, e.stateBuf)
		}
		if err != nil {
			e.slots.ck.failCopies(copies[i:])
			return fmt.Errorf("engine: copy recurrent state %d → %d: %w", cp.From, cp.To, err)
		}
	}
	return nil
}
