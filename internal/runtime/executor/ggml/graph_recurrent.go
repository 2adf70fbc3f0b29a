//go:build linux && (amd64 || arm64)

package ggml

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// Hybrid models' recurrent layers (arch.RecurrentOps) over ggml's, and
// the states they keep.
//
// Every recurrent layer l keeps, per state slot, a convolution state
// (convState[l]: [ConvStateFloats, slots]) and a DeltaNet state
// (deltaState[l]: [DeltaStateFloats, slots]), F32 as llama.cpp keeps
// them. The engine gives each sequence a slot (batch.Seq.State); a graph
// reads the slots of its sequences with get_rows, multiplied by 0 for a
// sequence at position 0 (a fresh state), and writes the advanced states
// back with set_rows. The batch's sequences run in groups of consecutive
// sequences with as many tokens each (stateGroup): the decoding ones
// together, one call for all of them, a prefill chunk on its own, as
// ggml's kernels take [.., tokens, sequences] — as llama.cpp's equal
// splits do. The kernels recur token by token, so a sequence's numbers
// do not depend on what shares its batch.
//
// A group whose sequences all carry their states over skips the
// multiplication, and one whose slots are also consecutive reads them in
// place, a view of the slots, instead of gathering them. At 32 decoding
// streams of a Qwen3.5-0.8B shape each pass over the DeltaNet states
// moves 32 MiB a layer; llama.cpp's graph makes six (gather, the
// kernel's read and write, the copy back), this one four.

// stateGroup is a run of g.count consecutive sequences of the batch,
// from sequence seq0 and token t0 on, of n tokens each. fresh: one of
// them starts at position 0 (a zero state); slot0 ≥ 0: none does and
// their slots are slot0, slot0+1, … (read in place), else -1.
type stateGroup struct {
	seq0, t0, n, count int
	fresh              bool
	slot0              int
}

// prepareStates fills the batch's state groups, the slot of every
// sequence (s.stateIdx) and whether its state carries over (s.stateKeep:
// 1, or 0 at position 0).
func (e *Executor) prepareStates(b *batch.Batch) {
	s := &e.s
	s.groups = s.groups[:0]
	s.stateIdx = grow(s.stateIdx, len(b.Seqs))
	s.stateKeep = grow(s.stateKeep, len(b.Seqs))
	t := 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		s.stateIdx[i] = int32(sq.State)
		s.stateKeep[i] = 1
		if sq.Pos == 0 {
			s.stateKeep[i] = 0
		}
		n := len(sq.Tokens)
		if k := len(s.groups) - 1; k >= 0 && s.groups[k].n == n {
			g := &s.groups[k]
			if g.slot0 >= 0 && sq.State != g.slot0+g.count {
				g.slot0 = -1
			}
			g.count++
		} else {
			s.groups = append(s.groups, stateGroup{seq0: i, t0: t, n: n, count: 1, slot0: sq.State})
		}
		if sq.Pos == 0 {
			g := &s.groups[len(s.groups)-1]
			g.fresh, g.slot0 = true, -1
		}
		t += n
	}
}

// stateSignature appends the groups to sig: the graph's shape depends on
// them (the slots are an input).
func (e *Executor) stateSignature(sig []int64) []int64 {
	for _, g := range e.s.groups {
		fresh := int64(0)
		if g.fresh {
			fresh = 1
		}
		sig = append(sig, int64(g.n), int64(g.count), fresh, int64(g.slot0))
	}
	return sig
}

// stateInputs adds the graph's state inputs: every sequence's slot and,
// when a group starts a fresh state, keep factor.
func (o *graphOps) stateInputs() {
	ns := int64(len(o.e.s.stateIdx))
	if o.e.convState == nil || ns == 0 {
		return
	}
	o.in.stateIdx = o.input(typeI32, ns, 0)
	for _, g := range o.e.s.groups {
		if g.fresh { // only a group with a fresh state multiplies by it
			o.in.stateKeep = o.input(typeF32, 1, ns)
			break
		}
	}
}

// setStateInputs uploads them.
func (e *Executor) setStateInputs(in inputs, n int) {
	if in.stateIdx == 0 {
		return
	}
	e.a.tensorSet(in.stateIdx, unsafe.Pointer(&e.s.stateIdx[0]), 0, uintptr(4*n))
	if in.stateKeep != 0 {
		e.a.tensorSet(in.stateKeep, unsafe.Pointer(&e.s.stateKeep[0]), 0, uintptr(4*n))
	}
}

