//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// inputs are one iteration's graph inputs.
type inputs struct {
	ids, pos, kIdx, blocks, mask, outRows cTensor
	// maskSWA is the sliding layers' mask (attn_window.go), or 0.
	maskSWA cTensor
	// rowIdx is every token's row, with attention per sequence.
	rowIdx cTensor
	// attnTemp is every token's attention temperature ([1, 1, n]), when
	// the forward pass asks for it (AttnTemperature), else 0; tempScale
	// and tempFloor its parameters.
	attnTemp  cTensor
	tempScale float32
	tempFloor int
	// stateIdx and stateKeep are the sequences' state slots and keep
	// factors, pos4 the M-RoPE positions (graph_recurrent.go), or 0.
	stateIdx, stateKeep, pos4 cTensor
	// ringIdx, ringRows and ringMask are the window cache's
	// (window_ring.go), or 0.
	ringIdx, ringRows, ringMask cTensor
}

// graph is a built compute graph and what run needs of it, kept for the
// next iteration: a batch of the same structure (sig) reuses it as it is,
// its tensors already placed by the allocator, and only uploads its
// inputs. Rebuilding costs ~40 purego calls a layer (more per sequence);
// on CUDA a graph that stays the same, node for node, is also what lets
// ggml capture it once and replay it as a CUDA graph (keyed by its first
// node's address, checked by every node's properties).
type graph struct {
	ctx    cCtx
	g      cGraph
	in     inputs
	logits cTensor
	argmax cTensor // the logits' argmax per row (deviceArgmax), or 0
	sig    []int64
}

func (e *Executor) freeGraph() {
	if e.graph.ctx != 0 {
		e.a.freeCtx(e.graph.ctx)
	}
	e.graph = graph{sig: e.graph.sig[:0]}
}

// signature is what build's graph depends on besides the cache: the token
// and sampled-row counts, the gathered span, and per sequence its share of
// attention (seqAttention); equal signatures build the same graph.
func (e *Executor) signature(sig []int64, n, span, ns int) []int64 {
	flash := int64(0)
	if e.s.flash {
		flash = 1
	}
	sig = append(sig[:0], flash, int64(n), int64(span), int64(ns), int64(len(e.s.blocks)))
	sig = e.stateSignature(sig)
	sig = e.ringSignature(sig)
	if e.s.flash {
		for _, a := range e.s.seqs {
			in := int64(0)
			if a.inPlace {
				in = 1
			}
			sig = append(sig, int64(a.t0), int64(a.n), int64(a.span), in, int64(a.first), int64(a.gather), int64(a.mask))
		}
	}
	return sig
}

