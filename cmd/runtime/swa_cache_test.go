package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/gptoss"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/ggml"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
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
		blocks, slots := kvcache.SplitStates(budget, kv.BytesPerBlock(blockSize), stateBytes, 2*maxSeqs, 1)
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

// TestSWACacheServesGptOss: the runtime starts a small gpt-oss (3 layers,
// 2 of them sliding over 32 tokens) on the ggml executor in both
// --swa-cache modes on the same budget: window pages the full layer only
// and keeps two ring slots a sequence, full pages all three and keeps
// none; an engine over each generates the same greedy tokens for a
// prompt longer than a ring (32 + 512 cells).
func TestSWACacheServesGptOss(t *testing.T) {
	lib := os.Getenv(ggml.EnvLibDir)
	if lib == "" {
		t.Skipf("ggml libraries not installed: run hack/setup-ggml.sh and set %s (make test does both)", ggml.EnvLibDir)
	}
	cfg := model.Config{
		Arch: model.ArchGptOss, VocabSize: 320, Dim: 128, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 64, ContextLen: 4096,
		QKVBias: true, RopeTheta: 150000, NormEps: 1e-5, SlidingWindow: 32, LayerKinds: gptoss.LayerKinds(3, 2),
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, ExpertGating: arch.GatingSoftmaxWeight,
	}
	path := filepath.Join(t.TempDir(), "gpt-oss.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteGGUF(f, model.Random(cfg, 3)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	prompt := make([]int32, 600)
	for i := range prompt {
		prompt[i] = int32((i*37 + 11) % cfg.VocabSize)
	}
	run := func(swa string) (*backend, []int32) {
		o, err := parseOptions([]string{"--model", path, "--executor", "ggml", "--device", "cpu", "--ggml-lib", lib, "--cpu-threads", "1",
			"--kv-cache-memory", "64Mi", "--max-num-seqs", "4", "--swa-cache", swa}, env(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		be, err := buildBackend(o, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(be.close)
		e, err := engine.New(engine.Config{
			MaxNumSeqs: o.MaxNumSeqs, MaxNumBatchedTokens: o.MaxNumBatchedTokens, MaxModelLen: 1024, VocabSize: be.vocabSize, EOS: be.eos,
			Decoder: be.decoder, Logger: slog.New(slog.DiscardHandler),
			KV: kvcache.Config{NumBlocks: be.numBlocks, BlockSize: o.BlockSize, EnablePrefixCache: true},
		}, be.exec)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.Submit(context.Background(), &engine.Request{ID: swa, Prompt: prompt, Params: engine.Params{MaxTokens: 8, IgnoreEOS: true}})
		if err != nil {
			t.Fatal(err)
		}
		for r, w := e.Pending(); r+w > 0; r, w = e.Pending() {
			e.Step(context.Background())
		}
		toks, _, _, err := s.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return be, toks
	}
	window, wt := run(swaCacheWindow)
	full, ft := run(swaCacheFull)
	if window.kvBytesPerBlock*3 != full.kvBytesPerBlock || window.stateSlots != 8 || full.stateSlots != 0 || full.stateBytes != 0 {
		t.Errorf("window: %d bytes a block, %d state slots; full: %d bytes a block, %d state slots of %d bytes; want a third of the bytes a block and 8 slots, and no slots",
			window.kvBytesPerBlock, window.stateSlots, full.kvBytesPerBlock, full.stateSlots, full.stateBytes)
	}
	for _, c := range []struct {
		be            *backend
		layers, chunk int
	}{{window, 1, ggml.DefaultWindowChunk}, {full, 3, 0}} {
		if x := c.be.exec.(*ggml.Executor); x.KV().Layers != c.layers || x.MaxSeqTokens() != c.chunk {
			t.Errorf("the executor pages %d layers, chunk %d; want %d and %d", x.KV().Layers, x.MaxSeqTokens(), c.layers, c.chunk)
		}
	}
	if !slices.Equal(wt, ft) || len(wt) != 8 {
		t.Errorf("window cache generated %v, full %v", wt, ft)
	}
	t.Logf("window: %d blocks, %d slots of %d bytes; full: %d blocks; tokens %v", window.numBlocks, window.stateSlots, window.stateBytes, full.numBlocks, wt)
}