// groupStates reads the states of g's sequences from all ([rowLen,
// slots]): [rowLen, count], zero where a sequence starts; ids are their
// slots, for the write back. Consecutive slots (g.slot0) are a view of
// all, which the graph reads before its write back (set_rows depends on
// what the view feeds).
func (o *graphOps) groupStates(all cTensor, rowLen int, g stateGroup) (states, ids cTensor) {
	a := o.e.a
	ids = a.view1d(o.ctx, o.in.stateIdx, int64(g.count), uintptr(4*g.seq0))
	if g.slot0 >= 0 {
		row := uintptr(4 * rowLen)
		return a.view2d(o.ctx, all, int64(rowLen), int64(g.count), row, row*uintptr(g.slot0)), ids
	}
	rows := a.getRows(o.ctx, all, ids)
	if !g.fresh {
		return rows, ids
	}
	keep := a.view2d(o.ctx, o.in.stateKeep, 1, int64(g.count), 4, uintptr(4*g.seq0))
	return a.mul(o.ctx, rows, keep), ids
}

// writeState writes rows [rowLen, count] (contiguous) into all at ids:
// a node of the graph that nothing reads, kept in o.writes.
func (o *graphOps) writeState(all, rows, ids cTensor) {
	o.writes = append(o.writes, o.e.a.setRows(o.ctx, all, rows, ids))
}

// joinTokens concatenates the groups' outputs along the token dimension
// (dimension 1 of [w, tokens]).
func (o *graphOps) joinTokens(acc, x cTensor) cTensor {
	if acc == 0 {
		return x
	}
	return o.e.a.concat(o.ctx, acc, x, 1)
}

func (o *graphOps) SSMConv(layer int, x, kernel arch.Tensor) arch.Tensor {
	e, a, ctx := o.e, o.e.a, o.ctx
	g := e.cfg.Recurrent
	ch, keep := int64(g.ConvChannels()), int64(g.ConvKernel-1)
	all := e.convState[layer]
	var out cTensor
	for _, gr := range e.s.groups {
		n, cnt := int64(gr.n), int64(gr.count)
		xg := a.view3d(ctx, cTensor(x), ch, n, cnt, uintptr(4*ch), uintptr(4*ch*n), uintptr(4*ch)*uintptr(gr.t0)) // [ch, n, cnt]
		xt := a.permute(ctx, xg, 1, 0, 2, 3)                                                                      // [n, ch, cnt]
		st, ids := o.groupStates(all, g.ConvStateFloats(), gr)                                                    // [keep·ch, cnt]
		in := a.concat(ctx, a.reshape3d(ctx, st, keep, ch, cnt), xt, 0)                                           // [keep+n, ch, cnt]
		last := a.view3d(ctx, in, keep, ch, cnt, uintptr(4*(keep+n)), uintptr(4*(keep+n)*ch), uintptr(4*n))
		o.writeState(all, a.reshape2d(ctx, a.cont(ctx, last), keep*ch, cnt), ids)
		conv := a.ssmConv(ctx, in, cTensor(kernel)) // [ch, n, cnt]
		out = o.joinTokens(out, a.reshape2d(ctx, conv, ch, n*cnt))
	}
	return arch.Tensor(out)
}

func (o *graphOps) GatedDeltaNet(layer int, q, k, v, gate, beta arch.Tensor) arch.Tensor {
	e, a, ctx := o.e, o.e.a, o.ctx
	g := e.cfg.Recurrent
	S, hv := int64(g.StateSize), int64(g.ValueHeads)
	hk := a.nelements(cTensor(q)) / (S * o.nt) // KeyHeads, or hv when repeated
	all := e.deltaState[layer]
	view := func(x cTensor, ne0, ne1 int64, gr stateGroup) cTensor {
		n, row := int64(gr.n), uintptr(4*ne0)
		return a.view4d(ctx, x, ne0, ne1, n, int64(gr.count), row, row*uintptr(ne1), row*uintptr(ne1*n), row*uintptr(ne1)*uintptr(gr.t0))
	}
	var out cTensor
	for _, gr := range e.s.groups {
		n, cnt := int64(gr.n), int64(gr.count)
		st, ids := o.groupStates(all, g.DeltaStateFloats(), gr)
		r := a.gatedDeltaNet(ctx, view(cTensor(q), S, hk, gr), view(cTensor(k), S, hk, gr), view(cTensor(v), S, hv, gr),
			view(cTensor(gate), 1, hv, gr), view(cTensor(beta), 1, hv, gr),
			a.reshape4d(ctx, st, S, S, hv, cnt), 1) // [S·hv, n·cnt + S·cnt]
		attn := S * hv * n * cnt
		o.writeState(all, a.view2d(ctx, r, S*S*hv, cnt, uintptr(4*S*S*hv), uintptr(4*attn)), ids)
		out = o.joinTokens(out, a.view2d(ctx, r, S*hv, n*cnt, uintptr(4*S*hv), 0))
	}
	return arch.Tensor(out)
}

