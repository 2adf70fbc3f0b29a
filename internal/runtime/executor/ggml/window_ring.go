//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// The window cache (Options.WindowCache): a sliding-window layer keeps,
// per sequence, only the keys and values its window can still reach, in
// a ring of cells = window + chunk rows of the sequence's state slot
// (batch.Seq.State), as llama.cpp's iSWA cache keeps a second cache of
// n_swa + n_ubatch cells for them. Position p lives in cell p mod cells;
// chunk bounds the tokens one sequence takes in one iteration
// (MaxSeqTokens, which the engine honours), so that an iteration's writes
// never overwrite a position one of its own tokens still sees: token t
// sees positions (t-window, t], and the chunk's last write, at most
// chunk-1 positions after t, lands window+chunk-1 cells ahead of the
// oldest of them at most.
//
// A ring, like a recurrent state, cannot be cut back to an earlier
// position, so the executor is a batch.StateKeeper: the engine gives each
// running sequence a slot, resumes prefix hits from checkpoints (whole
// slots copied, batch.StateCopy) and keeps checkpoints on the host tier.
// The paged cache (KVGeometry's Layers) then holds the full-attention
// layers only: gpt-oss's cache in blocks is half as large a token.
//
// A cell's position is not stored: after an iteration that ends at
// position end (exclusive), cell c holds the last position before end
// that is c modulo cells. A token at t sees cell c when that position p
// exists, p ≤ t and t - p < window: today's visibility rule
// (attn_window.go), over the ring's cells in cell order.

// DefaultWindowChunk is Options.WindowChunk's default: llama.cpp's
// default micro-batch (n_ubatch), which its iSWA cache adds to the window.
const DefaultWindowChunk = 512

// windowRing is the sliding layers' rings.
type windowRing struct {
	// layer says per layer whether it keeps a ring (a sliding layer).
	layer []bool
	// window is the model's; chunk the most tokens a sequence takes in
	// one iteration; cells = window + chunk, one slot's ring.
	window, chunk, cells int
	// k[l] and v[l] are [kvDim, slots·cells]: slot s's ring is rows
	// s·cells … (s+1)·cells-1. 0 at the other layers.
	k, v []cTensor
}

// newWindowRing is the rings of the sliding layers (nil: none).
func newWindowRing(sliding []bool, window, chunk int) *windowRing {
	if sliding == nil {
		return nil
	}
	if chunk <= 0 {
		chunk = DefaultWindowChunk
	}
	return &windowRing{layer: sliding, window: window, chunk: chunk, cells: window + chunk}
}

// layers is how many layers keep a ring.
func (r *windowRing) layers() int {
	n := 0
	for _, s := range r.layer {
		if s {
			n++
		}
	}
	return n
}

// slotBytes is one slot's rings, keys and values of every sliding layer,
// at kvRow bytes a cell (0 for no ring).
func (r *windowRing) slotBytes(kvRow int64) int64 {
	if r == nil {
		return 0
	}
	return 2 * int64(r.layers()) * int64(r.cells) * kvRow
}

// WindowKVGeometry is the paged KV cache of m with the window cache on:
// KVGeometry's, less the sliding-window layers, which keep rings
// (WindowStateBytes a slot) instead.
func WindowKVGeometry(m *model.Model, d kvcache.DType) kvcache.Geometry {
	g := KVGeometry(m, d)
	if s := slidingLayers(m.Config); s != nil {
		g.Layers -= newWindowRing(s, m.Config.SlidingWindow, 0).layers()
	}
	return g
}

// WindowStateBytes is one state slot's rings with the window cache on, for
// a chunk of chunk tokens (0: DefaultWindowChunk) and cache type d; 0 for
// a model without sliding layers. The runtime carves the slots out of the
// KV budget, as it does recurrent states (arch.Config.StateBytes).
func WindowStateBytes(m *model.Model, d kvcache.DType, chunk int) int64 {
	g := KVGeometry(m, d)
	return newWindowRing(slidingLayers(m.Config), m.Config.SlidingWindow, chunk).slotBytes(g.RowBytes())
}

