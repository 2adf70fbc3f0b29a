//go:build linux && (amd64 || arm64)

package ggml

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// TestGraphReusedForTheSameShape: decode steps of the same batch structure
// reuse the last graph (only the inputs change: positions, and with them
// mistral3's attention temperatures) and give the logits of a graph built
// afresh each step; a step of another structure builds anew.
func TestGraphReusedForTheSameShape(t *testing.T) {
	// mistral3's attention temperature is an input of its own; stepping
	// every 2 positions, it changes from step to step.
	m3 := mistral3Config()
	m3.RopeScaling.OrigContext = 2
	// gpt-oss with a window of 4: the sliding layers' mask, an input of
	// its own, changes with every step as the positions do.
	gptoss := gptossNarrow()
	gptoss.SlidingWindow = 4
	for _, cfg := range []model.Config{wideHeads()["qwen2"], qwen3Config(), qwen3moeConfig(), glm4moeConfig(), m3, gptoss, deepseek2Config(), deepseek2LiteConfig(), deepseek2V3Config()} {
		t.Run(cfg.Arch, func(t *testing.T) { testGraphReused(t, cfg) })
	}
}

func testGraphReused(t *testing.T, cfg model.Config) {
	bothAttentions(t, func(t *testing.T) {
		m := randomModel(t, cfg, model.F16, 4)
		reuse, fresh := newTestExec(t, m, 32), newTestExec(t, m, 32)
		a, b := contiguous(0, 4), contiguous(8, 4)
		steps := [][]batch.Seq{
			{{Tokens: []int32{1, 2, 3, 4, 5}, Blocks: a, Sample: true}, {Tokens: []int32{9, 8, 7, 6, 5}, Blocks: b, Sample: true}},
			{{Tokens: []int32{6}, Pos: 5, Blocks: a, Sample: true}, {Tokens: []int32{6}, Pos: 5, Blocks: b, Sample: true}},
			{{Tokens: []int32{7}, Pos: 6, Blocks: a, Sample: true}, {Tokens: []int32{5}, Pos: 6, Blocks: b, Sample: true}},
			{{Tokens: []int32{8}, Pos: 7, Blocks: a, Sample: true}, {Tokens: []int32{4}, Pos: 7, Blocks: b, Sample: true}},
		}
		for i, seqs := range steps {
			fresh.freeGraph()
			want := execute(t, fresh, seqs)
			got := execute(t, reuse, seqs)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("step %d: logits of the reused graph differ from a fresh graph's", i)
			}
		}
		// Step 0 (prefill) and 1 (decode) have their own structure; steps 2
		// and 3 keep step 1's (with attention per sequence: spans of 8
		// slots, both within their second block) and reuse it.
		if reuse.graphsBuilt != 2 || reuse.graphsReused != 2 {
			t.Errorf("%d graphs built and %d reused over 4 steps, want 2 and 2", reuse.graphsBuilt, reuse.graphsReused)
		}
	})
}

// TestFlashMaxSeqsChoosesPerBatch: with FlashMaxSeqs 2, batches of one or
// two sequences run flash attention and larger ones the plain chain: over
// a history of two-sequence batches the logits are exactly flash
// attention's, over one of three-sequence batches exactly the plain
// chain's. Alternating the two kinds at the same token count gives the
// logits of a graph built afresh each step (a graph of one kind is never
// reused for the other).
func TestFlashMaxSeqsChoosesPerBatch(t *testing.T) {
	m := randomModel(t, wideHeads()["qwen2"], model.F16, 4)
	a, b, c := contiguous(0, 4), contiguous(8, 4), contiguous(16, 4)
	prompts := []batch.Seq{
		{Tokens: []int32{1, 2, 3, 4, 5}, Blocks: a, Sample: true},
		{Tokens: []int32{9, 8, 7, 6, 5}, Blocks: b, Sample: true},
		{Tokens: []int32{4, 4, 2, 7, 1}, Blocks: c, Sample: true},
	}
	// Three tokens either way: two sequences (flash) or three (plain).
	two := []batch.Seq{{Tokens: []int32{6}, Pos: 5, Blocks: a, Sample: true}, {Tokens: []int32{6, 7}, Pos: 5, Blocks: b, Sample: true}}
	three := []batch.Seq{{Tokens: []int32{6}, Pos: 5, Blocks: a, Sample: true}, {Tokens: []int32{6}, Pos: 5, Blocks: b, Sample: true}, {Tokens: []int32{3}, Pos: 5, Blocks: c, Sample: true}}
	for _, d := range allKVTypes {
		withKV(t, d, func(t *testing.T) {
			hybrid := func() *Executor {
				e, err := New(m, 64, testBlockSize, Options{LibDir: testLibDir(t), Device: testDevice(), Threads: 1, KVCacheDType: testKV, FlashMaxSeqs: 2})
				if errors.Is(err, ErrNoFlashAttention) {
					t.Skipf("flash attention on %s: %v", testDevice(), err)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(e.Close)
				return e
			}
			flash := newFlashTestExec(t, m, 64)
			plainAttention = true
			plain := newTestExec(t, m, 64)
			plainAttention = false
			for _, k := range []struct {
				name  string
				ref   *Executor
				steps [][]batch.Seq
			}{{"flash", flash, [][]batch.Seq{prompts[:2], two}}, {"plain", plain, [][]batch.Seq{prompts, three}}} {
				e := hybrid()
				for i, step := range k.steps {
					want, got := execute(t, k.ref, step), execute(t, e, step)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("%d sequences, step %d: logits differ from %s attention's", len(step), i, k.name)
					}
					if e.s.flash != (k.name == "flash") {
						t.Errorf("%d sequences, step %d: flash %v", len(step), i, e.s.flash)
					}
				}
			}
			reused, fresh := hybrid(), hybrid()
			execute(t, reused, prompts)
			execute(t, fresh, prompts)
			for i, step := range [][]batch.Seq{two, three, two, three, three} {
				fresh.freeGraph()
				if diff := cmp.Diff(execute(t, fresh, step), execute(t, reused, step)); diff != "" {
					t.Errorf("step %d (%d sequences): logits differ from a graph built afresh", i, len(step))
				}
			}
			if reused.graphsReused != 1 {
				t.Errorf("%d graphs reused, want 1 (the last step's)", reused.graphsReused)
			}
		})
	}
}