// run builds the iteration's compute graph (or reuses the last one, see
// graph), allocates its intermediate tensors, uploads the inputs, computes
// and reads the logits back.
func (e *Executor) run(b *batch.Batch, out *batch.Output, n int) error {
	span := e.prepare(b, n)
	s := &e.s
	ns := len(s.outRows)
	e.sig = e.signature(e.sig, n, span, ns)
	if e.graph.ctx != 0 && slices.Equal(e.sig, e.graph.sig) {
		e.graphsReused++
	} else {
		e.freeGraph()
		size := e.graphNodes(len(b.Seqs))
		ctxBytes := e.a.tensorOverhead()*uintptr(size) + e.a.graphOverhead(uintptr(size), false)
		ctx := e.a.initCtx(initParams{MemSize: ctxBytes, NoAlloc: true})
		if ctx == 0 {
			return fmt.Errorf("ggml_init of %d bytes failed", ctxBytes)
		}
		g := e.a.newGraphCustom(ctx, uintptr(size), false)
		in, logits := e.build(ctx, g, n, span, ns)
		var argmax cTensor
		if e.deviceArgmax && logits != 0 {
			argmax = e.a.argmax(ctx, logits) // [ns] I32
			e.a.setOutput(argmax)
			e.a.buildForward(g, argmax)
		}
		if !e.a.gallocrAlloc(e.galloc, g) {
			e.a.freeCtx(ctx)
			// The allocator could not grow its buffer: out of device memory
			// for this batch's activations. The batch fails; the engine goes
			// on.
			return fmt.Errorf("out of %s memory for the compute graph of %d tokens over %d KV slots", e.be.Name, n, span)
		}
		e.graph = graph{ctx: ctx, g: g, in: in, logits: logits, argmax: argmax, sig: append(e.graph.sig[:0], e.sig...)}
		e.graphsBuilt++
	}
	in, logits, g := e.graph.in, e.graph.logits, e.graph.g
	set := func(t cTensor, p unsafe.Pointer, bytes int) {
		e.a.tensorSet(t, p, 0, uintptr(bytes))
	}
	set(in.ids, unsafe.Pointer(&s.ids[0]), 4*n)
	if in.pos != 0 {
		set(in.pos, unsafe.Pointer(&s.pos[0]), 4*n)
	}
	set(in.kIdx, unsafe.Pointer(&s.kIdx[0]), 8*n)
	if in.blocks != 0 {
		set(in.blocks, unsafe.Pointer(&s.blocks[0]), 4*len(s.blocks))
	}
	if in.rowIdx != 0 {
		set(in.rowIdx, unsafe.Pointer(&s.rowIdx[0]), 8*n)
	}
	if in.pos4 != 0 {
		s.pos4 = positions4(s.pos4, s.pos[:n])
		set(in.pos4, unsafe.Pointer(&s.pos4[0]), 4*4*n)
	}
	e.setStateInputs(in, len(b.Seqs))
	e.setRingInputs(in)
	if in.attnTemp != 0 {
		s.attnTemp = attnTemperatures(s.attnTemp, s.pos[:n], in.tempScale, in.tempFloor)
		set(in.attnTemp, unsafe.Pointer(&s.attnTemp[0]), 4*n)
	}
	if s.flash {
		set(in.mask, unsafe.Pointer(&s.mask16[0]), 2*len(s.mask16))
	} else {
		set(in.mask, unsafe.Pointer(&s.mask[0]), 4*len(s.mask))
	}
	if in.maskSWA != 0 {
		if s.flash {
			set(in.maskSWA, unsafe.Pointer(&s.maskSWA16[0]), 2*len(s.maskSWA16))
		} else {
			set(in.maskSWA, unsafe.Pointer(&s.maskSWA[0]), 4*len(s.maskSWA))
		}
	}
	if ns > 0 {
		set(in.outRows, unsafe.Pointer(&s.outRows[0]), 4*ns)
	}
	if err := e.compute(g, n); err != nil {
		return err
	}
	if ns == 0 {
		return nil
	}
	vocab := e.cfg.VocabSize
	host, err := e.logitsBuffer(ns * vocab)
	if err != nil {
		return err
	}
	if e.graph.argmax == 0 || !argmaxOnly(b) {
		e.a.tensorGet(logits, unsafe.Pointer(&host[0]), 0, uintptr(4*ns*vocab))
		batch.ShareLogits(b, out, host, vocab)
		return nil
	}
	// The tokens of the rows the engine wants only the argmax of, the
	// logits of the others, row by row (row k is the k-th sampled
	// sequence's).
	s.tokens = grow(s.tokens, ns)
	e.a.tensorGet(e.graph.argmax, unsafe.Pointer(&s.tokens[0]), 0, uintptr(4*ns))
	k := 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		if !sq.Sample {
			continue
		}
		if sq.ArgmaxOnly {
			out.Tokens[i], out.Sampled[i] = s.tokens[k], true
			e.argmaxRows++
		} else {
			row := host[k*vocab : (k+1)*vocab : (k+1)*vocab]
			e.a.tensorGet(logits, unsafe.Pointer(&row[0]), uintptr(4*k*vocab), uintptr(4*vocab))
			out.Logits[i] = row
		}
		k++
	}
	return nil
}

// argmaxOnly reports whether some sampled sequence of b wants only its
// argmax.
func argmaxOnly(b *batch.Batch) bool {
	for i := range b.Seqs {
		if b.Seqs[i].Sample && b.Seqs[i].ArgmaxOnly {
			return true
		}
	}
	return false
}

// compute runs the graph of n tokens, on as many CPU threads as the tuner
// picks when it has one.
func (e *Executor) compute(g cGraph, n int) error {
	var i int
	var start time.Time
	if e.tuner != nil {
		i = e.tuner.pick(n)
		e.be.setThreads(e.tuner.counts[i])
		start = time.Now()
	}
	if e.computeHook != nil {
		return e.computeHook(g)
	}
	if st := e.a.graphCompute(e.be.h, g); st != gStatusSuccess {
		return fmt.Errorf("graph compute failed with ggml status %d", st)
	}
	if e.tuner != nil {
		e.tuner.observe(i, n, time.Since(start))
	}
	return nil
}

