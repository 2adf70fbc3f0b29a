//go:build linux && (amd64 || arm64)

package ggml

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// attentionRun runs m through a prefill of two sequences in one batch,
// one over contiguous blocks and one over scattered ones, then six decode
// steps of both, with plain attention or flash attention per sequence:
// every step's logits.
func attentionRun(t *testing.T, m *model.Model, plain bool) [][][]float32 {
	t.Helper()
	steps := windowSteps(m, 30, 6)
	plainAttention = plain
	defer func() { plainAttention = false }()
	e := newTestExec(t, m, 64)
	var out [][][]float32
	for _, seqs := range steps {
		out = append(out, execute(t, e, seqs))
	}
	return out
}

// maxDiff is the largest |x − y| over two runs' logits.
func maxDiff(x, y [][][]float32) float64 {
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

// TestMLAPlainAttentionMatchesFlash: deepseek2's plain attention chain
// over the gathered latents (other devices', and the CPU's for batches
// over FlashMaxSeqs) gives the logits of flash attention per sequence
// (which TestGreedyParityWithLlamaCpp holds to llama.cpp), with and
// without the queries' low rank; and the values are the latents: a model
// whose attn_v_b differs gives other logits.
func TestMLAPlainAttentionMatchesFlash(t *testing.T) {
	for _, cfg := range []model.Config{deepseek2Config(), deepseek2LiteConfig()} {
		m := randomModel(t, cfg, model.F32, 5)
		flash, plain := attentionRun(t, m, false), attentionRun(t, m, true)
		other := randomModel(t, cfg, model.F32, 5)
		for _, tt := range other.Weights.Extra {
			if tt.Name == "blk.1.attn_v_b.weight" {
				v := tt.Float32()
				for i := range v {
					v[i] = -v[i]
				}
				data, err := model.Encode(model.F32, v)
				if err != nil {
					t.Fatal(err)
				}
				tt.Data = data
			}
		}
		d, o := maxDiff(flash, plain), maxDiff(flash, attentionRun(t, other, false))
		t.Logf("q rank %d: plain vs flash: max |diff| %.3g; attn_v_b negated in layer 1: %.3g", cfg.MLA.QRank, d, o)
		if d > 1e-4 {
			t.Errorf("q rank %d: plain attention's logits differ from flash attention's by %.3g", cfg.MLA.QRank, d)
		}
		if o < 1e-2 {
			t.Errorf("q rank %d: negating attn_v_b moves the logits by %.3g only", cfg.MLA.QRank, o)
		}
	}
}

// TestMLAKVBytes holds what docs/architectures.md says an MLA model's
// cache costs, in GLM-4.7-Flash's geometry (47 layers, 20 heads, a latent
// of 512 and 64 rotated dimensions, keys and values of 256 a head) at F16:
// one row of the latent per token and layer, no value row, which is
// llama.cpp v0.5.0's cache (llama_kv_cache allocates no V tensor when
// hparams.is_mla(): a K row of n_embd_k_gqa = key_length 576 × 1 KV head
// per layer), 17.8 times less than per-head keys and values; and the pod
// sizes twice the blocks on the same memory that a key and a value row
// would give it.
func TestMLAKVBytes(t *testing.T) {
	c := model.Config{Arch: model.ArchDeepSeek2, Layers: 47, Heads: 20, KVHeads: 1, HeadDim: 576, RopeDims: 64,
		MLA: arch.MLA{QRank: 768, KVRank: 512, KeyLength: 256, ValueLength: 256}}
	g := KVGeometry(&model.Model{Config: c}, kvcache.DTypeF16)
	got := g.BytesPerToken()
	llamaCpp := int64(c.Layers * (c.MLA.KVRank + c.RopeDims) * 2)
	perHead := int64(c.Layers * c.Heads * (c.MLA.KeyLength + c.MLA.ValueLength) * 2)
	if got != 54144 || got != llamaCpp || perHead != 962560 {
		t.Errorf("%d bytes a token (llama.cpp %d, per-head keys and values %d), want 54144", got, llamaCpp, perHead)
	}
	const budget = 8 << 30
	withValues := g
	withValues.KeysOnly = false
	blocks, before := kvcache.BlocksForMemory(budget, g, 16), kvcache.BlocksForMemory(budget, withValues, 16)
	t.Logf("8 GiB: %d blocks of 16 tokens, %d with a value row (%.3f×)", blocks, before, float64(blocks)/float64(before))
	if blocks != 9915 || before != 4957 {
		t.Errorf("8 GiB holds %d blocks (%d with a value row), want 9915 (4957)", blocks, before)
	}
}

// TestMLAAllocatesKeysOnly: the executor of an MLA model allocates one
// latent row per slot and layer, the bytes its geometry counts, half a
// cache of keys and values; its format says so.
func TestMLAAllocatesKeysOnly(t *testing.T) {
	const numBlocks = 64
	m := randomModel(t, deepseek2Config(), model.F32, 5)
	e := newTestExec(t, m, numBlocks)
	_, kv, _ := e.BufferBytes()
	f := e.BlockFormat()
	row := int64(m.Config.HeadDim * 4) // F32
	want := int64(m.Config.Layers) * numBlocks * testBlockSize * row
	if !f.Geometry.KeysOnly || f.BlockBytes() != m.Config.Layers*testBlockSize*int(row) || int64(kv) != want {
		t.Errorf("keys only %v, %d bytes a block, KV buffer %d bytes; want keys only, %d, %d", f.Geometry.KeysOnly, f.BlockBytes(), kv, m.Config.Layers*testBlockSize*int(row), want)
	}
}

// TestMLAFlashMaxSeqs: with FlashMaxSeqs (a GPU's setting), the executor
// asks the backend for flash attention as AttentionMLA runs it (values
// narrower than the keys) and, given it, runs batches of up to that many
// sequences with it: their logits are flash attention's.
func TestMLAFlashMaxSeqs(t *testing.T) {
	m := randomModel(t, deepseek2Config(), model.F16, 4)
	e, err := New(m, 64, testBlockSize, Options{LibDir: testLibDir(t), Device: testDevice(), Threads: 1, KVCacheDType: testKV, FlashMaxSeqs: 2})
	if errors.Is(err, ErrNoFlashAttention) {
		t.Skipf("flash attention on %s: %v", testDevice(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	seqs := []batch.Seq{{Tokens: []int32{1, 2, 3, 4, 5}, Blocks: contiguous(0, 4), Sample: true}, {Tokens: []int32{9, 8, 7}, Blocks: contiguous(8, 4), Sample: true}}
	ref := newFlashTestExec(t, m, 64)
	want, got := execute(t, ref, seqs), execute(t, e, seqs)
	if !e.s.flash || maxDiff([][][]float32{want}, [][][]float32{got}) != 0 {
		t.Errorf("flash %v; logits differ from flash attention's by %g", e.s.flash, maxDiff([][][]float32{want}, [][][]float32{got}))
	}
}

// TestMLASpreadBlocks: a deepseek2 sequence's logits are bit for bit the
// same over spread blocks (its latents gathered, in the cache's type) as
// over consecutive ones (read in place), with every KV cache type.
func TestMLASpreadBlocks(t *testing.T) {
	m := randomModel(t, deepseek2Config(), model.Q8_0, 5)
	prompt := make([]int32, 22)
	for i := range prompt {
		prompt[i] = int32(i*37%200 + 1)
	}
	next := func(blocks []kvcache.BlockID) []float32 {
		e := newTestExec(t, m, 128)
		execute(t, e, []batch.Seq{{Tokens: prompt, Blocks: blocks, Sample: true}})
		return execute(t, e, []batch.Seq{{Tokens: []int32{9}, Pos: len(prompt), Blocks: blocks, Sample: true}})[0]
	}
	for _, d := range allKVTypes {
		withKV(t, d, func(t *testing.T) {
			want, got := next(contiguous(0, 6)), next([]kvcache.BlockID{90, 7, 41, 3, 77, 12})
			if !slices.Equal(want, got) {
				t.Errorf("spread blocks: logits differ from consecutive ones (max relative %.3g)", maxRelDiff([][]float32{want}, [][]float32{got}))
			}
		})
	}
}