// MaxSeqTokens is the most tokens one sequence may take in one iteration
// (batch.ChunkLimiter): the rings' chunk with the window cache, else 0
// (no bound).
func (e *Executor) MaxSeqTokens() int {
	if e.ring == nil {
		return 0
	}
	return e.ring.chunk
}

var _ batch.ChunkLimiter = (*Executor)(nil)

// stateBytes is one state slot: the recurrent layers' states and the
// rings.
func (e *Executor) stateBytes() int64 {
	return e.cfg.StateBytes() + e.ring.slotBytes(int64(e.kvRow))
}

// allocRings adds the rings' tensors to ctx and returns their parts of a
// state slot.
func (e *Executor) allocRings(ctx cCtx) []statePart {
	r := e.ring
	if r == nil {
		return nil
	}
	rows := int64(e.stateSlots) * int64(r.cells)
	r.k, r.v = make([]cTensor, e.cfg.Layers), make([]cTensor, e.cfg.Layers)
	var parts []statePart
	for l, on := range r.layer {
		if !on {
			continue
		}
		r.k[l] = e.a.newTensor2d(ctx, e.kvType, int64(e.kvDim), rows)
		r.v[l] = e.a.newTensor2d(ctx, e.kvType, int64(e.kvDim), rows)
		row := r.cells * e.kvRow
		parts = append(parts, statePart{r.k[l], row}, statePart{r.v[l], row})
	}
	return parts
}

// checkRing refuses a batch whose sequence takes more tokens than a ring
// holds beside the window.
func (e *Executor) checkRing(b *batch.Batch) error {
	if e.ring == nil {
		return nil
	}
	for i := range b.Seqs {
		if n := len(b.Seqs[i].Tokens); n > e.ring.chunk {
			return fmt.Errorf("sequence %d: %d tokens in one iteration, more than the window cache's chunk of %d", b.Seqs[i].SeqID, n, e.ring.chunk)
		}
	}
	return nil
}

// ringCellPos is the position cell c of a ring of cells holds once
// positions up to end (exclusive) are written: the last one before end
// that is c modulo cells, or -1 when there is none.
func ringCellPos(c, end, cells int) int {
	d := end - 1 - c
	if d < 0 {
		return -1
	}
	return c + d/cells*cells
}

// prepareRing fills the rings' inputs: every token's cell
// (s.ringIdx: slot·cells + position mod cells), every sequence's slot
// (s.ringSlots) and the mask: with attention per sequence (flash) one
// row of cells a token (s.ringMask16), else a row over the batch's
// gathered rings, sequence after sequence (s.ringMask).
func (e *Executor) prepareRing(b *batch.Batch, n int) {
	r, s := e.ring, &e.s
	s.ringIdx = grow(s.ringIdx, n)
	s.ringSlots = grow(s.ringSlots, len(b.Seqs))
	span := r.cells
	if !s.flash {
		span *= len(b.Seqs)
	}
	s.ringMask = grow(s.ringMask, n*span)
	inf := float32(math.Inf(-1))
	t := 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		s.ringSlots[i] = int32(sq.State)
		end := sq.Pos + len(sq.Tokens)
		for j := range sq.Tokens {
			p := sq.Pos + j
			s.ringIdx[t] = int64(sq.State*r.cells + p%r.cells)
			row := s.ringMask[t*span : (t+1)*span]
			own := 0
			if !s.flash {
				own = i * r.cells
			}
			for k := range row {
				row[k] = inf
			}
			for c := range r.cells {
				if q := ringCellPos(c, end, r.cells); q >= 0 && q <= p && p-q < r.window {
					row[own+c] = 0
				}
			}
			t++
		}
	}
	if s.flash {
		s.ringMask16 = grow(s.ringMask16, len(s.ringMask))
		const inf16, zero16 = 0xfc00, 0
		for i, v := range s.ringMask {
			s.ringMask16[i] = zero16
			if v != 0 {
				s.ringMask16[i] = inf16
			}
		}
	}
}