// graphNodes bounds the nodes of a graph over seqs sequences: the
// architecture's (Forward.Nodes), the inputs, and attention's, about 24 a
// layer with its views, and with attention per sequence ~16 more per
// sequence and layer (for the llama family: 64 a layer and 256).
func (e *Executor) graphNodes(seqs int) int {
	n := e.fw.Nodes() + 24*e.cfg.Layers + 240
	if e.s.flash {
		n += 24 * e.cfg.Layers * seqs
	}
	// A recurrent layer's two calls: about 12 nodes per group each.
	n += 32 * e.cfg.RecurrentLayers() * len(e.s.groups)
	return n
}

// build describes the forward pass of n tokens in ctx and adds it to g: the
// iteration's inputs, then the architecture's forward pass (e.fw) over
// graphOps. It returns the input tensors and, when ns > 0, the logits of
// the ns sampled rows ([vocab, ns]).
func (e *Executor) build(ctx cCtx, g cGraph, n, span, ns int) (inputs, cTensor) {
	a := e.a
	nt, sp := int64(n), int64(span)
	o := &e.ops
	*o = graphOps{e: e, ctx: ctx, nt: nt, sp: sp, ns: ns, writes: o.writes[:0]}
	o.in = inputs{
		ids:  o.input(typeI32, nt, 0),
		kIdx: o.input(typeI64, nt, 0),
	}
	if e.s.flash {
		if len(e.s.blocks) > 0 {
			o.in.blocks = o.input(typeI32, int64(len(e.s.blocks)), 0)
		}
		o.in.mask = o.input(typeF16, int64(len(e.s.mask16)), 0)
		o.in.rowIdx = o.input(typeI64, nt, 0)
		if e.sliding != nil {
			o.in.maskSWA = o.input(typeF16, int64(len(e.s.mask16)), 0)
		}
	} else {
		o.in.blocks = o.input(typeI32, sp/int64(e.blockSize), 0)
		o.in.mask = o.input(typeF32, sp, nt)
		if e.sliding != nil {
			o.in.maskSWA = o.input(typeF32, sp, nt)
		}
	}
	o.stateInputs()
	o.ringInputs()
	out := cTensor(e.fw.Build(o))
	in := o.in
	// The recurrent layers' state writes, which nothing reads.
	for _, w := range o.writes {
		a.buildForward(g, w)
	}
	writes := o.writes[:0]
	*o = graphOps{writes: writes}
	if ns == 0 {
		a.buildForward(g, out)
		return in, 0
	}
	a.setOutput(out)
	a.buildForward(g, out)
	return in, out
}

// graphOps are the tensor operations build gives an architecture's forward
// pass (arch.Ops) over one graph's context and inputs.
type graphOps struct {
	e      *Executor
	ctx    cCtx
	in     inputs
	nt, sp int64
	ns     int
	// writes are the graph's state writes (graph_recurrent.go).
	writes []cTensor
}

var _ arch.Ops = (*graphOps)(nil)

func (o *graphOps) input(typ int32, ne0, ne1 int64) cTensor {
	a := o.e.a
	var t cTensor
	if ne1 == 0 {
		t = a.newTensor1d(o.ctx, typ, ne0)
	} else {
		t = a.newTensor2d(o.ctx, typ, ne0, ne1)
	}
	a.setInput(t)
	return t
}

func (o *graphOps) Tokens() int { return int(o.nt) }

func (o *graphOps) Embed(table arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.getRows(o.ctx, cTensor(table), o.in.ids))
}

func (o *graphOps) MulMat(w, x arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.mulMat(o.ctx, cTensor(w), cTensor(x)))
}

func (o *graphOps) Add(x, y arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.add(o.ctx, cTensor(x), cTensor(y)))
}

func (o *graphOps) Mul(x, y arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.mul(o.ctx, cTensor(x), cTensor(y)))
}

