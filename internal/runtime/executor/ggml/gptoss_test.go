//go:build linux && (amd64 || arm64)

package ggml

import (
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
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
	flash, plain, wider := attentionRun(t, m, false), attentionRun(t, m, true), attentionRun(t, mw, false)
	d, w := maxDiff(flash, plain), maxDiff(flash, wider)
	t.Logf("plain vs flash: max |diff| %.3g; window 8 vs 1024: %.3g", d, w)
	if d > 1e-4 {
		t.Errorf("plain attention's logits differ from flash attention's by %.3g", d)
	}
	if w < 1e-2 {
		t.Errorf("a window of 8 gives the logits of a window of 1024 (max |diff| %.3g)", w)
	}
}
