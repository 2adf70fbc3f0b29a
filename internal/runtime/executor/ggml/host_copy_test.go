//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestPrefixRestoredFromHostChangesNothing computes a prompt's KV, copies its
// blocks out to the host tier, overwrites those device blocks with another
// sequence, copies the KV back into other device blocks, and continues
// decoding from there: the tokens must equal an uninterrupted run's. For
// llama a block is every layer's keys and values; for deepseek2 its
// latents alone (kvcache.Geometry.KeysOnly).
func TestPrefixRestoredFromHostChangesNothing(t *testing.T) {
	for _, cfg := range []model.Config{parityConfigs()["llama"], deepseek2Config()} {
		t.Run(cfg.Arch, func(t *testing.T) {
			bothAttentions(t, func(t *testing.T) { testPrefixRestoredFromHost(t, cfg) })
		})
	}
}

func testPrefixRestoredFromHost(t *testing.T, cfg model.Config) {
	m := randomModel(t, cfg, model.F32, 4)
	rng := rand.New(rand.NewPCG(15, 16))
	const gen, promptBlocks = 10, 5
	prompt := make([]int32, promptBlocks*testBlockSize)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(m.Config.VocabSize))
	}
	want, _ := greedy(t, newTestExec(t, m, 64), prompt, gen)

	e := newTestExec(t, m, 32)
	if err := e.ReserveHostBlocks(8, testBlockSize); err != nil {
		t.Fatal(err)
	}
	first := contiguous(0, promptBlocks)
	l := execute(t, e, []batch.Seq{{Tokens: prompt, Blocks: first, Sample: true}})
	tok := argmax(l[0])
	var out, in []kvcache.Transfer
	moved := contiguous(20, promptBlocks)
	for i := range promptBlocks {
		out = append(out, kvcache.Transfer{Kind: kvcache.CopyOut, Device: first[i], Host: kvcache.HostSlot(7 - i)})
		in = append(in, kvcache.Transfer{Kind: kvcache.CopyIn, Device: moved[i], Host: kvcache.HostSlot(7 - i)})
	}
	if err := e.CopyBlocks(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	other := make([]int32, len(prompt))
	for i := range other {
		other[i] = int32(rng.IntN(m.Config.VocabSize))
	}
	execute(t, e, []batch.Seq{{Tokens: other, Blocks: first, Sample: true}}) // overwrites the first blocks
	if err := e.CopyBlocks(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	blocks := append(moved, contiguous(25, 4)...)
	got := []int32{tok}
	for pos := len(prompt); len(got) < gen; pos++ {
		l := execute(t, e, []batch.Seq{{Tokens: []int32{tok}, Pos: pos, Blocks: blocks, Sample: true}})
		tok = argmax(l[0])
		got = append(got, tok)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoding from KV restored from the host (-uninterrupted +restored):\n%s", diff)
	}
}

func TestCopyBlocksRejectsOutOfRange(t *testing.T) {
	exectest.CheckCopyBlocksRejectsOutOfRange(t, newTestExec(t, randomModel(t, parityConfigs()["llama"], model.F32, 4), 8), testBlockSize)
}

// TestEngineRestoresBesideIterations: see
// exectest.CheckEngineRestoresBesideIterations; ggml's copies run on a
// goroutine of their own while the graph computes, for every KV cache type
// (the host tier holds blocks in the cache's type). The same overlapped
// run with the copies made inline, before each iteration starts, has the
// same batches: its tokens must be the copy thread's, on every device.
//
// The tokens are compared with each program's alone on the CPU only: on a
// GPU ggml picks its matrix kernels by the batch's rows (see
// TestSequenceAttentionIgnoresItsBatch), and on the H100 c's seventh token
// is a near tie that went 32 or 250 with the batch around it, in the
// serial run as in the overlapped one, while the copy thread's tokens
// equalled the inline copies' for every cache type.
func TestEngineRestoresBesideIterations(t *testing.T) {
	m := randomModel(t, wideHeads()["llama"], model.Q8_0, 31)
	for _, d := range allKVTypes {
		withKV(t, d, func(t *testing.T) {
			newExec := func(inline bool) exectest.NewExec {
				return func(t testing.TB, blocks int) batch.Executor {
					e := newTestExec(t, m, blocks)
					e.inlineCopies = inline
					return e
				}
			}
			t.Run("alone", func(t *testing.T) {
				if testDevice() != DeviceCPU {
					t.Skipf("on %s the batch around a sequence may change its near-tied tokens", testDevice())
				}
				exectest.CheckEngineRestoresBesideIterations(t, m, testBlockSize, newExec(false))
			})
			t.Run("inline", func(t *testing.T) {
				thread := exectest.RestoresBesideIterations(t, m, testBlockSize, newExec(false), false)
				inline := exectest.RestoresBesideIterations(t, m, testBlockSize, newExec(true), false)
				if diff := cmp.Diff(inline, thread); diff != "" {
					t.Errorf("tokens with copies on the copy thread differ from the same run with copies inline (-inline +thread):\n%s", diff)
				}
			})
		})
	}
}

// TestEngineMovesKV: see exectest.CheckEngineMovesKV; ggml's blocks move
// as backend tensor runs, for every KV cache type; and deepseek2's, which
// are its latents alone (kvcache.Geometry.KeysOnly), at F16.
func TestEngineMovesKV(t *testing.T) {
	moves := func(m *model.Model) func(t *testing.T) {
		return func(t *testing.T) {
			exectest.CheckEngineMovesKV(t, m, testBlockSize, func(t testing.TB, blocks int) batch.Executor {
				return newTestExec(t, m, blocks)
			})
		}
	}
	m, mla := randomModel(t, wideHeads()["llama"], model.Q8_0, 31), randomModel(t, deepseek2Config(), model.F32, 31)
	for _, d := range allKVTypes {
		withKV(t, d, func(t *testing.T) {
			moves(m)(t)
			if d == kvcache.DTypeF16 {
				t.Run("deepseek2", moves(mla))
			}
		})
	}
}