func (o *graphOps) RMSNorm(x arch.Tensor, eps float32) arch.Tensor {
	return arch.Tensor(o.e.a.rmsNorm(o.ctx, cTensor(x), eps))
}

func (o *graphOps) Reshape3D(x arch.Tensor, ne0, ne1, ne2 int) arch.Tensor {
	return arch.Tensor(o.e.a.reshape3d(o.ctx, cTensor(x), int64(ne0), int64(ne1), int64(ne2)))
}

func (o *graphOps) Rope(x arch.Tensor, dims int, mode arch.RopeMode, theta float32) arch.Tensor {
	// ext_factor 0 disables YaRN, so beta_fast and beta_slow are unused.
	return o.RopeExt(x, arch.RopeParams{Dims: dims, Mode: mode, Theta: theta})
}

func (o *graphOps) RopeExt(x arch.Tensor, p arch.RopeParams) arch.Tensor {
	freqScale, attnFactor := p.FreqScale, p.AttnFactor
	if freqScale == 0 {
		freqScale = 1
	}
	if attnFactor == 0 {
		attnFactor = 1
	}
	if o.in.pos == 0 {
		// An input only a graph that rotates with it has (M-RoPE's are
		// pos4): ggml allocates no tensor nothing reads.
		o.in.pos = o.input(typeI32, o.nt, 0)
	}
	return arch.Tensor(o.e.a.ropeExt(o.ctx, cTensor(x), o.in.pos, cTensor(p.Factors), int32(p.Dims), int32(p.Mode), int32(p.OrigContext),
		p.Theta, freqScale, p.ExtFactor, attnFactor, p.BetaFast, p.BetaSlow))
}

// AttnTemperature multiplies q by the graph's attention temperature
// input, which run fills from the batch's positions (attnTemperatures).
func (o *graphOps) AttnTemperature(q arch.Tensor, scale float32, floor int) arch.Tensor {
	if o.in.attnTemp == 0 {
		o.in.attnTemp = o.e.a.newTensor3d(o.ctx, typeF32, 1, 1, o.nt)
		o.e.a.setInput(o.in.attnTemp)
		o.in.tempScale, o.in.tempFloor = scale, floor
	} else if scale != o.in.tempScale || floor != o.in.tempFloor {
		panic(fmt.Sprintf("ggml: attention temperature %g over %d, then %g over %d in one graph", o.in.tempScale, o.in.tempFloor, scale, floor))
	}
	return arch.Tensor(o.e.a.mul(o.ctx, cTensor(q), o.in.attnTemp))
}

// attnTemperatures are the temperatures of tokens at pos into dst (grown):
// 1 + scale·ln(⌊pos/floor⌋+1), with llama.cpp's float32 division and
// floor and float64 logarithm.
func attnTemperatures(dst []float32, pos []int32, scale float32, floor int) []float32 {
	dst = grow(dst, len(pos))
	for i, p := range pos {
		steps := float64(float32(math.Floor(float64(float32(p) / float32(floor)))))
		dst[i] = float32(math.Log(steps+1)*float64(scale) + 1)
	}
	return dst
}

func (o *graphOps) SwiGLU(gate, up arch.Tensor) arch.Tensor {
	return arch.Tensor(o.e.a.swigluSplit(o.ctx, cTensor(gate), cTensor(up)))
}

// Attention writes this iteration's keys and values into their slots,
// then attends: per sequence over its own blocks (flash attention), or
// over the slots of the blocks the batch reaches, gathered from the cache
// into one contiguous run (a copy of what the batch reads, not of the
// cache; a block shared by several sequences is gathered once and read by
// each of them).
func (o *graphOps) Attention(layer int, q, k, v arch.Tensor, scale float32) arch.Tensor {
	return o.attention(layer, q, k, v, 0, scale)
}