// TestPlainSpanPaddedForReuse: the plain attention pads the batch's
// gathered blocks to a bucket (paddedBlocks), masked out, so that decode
// steps whose contexts grow into new blocks keep the graph's shape. Four
// sequences at staggered positions decoding 40 steps enter a new block
// almost every step: unpadded every step builds a graph, padded one in
// four does, and the logits agree with the unpadded ones to rounding.
func TestPlainSpanPaddedForReuse(t *testing.T) {
	for n, want := range map[int]int{1: 4, 4: 4, 5: 8, 63: 64, 64: 64, 65: 72, 200: 208, 300: 320} {
		if got := paddedBlocks(n); got != want {
			t.Errorf("paddedBlocks(%d) = %d, want %d", n, got, want)
		}
	}
	// F32 weights and cache: the CPU then rounds no activation to F16, and
	// what padding changes is the order of the attention's sums only.
	m := randomModel(t, wideHeads()["qwen2"], model.F32, 4)
	plainAttention = true
	defer func() { plainAttention = false }()
	padded, exact := newTestExec(t, m, 256), newTestExec(t, m, 256)
	exact.exactSpan = true
	var seqs []batch.Seq
	for i := range 4 {
		prompt := make([]int32, 3+i) // staggered: each enters its blocks at another step
		for j := range prompt {
			prompt[j] = int32(1 + (i*7+j*3)%300)
		}
		seqs = append(seqs, batch.Seq{Tokens: prompt, Blocks: contiguous(i*60, 60), Sample: true})
	}
	// On CUDA, F32 matrices multiply in TF32 (TestGreedyMatchesCPU), and
	// the padded span's wider products round otherwise: 4.0e-4 of the
	// scale on an H200.
	tol := 1e-5
	if testDevice() != DeviceCPU {
		tol = 2e-3
	}
	for step := range 40 {
		want, got := execute(t, exact, seqs), execute(t, padded, seqs)
		if d := maxRelDiff(want, got); d > tol {
			t.Fatalf("step %d: logits of the padded span differ from the exact span's by %.3g of their scale", step, d)
		}
		for i := range seqs {
			if argmax(want[i]) != argmax(got[i]) {
				t.Fatalf("step %d, sequence %d: padded span picks token %d, exact %d", step, i, argmax(got[i]), argmax(want[i]))
			}
			seqs[i].Pos += len(seqs[i].Tokens)
			seqs[i].Tokens = []int32{argmax(got[i])}
		}
	}
	// Blocks of 4 tokens: the batch reaches one more block a step, and
	// below 64 blocks the bucket is 4 blocks wide.
	if exact.graphsBuilt < 40 || padded.graphsBuilt > 12 {
		t.Errorf("graphs built over 41 steps: %d with the exact span, %d padded; want every step but one, and one in four", exact.graphsBuilt, padded.graphsBuilt)
	}
	t.Logf("graphs built over 41 steps: exact span %d, padded %d", exact.graphsBuilt, padded.graphsBuilt)
}
