package cpu

import (
	"math"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// prepare sizes the scratch for n tokens and lays out, per token, its id,
// sequence, position, KV slot and rotary angles.
func (e *Executor) prepare(b *batch.Batch, n int) {
	c, s := e.cfg, &e.s
	q, kv := c.Heads*c.HeadDim, e.kvDim
	if cap(s.ids) < n {
		s.ids = make([]int32, n)
	}
	s.ids = s.ids[:n]
	s.pos, s.seqOf, s.slot = grow(s.pos, n), grow(s.seqOf, n), grow(s.slot, n)
	s.x, s.xn = grow(s.x, n*c.Dim), grow(s.xn, n*c.Dim)
	s.q, s.k, s.v, s.attn = grow(s.q, n*q), grow(s.k, n*kv), grow(s.v, n*kv), grow(s.attn, n*q)
	s.gate, s.up = grow(s.gate, n*c.FFN), grow(s.up, n*c.FFN)
	half := c.HeadDim / 2
	s.cos, s.sin = grow(s.cos, n*half), grow(s.sin, n*half)
	t := 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		for j, id := range sq.Tokens {
			p := sq.Pos + j
			s.ids[t], s.seqOf[t], s.pos[t] = id, i, p
			s.slot[t] = int(sq.Blocks[p/e.blockSize])*e.blockSize + p%e.blockSize
			for f, inv := range e.invFreq {
				sin, cos := math.Sincos(float64(p) * inv)
				s.cos[t*half+f], s.sin[t*half+f] = float32(cos), float32(sin)
			}
			t++
		}
	}
}

// matmul computes out = x·wᵀ (+bias) for tokens rows of x, across the pool.
func (e *Executor) matmul(w *matrix, x, out, bias []float32, tokens int) {
	j := &e.s.mm
	*j = matmulJob{w: w, x: x, out: out, bias: bias, tokens: tokens}
	e.pool.run(j, w.rows, tile)
	*j = matmulJob{}
}

// layer runs transformer block li over the n tokens in e.s.x, in place.
func (e *Executor) layer(li int, b *batch.Batch, n int) {
	c, s, l := e.cfg, &e.s, &e.layers[li]
	dim, q, kv, hd := c.Dim, c.Heads*c.HeadDim, e.kvDim, c.HeadDim

	for t := range n {
		rmsNorm(s.xn[t*dim:(t+1)*dim], s.x[t*dim:(t+1)*dim], l.attnNorm, c.NormEps)
	}
	e.matmul(&l.q, s.xn, s.q, l.qBias, n)
	e.matmul(&l.k, s.xn, s.k, l.kBias, n)
	e.matmul(&l.v, s.xn, s.v, l.vBias, n)
	half := hd / 2
	kc, vc := e.kCache[li], e.vCache[li]
	for t := range n {
		cos, sin := s.cos[t*half:(t+1)*half], s.sin[t*half:(t+1)*half]
		for h := range c.Heads {
			rope(s.q[t*q+h*hd:t*q+(h+1)*hd], cos, sin, c.RopeNeox())
		}
		for h := range c.KVHeads {
			rope(s.k[t*kv+h*hd:t*kv+(h+1)*hd], cos, sin, c.RopeNeox())
		}
		copy(kc[s.slot[t]*kv:(s.slot[t]+1)*kv], s.k[t*kv:(t+1)*kv])
		copy(vc[s.slot[t]*kv:(s.slot[t]+1)*kv], s.v[t*kv:(t+1)*kv])
	}

	a := &s.attnJob
	a.e, a.b, a.kc, a.vc = e, b, kc, vc
	e.pool.run(a, n*c.Heads, 1)
	a.b, a.kc, a.vc = nil, nil, nil

	e.matmul(&l.o, s.attn, s.xn, nil, n)
	addTo(s.x[:n*dim], s.xn[:n*dim])

	for t := range n {
		rmsNorm(s.xn[t*dim:(t+1)*dim], s.x[t*dim:(t+1)*dim], l.ffnNorm, c.NormEps)
	}
	e.matmul(&l.gate, s.xn, s.gate, nil, n)
	e.matmul(&l.up, s.xn, s.up, nil, n)
	sw := &s.swiglu
	*sw = swigluJob{g: s.gate[:n*c.FFN], u: s.up[:n*c.FFN]}
	e.pool.run(sw, n*c.FFN, 1024)
	*sw = swigluJob{}
	e.matmul(&l.down, s.gate, s.xn, nil, n)
	addTo(s.x[:n*dim], s.xn[:n*dim])
}

// attentionJob computes, for each (token, head) pair in its range, softmax
// attention of the token's query over positions 0…pos of its sequence, read
// from the paged cache (which already holds this iteration's keys and
// values): causal within the new tokens, full over the cached ones.
//
// A range's pairs run a token at a time, all its heads in the range
// together, so each cached key and value row is read once, whole, per
// token rather than once per head in head-sized pieces.
type attentionJob struct {
	e      *Executor
	b      *batch.Batch
	kc, vc []float32
	scores [][]float32 // per chunk
}