// attention is Attention and AttentionSinks: sinks, when not 0, join each
// head's softmax (ggml's soft_max and flash_attn_ext sinks, as llama.cpp
// adds them); the layer's mask is its kind's (layerMask).
func (o *graphOps) attention(layer int, q, k, v, sinks arch.Tensor, scale float32) arch.Tensor {
	e, a, ctx := o.e, o.e.a, o.ctx
	kvDim := int64(e.kvDim)
	if r := e.ring; r != nil && r.layer[layer] {
		return arch.Tensor(o.ringAttention(layer, cTensor(q), cTensor(k), cTensor(v), cTensor(sinks), scale))
	}
	kw := a.setRows(ctx, e.kc[layer], a.reshape2d(ctx, cTensor(k), kvDim, o.nt), o.in.kIdx)
	vw := a.setRows(ctx, e.vc[layer], cTensor(v), o.in.kIdx)
	if e.s.flash {
		return arch.Tensor(e.seqAttention(ctx, o.in, o.layerMask(layer), cTensor(q), kw, vw, cTensor(sinks), scale))
	}
	return arch.Tensor(o.plainAttention(cTensor(q), o.gather(kw), o.gather(vw), o.layerMask(layer), cTensor(sinks), scale))
}

// plainAttention is the mul_mat/soft_max/mul_mat chain of q ([hd, heads,
// n]) over gathered keys and values ([hd, kvHeads, span]) under mask
// ([span, n]): [qDim, n].
func (o *graphOps) plainAttention(q, gk, gv, mask, sinks cTensor, scale float32) cTensor {
	a, ctx, c := o.e.a, o.ctx, o.e.cfg
	qDim := int64(c.Heads * c.HeadDim)
	qp := a.permute(ctx, q, 0, 2, 1, 3)    // [hd, n, heads]
	keys := a.permute(ctx, gk, 0, 2, 1, 3) // [hd, span, kvHeads]
	kq := a.mulMat(ctx, keys, qp)          // [span, n, heads]
	kq = a.softMaxExt(ctx, kq, mask, scale, 0)
	if sinks != 0 {
		a.softMaxAddSinks(kq, sinks)
	}
	vals := a.cont(ctx, a.permute(ctx, gv, 1, 2, 0, 3))               // [span, hd, kvHeads]
	kqv := a.mulMat(ctx, vals, kq)                                    // [hd, n, heads]
	return a.cont2d(ctx, a.permute(ctx, kqv, 0, 2, 1, 3), qDim, o.nt) // [qDim, n]
}

// gather takes the rows of the batch's blocks from a cache tensor (the
// result of this iteration's write into it, so that the write comes
// first): [kvDim, slots] seen as one row per block, get_rows (which widens
// any type to F32), and back to [hd, kvHeads, span].
func (o *graphOps) gather(written cTensor) cTensor {
	e, a := o.e, o.e.a
	blockRow := int64(e.kvDim) * int64(e.blockSize)
	rows := a.getRows(o.ctx, a.reshape2d(o.ctx, written, blockRow, int64(e.numBlocks)), o.in.blocks) // [kvDim·bs, blocks]
	return a.reshape3d(o.ctx, rows, int64(e.cfg.HeadDim), int64(e.cfg.KVHeads), o.sp)
}

func (o *graphOps) SampledRows() int { return o.ns }

func (o *graphOps) Sampled(x arch.Tensor) (arch.Tensor, bool) {
	if o.ns == 0 {
		return x, false
	}
	o.in.outRows = o.input(typeI32, int64(o.ns), 0)
	return arch.Tensor(o.e.a.getRows(o.ctx, cTensor(x), o.in.outRows)), true // [dim, ns]
}

// seqAttention is one layer's flash attention run per sequence (see
// attn_seq.go): each sequence's query rows attend its own context, read in
// place or gathered (then, as in build's gather, in the cache's type), and
// the outputs are written into their rows of one [qDim, n] tensor with
// set_rows, one after the other. written are the key and value caches after
// this iteration's writes; q is [hd, heads, n]; mask is in.mask or
// in.maskSWA; sinks, when not 0, each head's sink.
func (e *Executor) seqAttention(ctx cCtx, in inputs, mask, q, kw, vw, sinks cTensor, scale float32) cTensor {
	a, c := e.a, e.cfg
	hd, kvHeads, bs := int64(c.HeadDim), int64(c.KVHeads), e.blockSize
	headRow, kvRow := a.rowSize(e.kvType, hd), uintptr(e.kvRow)
	context := func(written cTensor, i int) cTensor {
		sa := &e.s.seqs[i]
		span := int64(sa.span)
		if sa.inPlace {
			return a.view3d(ctx, written, hd, kvHeads, span, headRow, kvRow, uintptr(sa.first)*kvRow)
		}
		return e.gatherBlocks(ctx, written, a.view1d(ctx, in.blocks, int64(sa.span/bs), uintptr(4*sa.gather)))
	}
	seqMask := func(i int) cTensor {
		sa := &e.s.seqs[i]
		return a.view2d(ctx, mask, int64(sa.span), int64(sa.n), uintptr(2*sa.span), uintptr(2*sa.mask))
	}
	return e.flashPerSeq(ctx, in, q, kw, vw, sinks, scale, context, seqMask)
}