// RopeMulti rotates with ggml_rope_multi over the graph's M-RoPE
// positions: every token's position four times (one per section), which
// run fills from the batch's.
func (o *graphOps) RopeMulti(x arch.Tensor, p arch.RopeParams, sections [4]int) arch.Tensor {
	a := o.e.a
	if o.in.pos4 == 0 {
		o.in.pos4 = o.input(typeI32, 4*o.nt, 0)
	}
	freqScale, attnFactor := p.FreqScale, p.AttnFactor
	if freqScale == 0 {
		freqScale = 1
	}
	if attnFactor == 0 {
		attnFactor = 1
	}
	sec := [4]int32{int32(sections[0]), int32(sections[1]), int32(sections[2]), int32(sections[3])}
	return arch.Tensor(a.ropeMulti(o.ctx, cTensor(x), o.in.pos4, cTensor(p.Factors), int32(p.Dims), &sec[0], int32(p.Mode), int32(p.OrigContext),
		p.Theta, freqScale, p.ExtFactor, attnFactor, p.BetaFast, p.BetaSlow))
}

// positions4 is M-RoPE's position input: pos repeated for each of the
// four sections (section-major), as llama.cpp lays out a text batch's.
func positions4(dst, pos []int32) []int32 {
	n := len(pos)
	dst = grow(dst, 4*n)
	for k := range 4 {
		copy(dst[k*n:(k+1)*n], pos)
	}
	return dst
}

func (o *graphOps) Softplus(x arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.softplus(o.ctx, cTensor(x)))
}

func (o *graphOps) SiLU(x arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.silu(o.ctx, cTensor(x)))
}

func (o *graphOps) View(x arch.Tensor, ne0, ne1, ne2, nb1, nb2, offset int) arch.Tensor {
	return arch.Tensor(o.e.a.view3d(o.ctx, cTensor(x), int64(ne0), int64(ne1), int64(ne2), uintptr(4*nb1), uintptr(4*nb2), uintptr(4*offset)))
}

func (o *graphOps) Cont(x arch.Tensor, ne0, ne1 int) arch.Tensor {
	return arch.Tensor(o.e.a.cont2d(o.ctx, cTensor(x), int64(ne0), int64(ne1)))
}

func (o *graphOps) Repeat(x arch.Tensor, ne0, ne1, ne2 int) arch.Tensor {
	return arch.Tensor(o.e.a.repeat4d(o.ctx, cTensor(x), int64(ne0), int64(ne1), int64(ne2), 1))
}

// recurrent reports whether layer l is a recurrent one (no KV).
func (e *Executor) recurrent(l int) bool {
	return e.cfg.LayerKinds != nil && e.cfg.LayerKinds[l] == arch.Recurrent
}

// statePart is one tensor's share of a state slot: row bytes a slot, slot
// s's at s·row. A slot is its parts, in order (the host slots' layout).
// A ring's part (window_ring.go) is cells cells of row/cells bytes, of
// which a copy that says its position copies the window only (ringSpans).
type statePart struct {
	t   cTensor
	row int
	// rowElems are a row's elements (ggml's view sizes are in elements).
	rowElems int
	cells    int // 0: not a ring
}

// elems is how many elements n bytes of a row hold (n a whole number of
// a ring's cells, or of F32 elements).
func (st statePart) elems(n int) int64 { return int64(n) * int64(st.rowElems) / int64(st.row) }

// spans are the byte ranges within a slot's row of part st that copy cp
// copies: the whole row, or a ring's cells of the window before cp.Pos.
func (e *Executor) spans(st statePart, cp batch.StateCopy, buf [][2]int) [][2]int {
	buf = buf[:0]
	if st.cells == 0 || cp.Pos <= 0 {
		return append(buf, [2]int{0, st.row})
	}
	cell := st.row / st.cells
	for _, r := range ringSpans(cp.Pos, e.ring.window, st.cells) {
		if r[1] > 0 {
			buf = append(buf, [2]int{r[0] * cell, r[1] * cell})
		}
	}
	return buf
}

