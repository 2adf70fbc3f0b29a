//go:build linux && (amd64 || arm64)

package ggml

import (
	"math"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// gptossNarrow is gptossConfig with a window of 8 tokens, which the
// contexts of the tests here outgrow many times over.
func gptossNarrow() model.Config {
	c := gptossConfig()
	c.SlidingWindow = 8
	return c
}

// TestGptOssPlainAttentionMatchesFlash: the plain attention chain (other
// devices', and the CPU's for batches over FlashMaxSeqs), with its sinks
// and sliding-window mask over gathered blocks, gives the logits of flash
// attention per sequence (which TestGreedyParityWithLlamaCpp holds to
// llama.cpp), for two sequences in one batch, one over scattered blocks,
// prefilled past the window and decoding; and the window matters: a model
// whose window spans the whole context gives other logits.
func TestGptOssPlainAttentionMatchesFlash(t *testing.T) {
	m := randomModel(t, gptossNarrow(), model.F32, 5)
	wide := gptossNarrow()
	wide.SlidingWindow = 1024
	mw := randomModel(t, wide, model.F32, 5)
	a := contiguous(0, 16)
	b := []kvcache.BlockID{40, 17, 33, 20, 25, 30, 18, 35, 21, 44, 19, 50, 23, 27, 31, 22}
	prompt := func(n, salt int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32((i*37 + salt*11) % m.Config.VocabSize)
		}
		return p
	}
	steps := [][]batch.Seq{{
		{Tokens: prompt(30, 1), Blocks: a, Sample: true},
		{Tokens: prompt(21, 2), Blocks: b, Sample: true},
	}}
	for i := range 6 {
		steps = append(steps, []batch.Seq{
			{Tokens: []int32{int32(3 + i)}, Pos: 30 + i, Blocks: a, Sample: true},
			{Tokens: []int32{int32(90 + i)}, Pos: 21 + i, Blocks: b, Sample: true},
		})
	}
	run := func(m *model.Model, plain bool) [][][]float32 {
		plainAttention = plain
		defer func() { plainAttention = false }()
		e := newTestExec(t, m, 64)
		var out [][][]float32
		for _, seqs := range steps {
			out = append(out, execute(t, e, seqs))
		}
		return out
	}
	flash, plain, wider := run(m, false), run(m, true), run(mw, false)
	maxDiff := func(x, y [][][]float32) float64 {
		d := 0.0
		for i := range x {
			for j := range x[i] {
				for k := range x[i][j] {
					d = math.Max(d, math.Abs(float64(x[i][j][k]-y[i][j][k])))
				}
			}
		}
		return d
	}
	d, w := maxDiff(flash, plain), maxDiff(flash, wider)
	t.Logf("plain vs flash: max |diff| %.3g; window 8 vs 1024: %.3g", d, w)
	if d > 1e-4 {
		t.Errorf("plain attention's logits differ from flash attention's by %.3g", d)
	}
	if w < 1e-2 {
		t.Errorf("a window of 8 gives the logits of a window of 1024 (max |diff| %.3g)", w)
	}
}
