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
// running sequence a slot, resumes prefix hits from checkpoints (the
// window's cells copied, batch.StateCopy.Pos: ringSpans) and keeps
// checkpoints on the host tier.
// The paged cache (KVGeometry's Layers) then holds the full-attention
// layers only: gpt-oss's cache in blocks is half as large a token.
//
// A sequence's attention gathers its window's cells from its ring in
// position order (its first token's window start to its last token):
// the keys and values the paged cache would hold for them, in the order
// it holds them, under today's mask (attn_window.go), so that the logits
// are the paged cache's to the bit; and a step reads its window, not the
// whole ring.

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
		elems := r.cells * e.kvDim
		parts = append(parts, statePart{r.k[l], row, elems, r.cells}, statePart{r.v[l], row, elems, r.cells})
	}
	return parts
}

// ringSpans are the runs of cells, [first cell, count] (count 0: no
// run), of a ring of cells that hold the window a sequence at position
// pos reads next: positions max(0, pos-window) … pos-1, at most two runs
// where they wrap. A checkpoint copies these only (batch.StateCopy.Pos).
func ringSpans(pos, window, cells int) [2][2]int {
	from := max(0, pos-window)
	first, n := from%cells, pos-from
	if first+n <= cells {
		return [2][2]int{{first, n}}
	}
	return [2][2]int{{first, cells - first}, {0, first + n - cells}}
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

// ringSeq is one sequence's share of the rings' attention: its window's
// rows, rows[row : row+span] of the gathered run (positions end-span …
// end-1, in position order), and its mask, n rows of span at mask (with
// attention per sequence).
type ringSeq struct {
	first, row, span, mask int
}

// fattnTileQ and fattnTileKV are ggml's CPU flash-attention tiles
// (GGML_FA_TILE_Q, GGML_FA_TILE_KV): a call of at least fattnTileQ query
// rows runs tiled, its softmax rescaled once a tile of fattnTileKV keys.
const fattnTileQ, fattnTileKV = 64, 64

// ringWindow is the positions a sequence's n tokens from pos read from
// its ring: span positions from first, which hold the window of every
// one of them (pos-window+1 … pos+n-1), the rest masked out. span depends
// on n alone, so that a graph serves every step of a batch of the same
// shape. A call that runs tiled starts at a multiple of the key tile, as
// the paged cache's run starts at position 0: the tiles then hold the
// same positions, and the sums round the same.
func ringWindow(pos, n, window int) (first, span int) {
	align := 1
	if n >= fattnTileQ {
		align = fattnTileKV
	}
	first = max(0, (pos-window+1)/align*align)
	return first, n + window - 1 + align - 1
}

// prepareRing fills the rings' inputs: every token's cell (s.ringIdx:
// slot·cells + position mod cells); per sequence the rows its window
// reads, from its first token's window start to its last token, in
// position order (s.ringRows, ringWindow's); and the mask, a token seeing its window's positions
// (attn_window.go's rule): with attention per sequence (flash) each
// sequence's n × span (s.ringMask16), else one row over the whole
// gathered run a token (s.ringMask).
func (e *Executor) prepareRing(b *batch.Batch, n int) {
	r, s, w := e.ring, &e.s, e.ring.window
	s.ringIdx = grow(s.ringIdx, n)
	s.ringRows = s.ringRows[:0]
	s.ringSeqs = s.ringSeqs[:0]
	t, size := 0, 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		base := sq.State * r.cells
		for j := range sq.Tokens {
			s.ringIdx[t+j] = int64(base + (sq.Pos+j)%r.cells)
		}
		first, span := ringWindow(sq.Pos, len(sq.Tokens), w)
		rs := ringSeq{first: first, row: len(s.ringRows), span: span, mask: size}
		for p := first; p < first+span; p++ {
			s.ringRows = append(s.ringRows, int32(base+p%r.cells))
		}
		s.ringSeqs = append(s.ringSeqs, rs)
		size += span * len(sq.Tokens)
		t += len(sq.Tokens)
	}
	all := len(s.ringRows)
	if !s.flash {
		size = all * n
	}
	s.ringMask = grow(s.ringMask, size)
	inf := float32(math.Inf(-1))
	for i := range s.ringMask {
		s.ringMask[i] = inf
	}
	t = 0
	for i := range b.Seqs {
		sq, rs := &b.Seqs[i], s.ringSeqs[i]
		first := rs.first
		for j := range sq.Tokens {
			row := s.ringMask[rs.mask+j*rs.span:][:rs.span]
			if !s.flash {
				row = s.ringMask[t*all+rs.row:][:rs.span]
			}
			q := sq.Pos + j
			for k := range row {
				if p := first + k; p >= 0 && p <= q && q-p < w {
					row[k] = 0
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

// ringSignature appends what a graph over the rings depends on beyond
// the batch's sequences' token counts: the gathered run's length.
func (e *Executor) ringSignature(sig []int64) []int64 {
	if e.ring == nil {
		return sig
	}
	return append(sig, int64(len(e.s.ringRows)))
}

// ringInputs adds the graph's ring inputs.
func (o *graphOps) ringInputs() {
	e := o.e
	if e.ring == nil {
		return
	}
	o.in.ringIdx = o.input(typeI64, o.nt, 0)
	o.in.ringRows = o.input(typeI32, int64(len(e.s.ringRows)), 0)
	if e.s.flash {
		o.in.ringMask = o.input(typeF16, int64(len(e.s.ringMask16)), 0)
		return
	}
	o.in.ringMask = o.input(typeF32, int64(len(e.s.ringRows)), o.nt)
}

// setRingInputs uploads them.
func (e *Executor) setRingInputs(in inputs) {
	if in.ringIdx == 0 {
		return
	}
	s := &e.s
	e.a.tensorSet(in.ringIdx, unsafe.Pointer(&s.ringIdx[0]), 0, uintptr(8*len(s.ringIdx)))
	e.a.tensorSet(in.ringRows, unsafe.Pointer(&s.ringRows[0]), 0, uintptr(4*len(s.ringRows)))
	if s.flash {
		e.a.tensorSet(in.ringMask, unsafe.Pointer(&s.ringMask16[0]), 0, uintptr(2*len(s.ringMask16)))
		return
	}
	e.a.tensorSet(in.ringMask, unsafe.Pointer(&s.ringMask[0]), 0, uintptr(4*len(s.ringMask)))
}

// ringAttention is a sliding layer's attention over the rings: this
// iteration's keys and values written into their cells, then each
// sequence's window gathered from its ring in position order (as the
// paged cache holds it, and llama.cpp's), and attended per sequence
// (flash attention, the gathered rows back in the cache's type) or as one
// run (the plain chain). Gathering reads the window only, not the ring's
// other cells, and the same graph serves every step of a batch of the
// same shape, wherever its windows lie in their rings.
func (o *graphOps) ringAttention(layer int, q, k, v, sinks cTensor, scale float32) cTensor {
	e, a, ctx, r := o.e, o.e.a, o.ctx, o.e.ring
	c := e.cfg
	hd, kvHeads := int64(c.HeadDim), int64(c.KVHeads)
	kw := a.setRows(ctx, r.k[layer], a.reshape2d(ctx, k, int64(e.kvDim), o.nt), o.in.ringIdx)
	vw := a.setRows(ctx, r.v[layer], v, o.in.ringIdx)
	// rows are rows [row, row+span) of ringRows, the cells to read.
	rows := func(row, span int) cTensor { return a.view1d(ctx, o.in.ringRows, int64(span), uintptr(4*row)) }
	if e.s.flash {
		// A sequence's window, in the cache's type (gatherRows).
		window := func(written cTensor, i int) cTensor {
			rs := &e.s.ringSeqs[i]
			return e.gatherRows(ctx, written, int64(e.kvDim), a.nelements(written)/int64(e.kvDim), rows(rs.row, rs.span))
		}
		mask := func(i int) cTensor {
			rs, n := &e.s.ringSeqs[i], int64(e.s.seqs[i].n)
			return a.view2d(ctx, o.in.ringMask, int64(rs.span), n, uintptr(2*rs.span), uintptr(2*rs.mask))
		}
		return e.flashPerSeq(ctx, o.in, q, kw, vw, sinks, scale, window, mask)
	}
	// The plain chain reads every ring's cells of the batch, widened to
	// F32 ([hd, kvHeads, all]).
	all := len(e.s.ringRows)
	gather := func(written cTensor) cTensor {
		return a.reshape3d(ctx, a.getRows(ctx, written, rows(0, all)), hd, kvHeads, int64(all))
	}
	return o.plainAttention(q, gather(kw), gather(vw), o.in.ringMask, sinks, scale)
}