// allocStates adds the state slots' tensors to ctx, stateSlots slots of
// every recurrent layer's two states and every sliding layer's two rings
// (window_ring.go), keeps them as e.stateParts and returns them with
// their sizes in bytes (none for a model that keeps no states).
func (e *Executor) allocStates(ctx cCtx) (ts []cTensor, sizes []int) {
	c := e.cfg
	if c.RecurrentLayers() > 0 {
		e.convState, e.deltaState = make([]cTensor, c.Layers), make([]cTensor, c.Layers)
		conv, delta := c.Recurrent.ConvStateFloats(), c.Recurrent.DeltaStateFloats()
		for l := range c.Layers {
			if !e.recurrent(l) {
				continue
			}
			e.convState[l] = e.a.newTensor2d(ctx, typeF32, int64(conv), int64(e.stateSlots))
			e.deltaState[l] = e.a.newTensor2d(ctx, typeF32, int64(delta), int64(e.stateSlots))
			e.stateParts = append(e.stateParts, statePart{t: e.convState[l], row: 4 * conv, rowElems: conv}, statePart{t: e.deltaState[l], row: 4 * delta, rowElems: delta})
		}
	}
	e.stateParts = append(e.stateParts, e.allocRings(ctx)...)
	for _, p := range e.stateParts {
		ts, sizes = append(ts, p.t), append(sizes, p.row*e.stateSlots)
	}
	return ts, sizes
}

// StateSlots is how many sequences' states (recurrent layers', rings) the
// executor keeps (batch.StateKeeper): 0 for a model that keeps none.
func (e *Executor) StateSlots() int { return e.stateSlots }

// ReserveHostStates adds n host slots (batch.HostStateKeeper), numbered
// after the device's, replacing those reserved before.
func (e *Executor) ReserveHostStates(n int) error {
	if e.stateSlots == 0 {
		return errors.New("ggml executor: the model keeps no states")
	}
	if n < 0 {
		return fmt.Errorf("ggml executor: %d host state slots", n)
	}
	if e.hostStateBuf != 0 {
		e.a.bufferFree(e.hostStateBuf)
		e.hostStateBuf, e.hostStates = 0, nil
	}
	buf, host, err := e.hostBytes(n * int(e.stateBytes()))
	if err != nil {
		return fmt.Errorf("ggml executor: %d host state slots: %w", n, err)
	}
	e.hostStateBuf, e.hostStates, e.hostStateSlots = buf, host, n
	return nil
}

// copyStates copies states between slots (batch.Batch's StateCopies and
// StateSaves), part by part (a ring's window only, when the copy says its
// position: spans): between device slots with ggml's backend copy between
// views of the bytes (on a GPU a copy in device memory, not through the
// host), to and from host slots directly.
func (e *Executor) copyStates(copies []batch.StateCopy) {
	if len(copies) == 0 {
		return
	}
	var views cCtx // the device copies' views of rows
	if n := e.deviceCopies(copies); n > 0 {
		views = e.a.initCtx(initParams{MemSize: e.a.tensorOverhead() * uintptr(2*n*2*len(e.stateParts)), NoAlloc: true})
		defer e.a.freeCtx(views)
	}
	var buf [2][2]int
	e.eachStateRow(func(st statePart, off int) {
		for _, cp := range copies {
			fromHost, toHost := cp.From >= e.stateSlots, cp.To >= e.stateSlots
			for _, sp := range e.spans(st, cp, buf[:0]) {
				at, n := sp[0], sp[1]
				from, to := cp.From*st.row+at, cp.To*st.row+at
				switch {
				case !fromHost && !toHost:
					src := e.a.view1d(views, st.t, st.elems(n), uintptr(from))
					dst := e.a.view1d(views, st.t, st.elems(n), uintptr(to))
					e.a.viewInit(src)
					e.a.viewInit(dst)
					e.a.tensorCopy(src, dst)
				case !fromHost:
					e.a.tensorGet(st.t, unsafe.Pointer(&e.hostState(cp.To)[off+at]), uintptr(from), uintptr(n))
				case !toHost:
					e.a.tensorSet(st.t, unsafe.Pointer(&e.hostState(cp.From)[off+at]), uintptr(to), uintptr(n))
				default:
					copy(e.hostState(cp.To)[off+at:off+at+n], e.hostState(cp.From)[off+at:off+at+n])
				}
			}
		}
	})
}

