package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch/gptoss"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/ggml"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestSimSWACache: a sim pod of gpt-oss-20b honours --swa-cache as the
// ggml executor does: on the same 64 GiB budget at 256 sequences it
// reports the blocks, ring slots and slot bytes buildModel gives a real
// gpt-oss-20b (TestSWACacheDensity's geometry: 1.77× the tokens of
// --swa-cache full), and sized from an H200's memory 1.7× to 2×.
func TestSimSWACache(t *testing.T) {
	if sim.WindowChunk != ggml.DefaultWindowChunk {
		t.Fatalf("the sim's ring chunk %d is not the ggml executor's %d", sim.WindowChunk, ggml.DefaultWindowChunk)
	}
	build := func(args ...string) *backend { return buildSimBackend(t, "gpt-oss-20b", args...) }
	cfg := model.Config{Arch: model.ArchGptOss, Layers: 24, KVHeads: 8, HeadDim: 64, SlidingWindow: 128, LayerKinds: gptoss.LayerKinds(24, 2)}
	m := &model.Model{Config: cfg}
	const budget = 64 << 30
	tokens := map[string]int{}
	for _, swa := range []string{swaCacheWindow, swaCacheFull} {
		kv, stateBytes := ggmlCacheLayout(m, &options{SWACache: swa})
		wantBlocks, wantSlots := kvcache.SplitStates(budget, kv.BytesPerBlock(16), stateBytes, 512, 1)
		be := build("--kv-cache-memory", "64Gi", "--max-num-seqs", "256", "--swa-cache", swa)
		if be.numBlocks != wantBlocks || be.stateSlots != wantSlots || be.stateBytes != stateBytes || be.kvBytesPerBlock != kv.BytesPerBlock(16) {
			t.Errorf("--swa-cache %s: %d blocks of %d bytes, %d slots of %d bytes; the ggml executor's: %d of %d, %d of %d",
				swa, be.numBlocks, be.kvBytesPerBlock, be.stateSlots, be.stateBytes, wantBlocks, kv.BytesPerBlock(16), wantSlots, stateBytes)
		}
		tokens[swa] = be.numBlocks * 16
	}
	ratio := float64(tokens[swaCacheWindow]) / float64(tokens[swaCacheFull])
	t.Logf("64 GiB, 256 seqs: window %d tokens, full %d: %.3f×", tokens[swaCacheWindow], tokens[swaCacheFull], ratio)
	if ratio < 1.76 || ratio >= 2 {
		t.Errorf("64 GiB: window holds %.3f× the tokens of full, want 1.76× to 2×", ratio)
	}
	window, full := build(), build("--swa-cache", "full")
	ratio = float64(window.numBlocks) / float64(full.numBlocks)
	t.Logf("H200 at 0.9: window %d tokens (%d ring slots), full %d: %.3f×", window.numBlocks*16, window.stateSlots, full.numBlocks*16, ratio)
	if window.stateSlots != 512 || full.stateSlots != 0 || ratio < 1.7 || ratio >= 2 {
		t.Errorf("H200: %d/%d slots, %.3f× the tokens; want 512/0 and 1.7× to 2×", window.stateSlots, full.stateSlots, ratio)
	}
}

// buildSimBackend builds (and closes) a sim backend of the sim profile name on an H200
// with args.
func buildSimBackend(t *testing.T, name string, args ...string) *backend {
	t.Helper()
	o, err := parseOptions(append([]string{"--executor", "sim", "--sim-model", name, "--sim-accelerator", "H200"}, args...), env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	be, err := buildBackend(o, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	be.close()
	return be
}
