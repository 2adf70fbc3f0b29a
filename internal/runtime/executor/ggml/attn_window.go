//go:build linux && (amd64 || arm64)

package ggml

import (
	"math"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// Sliding-window attention (gpt-oss's every other layer) over the paged
// cache (Options.WindowCache off, --swa-cache full): the cache keeps
// every position of every layer, and a sliding layer's attention reads it
// through a second mask that also hides the positions before the window,
// as llama.cpp's standard window does: from position t a key at position p
// is seen when p ≤ t and t - p < window. Both masks are inputs of every
// graph of a model with sliding layers; each layer reads its own kind's.
// With the window cache the sliding layers keep only their window, in
// per-sequence rings (window_ring.go), under the same rule.

// slidingLayers says per layer whether it attends over a sliding window
// (nil when none does), from the model's layer kinds.
func slidingLayers(c arch.Config) []bool {
	var sliding []bool
	for i, k := range c.LayerKinds {
		if k == arch.SlidingWindow && c.SlidingWindow > 0 {
			if sliding == nil {
				sliding = make([]bool, c.Layers)
			}
			sliding[i] = true
		}
	}
	return sliding
}

// layerMask is the mask input layer's attention reads.
func (o *graphOps) layerMask(layer int) cTensor {
	if o.e.sliding != nil && o.e.sliding[layer] {
		return o.in.maskSWA
	}
	return o.in.mask
}

// windowMaskPerSeq fills s.maskSWA16, the sliding layers' mask in the
// layout of preparePerSeq's s.mask16.
func (e *Executor) windowMaskPerSeq(b *batch.Batch) {
	const inf16, zero16 = 0xfc00, 0
	s, w := &e.s, e.cfg.SlidingWindow
	s.maskSWA16 = grow(s.maskSWA16, len(s.mask16))
	for i, a := range s.seqs {
		pos := b.Seqs[i].Pos
		for j := range a.n {
			t := pos + j
			row := s.maskSWA16[a.mask+j*a.span : a.mask+(j+1)*a.span]
			for k := range row {
				if k <= t && t-k < w {
					row[k] = zero16
				} else {
					row[k] = inf16
				}
			}
		}
	}
}

// windowMask fills s.maskSWA, the sliding layers' mask in the layout of
// prepare's s.mask (span slots a row), while e.where still maps the
// batch's blocks to their place in the gathered run.
func (e *Executor) windowMask(b *batch.Batch, span int) {
	s, bs, w := &e.s, e.blockSize, e.cfg.SlidingWindow
	inf := float32(math.Inf(-1))
	s.maskSWA = grow(s.maskSWA, span*len(s.ids))
	for i := range s.maskSWA {
		s.maskSWA[i] = inf
	}
	t := 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		for j := range sq.Tokens {
			q := sq.Pos + j
			for p := max(0, q-w+1); p <= q; p++ {
				s.maskSWA[t*span+int(e.where[sq.Blocks[p/bs]])*bs+p%bs] = 0
			}
			t++
		}
	}
}