// ringSignature appends what a graph over the rings depends on: with
// attention per sequence, every sequence's slot (its ring is a view at
// the slot's offset).
func (e *Executor) ringSignature(sig []int64) []int64 {
	if e.ring == nil || !e.s.flash {
		return sig
	}
	for _, slot := range e.s.ringSlots {
		sig = append(sig, int64(slot))
	}
	return sig
}

// ringInputs adds the graph's ring inputs.
func (o *graphOps) ringInputs() {
	e := o.e
	if e.ring == nil {
		return
	}
	o.in.ringIdx = o.input(typeI64, o.nt, 0)
	if e.s.flash {
		o.in.ringMask = o.input(typeF16, int64(len(e.s.ringMask16)), 0)
		return
	}
	ns := int64(len(e.s.ringSlots))
	o.in.ringSlots = o.input(typeI32, ns, 0)
	o.in.ringMask = o.input(typeF32, ns*int64(e.ring.cells), o.nt)
}

// setRingInputs uploads them.
func (e *Executor) setRingInputs(in inputs) {
	if in.ringIdx == 0 {
		return
	}
	s := &e.s
	e.a.tensorSet(in.ringIdx, unsafe.Pointer(&s.ringIdx[0]), 0, uintptr(8*len(s.ringIdx)))
	if in.ringSlots != 0 {
		e.a.tensorSet(in.ringSlots, unsafe.Pointer(&s.ringSlots[0]), 0, uintptr(4*len(s.ringSlots)))
		e.a.tensorSet(in.ringMask, unsafe.Pointer(&s.ringMask[0]), 0, uintptr(4*len(s.ringMask)))
		return
	}
	e.a.tensorSet(in.ringMask, unsafe.Pointer(&s.ringMask16[0]), 0, uintptr(2*len(s.ringMask16)))
}

// ringAttention is a sliding layer's attention over the rings: this
// iteration's keys and values written into their cells, then per
// sequence over its own ring, read in place (flash attention), or over
// the batch's rings gathered into one run (the plain chain).
func (o *graphOps) ringAttention(layer int, q, k, v, sinks cTensor, scale float32) cTensor {
	e, a, ctx, r := o.e, o.e.a, o.ctx, o.e.ring
	c := e.cfg
	hd, kvHeads, cells := int64(c.HeadDim), int64(c.KVHeads), int64(r.cells)
	kw := a.setRows(ctx, r.k[layer], a.reshape2d(ctx, k, int64(e.kvDim), o.nt), o.in.ringIdx)
	vw := a.setRows(ctx, r.v[layer], v, o.in.ringIdx)
	if e.s.flash {
		headRow, kvRow := a.rowSize(e.kvType, hd), uintptr(e.kvRow)
		ring := func(written cTensor, i int) cTensor {
			off := uintptr(e.s.ringSlots[i]) * uintptr(cells) * kvRow
			return a.view3d(ctx, written, hd, kvHeads, cells, headRow, kvRow, off)
		}
		mask := func(i int) cTensor {
			sa := &e.s.seqs[i]
			return a.view2d(ctx, o.in.ringMask, cells, int64(sa.n), uintptr(2*cells), uintptr(2*cells)*uintptr(sa.t0))
		}
		return e.flashPerSeq(ctx, o.in, q, kw, vw, sinks, scale, ring, mask)
	}
	ns := int64(len(e.s.ringSlots))
	gather := func(written cTensor) cTensor {
		rows := a.getRows(ctx, a.reshape2d(ctx, written, int64(e.kvDim)*cells, int64(e.stateSlots)), o.in.ringSlots)
		return a.reshape3d(ctx, rows, hd, kvHeads, ns*cells)
	}
	return o.plainAttention(q, gather(kw), gather(vw), o.in.ringMask, sinks, scale)
}
