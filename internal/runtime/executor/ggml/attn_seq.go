//go:build linux && (amd64 || arm64)

package ggml

import (
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// Flash attention (the CPU's) runs per sequence: each sequence's query
// rows attend its own context, in block-table order, through one
// ggml_flash_attn_ext each. Over the batch's unified slot range instead,
// every query token would scan the mask of every slot the batch reaches (at
// 32 decoding sequences of context c, 32 × 32c mask reads a layer against
// 32 × c), and the numbers could depend on what shares the batch: ggml's
// CPU kernel picks its code path by the shape of the call (query rows, KV
// length, cache type; it has a tiled path for F32 and F16 caches, and the
// untiled one sums an F16 cache's values in F16). With an F16 cache, the
// engine test that restores a program's blocks from the host while another
// sequence decodes (TestEngineRestoresBesideIterations) gave that
// sequence other tokens than alone over the unified range, and gives the
// same tokens per sequence. Per sequence, a sequence's attention is the
// same call whatever shares its batch, over its own context only.
// docs/benchmarks.md has what it costs and saves.

// seqAttention is one sequence's share of an iteration's attention: its
// query rows [t0, t0+n), its context of span slots (positions 0 … span-1
// in block-table order), read in place from slot first on when its blocks
// are consecutive, else gathered from blocks[gather : gather+span/bs]; and
// its n×span mask at mask.
type seqAttention struct {
	t0, n, span  int
	inPlace      bool
	first        int
	gather, mask int
}

// preparePerSeq fills, for attention per sequence, the sequences' shares,
// the blocks to gather (s.blocks), the masks (s.mask16: a token at
// position p sees its sequence's positions 0 … p) and the row index of
// every token (s.rowIdx, where each sequence's output rows go).
func (e *Executor) preparePerSeq(b *batch.Batch, n int) {
	s, bs := &e.s, e.blockSize
	s.seqs = s.seqs[:0]
	s.blocks = s.blocks[:0]
	size, t := 0, 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		end := sq.Pos + len(sq.Tokens)
		used := sq.Blocks[:(end+bs-1)/bs]
		a := seqAttention{t0: t, n: len(sq.Tokens), span: len(used) * bs, inPlace: true, first: int(used[0]) * bs, mask: size}
		for j, id := range used {
			if int(id) != int(used[0])+j {
				a.inPlace = false
				break
			}
		}
		if !a.inPlace {
			a.gather = len(s.blocks)
			for _, id := range used {
				s.blocks = append(s.blocks, int32(id))
			}
		}
		s.seqs = append(s.seqs, a)
		size += a.span * a.n
		t += a.n
	}
	const inf16, zero16 = 0xfc00, 0
	s.mask16 = grow(s.mask16, size)
	for i, a := range s.seqs {
		pos := b.Seqs[i].Pos
		for j := range a.n {
			row := s.mask16[a.mask+j*a.span : a.mask+(j+1)*a.span]
			for k := range row {
				if k <= pos+j {
					row[k] = zero16
				} else {
					row[k] = inf16
				}
			}
		}
	}
	s.rowIdx = grow(s.rowIdx, n)
	for i := range s.rowIdx {
		s.rowIdx[i] = int64(i)
	}
}
