//go:build linux && (amd64 || arm64)

package ggml

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// TestGraphReusedForTheSameShape: decode steps of the same batch structure
// reuse the last graph (only the inputs change) and give the logits of a
// graph built afresh each step; a step of another structure builds anew.
func TestGraphReusedForTheSameShape(t *testing.T) {
	bothAttentions(t, func(t *testing.T) {
		m := randomModel(t, wideHeads()["qwen2"], model.F16, 4)
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
