package main

import (
	"fmt"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch/gptoss"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// TestSWACacheDensity: gpt-oss-20b's cache shape (24 layers, every other
// one sliding over 128 tokens, 8 KV heads of 64, F16) on the same KV
// budget, sized by the functions buildModel sizes it with: with
// --swa-cache window the paged cache holds the 12 full layers, half the
// bytes a token of --swa-cache full, and the rings (128 + 512 cells of
// the 12 sliding layers, 15 MiB a slot; two slots a sequence, running
// and checkpoint) come out of the budget, so the pod reports 1.77 times
// the tokens at 256 sequences on 64 GiB, 1.94 times at 64.
func TestSWACacheDensity(t *testing.T) {
	cfg := model.Config{Arch: model.ArchGptOss, Layers: 24, KVHeads: 8, HeadDim: 64, SlidingWindow: 128, LayerKinds: gptoss.LayerKinds(24, 2)}
	m := &model.Model{Config: cfg}
	const blockSize, budget = 16, 64 << 30
	tokens := func(swa string, maxSeqs int) (tokens int64, slots int, slotBytes int64) {
		kv, stateBytes := ggmlCacheLayout(m, &options{SWACache: swa})
		blocks, slots := splitKVBudget(budget, kv, blockSize, 2*maxSeqs, stateBytes)
		return int64(blocks) * blockSize, slots, stateBytes
	}
	full, _, none := tokens(swaCacheFull, 256)
	if none != 0 {
		t.Errorf("--swa-cache full keeps %d bytes of state a slot, want none", none)
	}
	for _, tc := range []struct {
		maxSeqs  int
		minRatio float64
	}{
		{256, 1.76},
		{64, 1.93},
	} {
		t.Run(fmt.Sprintf("max-num-seqs=%d", tc.maxSeqs), func(t *testing.T) {
			window, slots, slotBytes := tokens(swaCacheWindow, tc.maxSeqs)
			if want := int64(12 * 2 * (128 + 512) * 8 * 64 * 2); slotBytes != want {
				t.Errorf("a ring slot is %d bytes, want %d", slotBytes, want)
			}
			ratio := float64(window) / float64(full)
			t.Logf("64 GiB: window %d tokens (%d ring slots, %d MiB), full %d tokens: %.3f×", window, slots, int64(slots)*slotBytes>>20, full, ratio)
			if slots != 2*tc.maxSeqs || ratio < tc.minRatio || ratio >= 2 {
				t.Errorf("window: %d slots, %.3f× the full cache's tokens; want %d slots and %.2f× to 2×", slots, ratio, 2*tc.maxSeqs, tc.minRatio)
			}
		})
	}
}
