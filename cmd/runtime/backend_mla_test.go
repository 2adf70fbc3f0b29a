package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// TestMLAKVCapacity: the pod sizes an MLA model's (deepseek2) KV cache
// from one latent row a token and layer, as llama.cpp keeps it: on 64 MiB
// of F16 cache it holds twice the blocks a key and a value row would
// give, and reports the latent's bytes a block.
func TestMLAKVCapacity(t *testing.T) {
	cfg := model.Config{Arch: model.ArchDeepSeek2, VocabSize: model.ByteVocabSize, Dim: 64, Layers: 3, Heads: 4, KVHeads: 1, HeadDim: 48, RopeDims: 16,
		FFN: 96, ContextLen: 256, MLA: arch.MLA{KVRank: 32, KeyLength: 48, ValueLength: 32},
		Experts: 4, ExpertsUsed: 2, ExpertFFN: 32, SharedExperts: 1, DenseLayers: 1, ExpertGating: arch.GatingSoftmax}
	path := writeRandomGGUF(t, cfg)
	o, err := parseOptions([]string{"--executor", "ggml", "--device", "cpu", "--ggml-lib", testGGMLLib(t), "--cpu-threads", "1",
		"--model", path, "--kv-cache-dtype", "f16", "--kv-cache-memory", "64Mi", "--block-size", "16"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	be, err := buildBackend(o, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer be.close()
	latent := int64(cfg.Layers * cfg.HeadDim * 2 * 16) // one F16 row a layer, 16 tokens
	withValues := (64 << 20) / (2 * latent)
	t.Logf("%d blocks of %d bytes; with a value row %d", be.numBlocks, be.kvBytesPerBlock, withValues)
	if be.kvBytesPerBlock != latent || int64(be.numBlocks) != (64<<20)/latent || int64(be.numBlocks)/2 != withValues {
		t.Errorf("%d blocks of %d bytes, want %d of %d (%d with a value row)", be.numBlocks, be.kvBytesPerBlock, (64<<20)/latent, latent, withValues)
	}
}