func (a *attentionJob) run(chunk, lo, hi int) {
	e, s := a.e, &a.e.s
	c := e.cfg
	hd, kv, qd := c.HeadDim, e.kvDim, c.Heads*c.HeadDim
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	bs := e.blockSize
	for i := lo; i < hi; {
		t, h0 := i/c.Heads, i%c.Heads
		h1 := min(c.Heads, h0+hi-i)
		i += h1 - h0
		nh, np := h1-h0, s.pos[t]+1
		blocks := a.b.Seqs[s.seqOf[t]].Blocks
		q := s.q[t*qd : (t+1)*qd]
		// sc holds the scores position-major (sc[j*nh+h-h0]), then each
		// head's 1/sum.
		sc := a.scores[chunk]
		if need := np*nh + nh; cap(sc) < need {
			sc = make([]float32, need, max(need, 2*cap(sc)))
			a.scores[chunk] = sc
		}
		sc, inv := sc[:np*nh], sc[np*nh:np*nh+nh]
		for j := range np {
			slot := int(blocks[j/bs])*bs + j%bs
			scoreRow(a.kc[slot*kv:(slot+1)*kv], q, h0, h1, group, hd, sc[j*nh:(j+1)*nh])
		}
		for hh := range nh {
			maxv := float32(math.Inf(-1))
			for j := hh; j < len(sc); j += nh {
				v := sc[j] * scale
				sc[j] = v
				maxv = max(maxv, v)
			}
			var sum float32
			for j := hh; j < len(sc); j += nh {
				ev := float32(math.Exp(float64(sc[j] - maxv)))
				sc[j] = ev
				sum += ev
			}
			inv[hh] = 1 / sum
		}
		for j := range np {
			w := sc[j*nh : (j+1)*nh]
			for hh, iv := range inv {
				w[hh] *= iv
			}
		}
		o := s.attn[t*qd+h0*hd : t*qd+h1*hd]
		clear(o)
		for j := range np {
			slot := int(blocks[j/bs])*bs + j%bs
			vrow := a.vc[slot*kv : (slot+1)*kv]
			w := sc[j*nh : (j+1)*nh]
			if group == 1 {
				axpySeg(o, vrow[h0*hd:h1*hd], w, hd)
				continue
			}
			for hh, wv := range w {
				g := (h0 + hh) / group
				axpyFast(o[hh*hd:(hh+1)*hd], vrow[g*hd:(g+1)*hd], wv)
			}
		}
	}
}

// scoreRow sets out[h-h0] = key·query for heads h0 ≤ h < h1, where key is
// head h's part of the cached key row k.
func scoreRow(k, q []float32, h0, h1, group, hd int, out []float32) {
	for h := h0; h < h1; {
		g := h / group
		if useSIMD && h+4 <= h1 && (group == 1 || (h+3)/group == g) {
			ldk := hd
			if group > 1 {
				ldk = 0 // the four heads share their key
			}
			dotPairs4(k[g*hd:], ldk, q[h*hd:], hd, hd, out[h-h0:])
			h += 4
			continue
		}
		out[h-h0] = dot(k[g*hd:(g+1)*hd], q[h*hd:(h+1)*hd])
		h++
	}
}

// axpySeg adds w[i]·x to dst in each of its segments i of seg floats.
func axpySeg(dst, x, w []float32, seg int) {
	if useSIMD && seg%8 == 0 && len(w) > 0 {
		_, _ = dst[len(w)*seg-1], x[len(w)*seg-1]
		axpySegF32(&dst[0], &x[0], &w[0], len(w), seg*f32Size)
		return
	}
	for i, wv := range w {
		axpyFast(dst[i*seg:(i+1)*seg], x[i*seg:(i+1)*seg], wv)
	}
}

// swigluJob sets g = silu(g)·u elementwise.
type swigluJob struct{ g, u []float32 }

func (j *swigluJob) run(_, lo, hi int) {
	g, u := j.g[lo:hi], j.u[lo:hi]
	for i, gv := range g {
		g[i] = gv / (1 + float32(math.Exp(float64(-gv)))) * u[i]
	}
}

func rmsNorm(dst, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	w = w[:len(x)]
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v * inv * w[i]
	}
}

// rope rotates x by the angles whose cos and sin are given: adjacent pairs
// (2i, 2i+1), or with neox the pairs (i, i+len/2).
func rope(x, cos, sin []float32, neox bool) {
	half := len(cos)
	for i := range half {
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+half
		}
		x0, x1 := x[a], x[b]
		x[a] = x0*cos[i] - x1*sin[i]
		x[b] = x0*sin[i] + x1*cos[i]
	}
}

func addTo(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

func axpy(dst, x []float32, a float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += a * x[i]
	}
}