// deviceCopies counts the copies between two device slots.
func (e *Executor) deviceCopies(copies []batch.StateCopy) int {
	n := 0
	for _, cp := range copies {
		if cp.From < e.stateSlots && cp.To < e.stateSlots {
			n++
		}
	}
	return n
}

// eachStateRow calls f for each part of a state (e.stateParts) with its
// offset in a state's bytes. A state's bytes (a host slot's, and
// StateIO's) are its parts in this order: each recurrent layer's
// convolution state, then its DeltaNet state, F32; then each sliding
// layer's ring of keys, then of values, in the cache's type.
func (e *Executor) eachStateRow(f func(st statePart, off int)) {
	off := 0
	for _, st := range e.stateParts {
		f(st, off)
		off += st.row
	}
}

// hostState is host slot's state (slot ≥ stateSlots).
func (e *Executor) hostState(slot int) []byte {
	n := int(e.stateBytes())
	off := (slot - e.stateSlots) * n
	return e.hostStates[off : off+n]
}

var _ batch.StateIO = (*Executor)(nil)

// StateBytes is one slot's state in bytes (batch.StateIO).
func (e *Executor) StateBytes() int {
	if e.stateSlots == 0 {
		return 0
	}
	return int(e.stateBytes())
}

// ReadState copies slot's state, a device or host slot, into dst
// (batch.StateIO).
func (e *Executor) ReadState(slot int, dst []byte) error {
	if err := e.checkStateIO(slot, dst); err != nil {
		return err
	}
	if slot >= e.stateSlots {
		copy(dst, e.hostState(slot))
		return nil
	}
	e.eachStateRow(func(st statePart, off int) {
		e.a.tensorGet(st.t, unsafe.Pointer(&dst[off]), uintptr(slot*st.row), uintptr(st.row))
	})
	return nil
}

// WriteState overwrites slot's state, a device or host slot, with src
// (batch.StateIO).
func (e *Executor) WriteState(slot int, src []byte) error {
	if err := e.checkStateIO(slot, src); err != nil {
		return err
	}
	if slot >= e.stateSlots {
		copy(e.hostState(slot), src)
		return nil
	}
	e.eachStateRow(func(st statePart, off int) {
		e.a.tensorSet(st.t, unsafe.Pointer(&src[off]), uintptr(slot*st.row), uintptr(st.row))
	})
	return nil
}

// checkStateIO refuses a slot out of range or a buffer of another size
// than a state.
func (e *Executor) checkStateIO(slot int, b []byte) error {
	switch {
	case e.stateSlots == 0:
		return errors.New("ggml executor: the model keeps no states")
	case slot < 0 || slot >= e.stateSlots+e.hostStateSlots:
		return fmt.Errorf("ggml executor: state slot %d outside the %d slots (%d on the host)", slot, e.stateSlots+e.hostStateSlots, e.hostStateSlots)
	case len(b) != e.StateBytes():
		return fmt.Errorf("ggml executor: a state of %d bytes, want %d", len(b), e.StateBytes())
	}
	return nil
}

// checkStates refuses a batch whose sequences' state slots are out of
// range or shared, or whose state copies name slots out of range.
func (e *Executor) checkStates(b *batch.Batch) error {
	if e.stateSlots == 0 {
		return nil
	}
	all := e.stateSlots + e.hostStateSlots
	for _, cps := range [2][]batch.StateCopy{b.StateCopies, b.StateSaves} {
		for _, cp := range cps {
			if cp.From < 0 || cp.From >= all || cp.To < 0 || cp.To >= all {
				return fmt.Errorf("state copy %d → %d outside the executor's %d slots (%d on the host)", cp.From, cp.To, all, e.hostStateSlots)
			}
		}
	}
	s := &e.s
	if len(s.slotSeen) < e.stateSlots {
		s.slotSeen = make([]uint64, e.stateSlots)
	}
	s.slotStamp++
	for i := range b.Seqs {
		st := b.Seqs[i].State
		if st < 0 || st >= e.stateSlots {
			return fmt.Errorf("sequence %d: state slot %d outside the executor's %d", b.Seqs[i].SeqID, st, e.stateSlots)
		}
		if s.slotSeen[st] == s.slotStamp {
			return fmt.Errorf("sequence %d: state slot %d is another sequence's of the batch", b.Seqs[i].SeqID, st)
		}
		s.slotSeen[st] = s.slotStamp
	}
	return nil
}