// gatherBlocks is the blocks ids ([blocks] I32) of a cache tensor (the
// result of this iteration's write into it) as [hd, kvHeads, blocks·bs]
// in the cache's type (gatherRows).
func (e *Executor) gatherBlocks(ctx cCtx, written, ids cTensor) cTensor {
	return e.gatherRows(ctx, written, int64(e.kvDim*e.blockSize), int64(e.numBlocks), ids)
}

// gatherRows is rows ids ([n] I32) of written seen as [rowElems, rows]
// (rowElems a whole number of slots of kvDim), as [hd, kvHeads, slots]
// in the cache's type: gathered as I32 words when e.rawGather
// (retype.go), else widened to F32 by get_rows and cast back.
func (e *Executor) gatherRows(ctx cCtx, written cTensor, rowElems, rows int64, ids cTensor) cTensor {
	a, c := e.a, e.cfg
	hd, kvHeads, slots := int64(c.HeadDim), int64(c.KVHeads), a.nelements(ids)*rowElems/int64(e.kvDim)
	if !e.rawGather {
		got := a.getRows(ctx, a.reshape2d(ctx, written, rowElems, rows), ids)
		if e.kvType != typeF32 {
			got = a.cast(ctx, got, e.kvType)
		}
		return a.reshape3d(ctx, got, hd, kvHeads, slots)
	}
	kvRow, headRow := uintptr(e.kvRow), a.rowSize(e.kvType, hd)
	rowBytes := kvRow * uintptr(rowElems) / uintptr(e.kvDim)
	words := a.view2d(ctx, written, rowElems, rows, rowBytes, 0)
	retype(words, typeI32, int64(rowBytes/4), 4)
	got := a.getRows(ctx, words, ids) // I32 [rowBytes/4, n]
	v := a.view3d(ctx, got, int64(headRow/4), kvHeads, slots, headRow, kvRow, 0)
	retype(v, e.kvType, hd, a.typeSize(e.kvType))
	return v
}

// flashPerSeq runs one ggml_flash_attn_ext per sequence of the batch
// (e.s.seqs): sequence i's query rows over context(kw, i) and
// context(vw, i) ([hd, kvHeads, span]) under seqMask(i), its outputs
// written into their rows of one [qDim, n] tensor.
func (e *Executor) flashPerSeq(ctx cCtx, in inputs, q, kw, vw, sinks cTensor, scale float32, context func(written cTensor, i int) cTensor, seqMask func(i int) cTensor) cTensor {
	a, c := e.a, e.cfg
	hd, heads := int64(c.HeadDim), int64(c.Heads)
	qDim := hd * heads
	out := a.newTensor2d(ctx, typeF32, qDim, int64(len(e.s.rowIdx)))
	for i := range e.s.seqs {
		sa := &e.s.seqs[i]
		n := int64(sa.n)
		qs := a.permute(ctx, a.view3d(ctx, q, hd, heads, n, uintptr(4*hd), uintptr(4*qDim), uintptr(4*qDim)*uintptr(sa.t0)), 0, 2, 1, 3) // [hd, n, heads]
		keys := a.permute(ctx, context(kw, i), 0, 2, 1, 3)                                                                               // [hd, span, kvHeads]
		vals := a.permute(ctx, context(vw, i), 0, 2, 1, 3)
		fa := a.flashAttnExt(ctx, qs, keys, vals, seqMask(i), scale, 0, 0)
		if sinks != 0 {
			a.flashAttnAddSinks(fa, sinks)
		}
		o := a.reshape2d(ctx, fa, qDim, n) // [hd, heads, n] → [qDim, n]
		out = a.setRows(ctx, out, o, a.view1d(ctx, in.rowIdx, n, uintptr(8*sa.t0)))
	}
	return out
}
