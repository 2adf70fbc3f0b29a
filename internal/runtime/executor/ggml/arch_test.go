//go:build linux && (amd64 || arm64)

package ggml

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/llama"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// testArch is an architecture outside the llama family as the executor
// sees it: qwen2's tensors and forward pass under another name, counting
// the graphs it builds.
type testArch struct{ arch.Architecture }

func (testArch) Name() string { return "ggml-test-arch" }

func (a testArch) Bind(c arch.Config, weight func(string) arch.Tensor) (arch.Forward, error) {
	fw, err := a.Architecture.Bind(c, weight)
	return &countingForward{Forward: fw}, err
}

type countingForward struct {
	arch.Forward
	builds int
}

func (f *countingForward) Build(o arch.Ops) arch.Tensor {
	f.builds++
	return f.Forward.Build(o)
}

var registerTestArch sync.Once

// TestRunsTheRegisteredArchitecture: the executor builds its graphs
// through the model's architecture, whatever its name (a registered one
// the cpu executor refuses runs here): the renamed qwen2 gives qwen2's
// logits, and the architecture builds only the graphs the executor does
// not reuse.
func TestRunsTheRegisteredArchitecture(t *testing.T) {
	registerTestArch.Do(func() { arch.Register(testArch{llama.Qwen2}) })
	bothAttentions(t, func(t *testing.T) {
		cfg := wideHeads()["qwen2"]
		want := newTestExec(t, randomModel(t, cfg, model.F16, 3), 32)
		cfg.Arch = "ggml-test-arch"
		got := newTestExec(t, randomModel(t, cfg, model.F16, 3), 32)
		a, b := contiguous(0, 4), contiguous(8, 4)
		steps := [][]batch.Seq{
			{{Tokens: []int32{1, 2, 3, 4, 5}, Blocks: a, Sample: true}, {Tokens: []int32{9, 8, 7}, Blocks: b, Sample: true}},
			{{Tokens: []int32{6}, Pos: 5, Blocks: a, Sample: true}, {Tokens: []int32{6}, Pos: 3, Blocks: b, Sample: true}},
			{{Tokens: []int32{7}, Pos: 6, Blocks: a, Sample: true}, {Tokens: []int32{5}, Pos: 4, Blocks: b, Sample: true}},
			{{Tokens: []int32{8}, Pos: 7, Blocks: a, Sample: true}, {Tokens: []int32{4}, Pos: 5, Blocks: b, Sample: true}},
		}
		for i, seqs := range steps {
			if diff := cmp.Diff(execute(t, want, seqs), execute(t, got, seqs)); diff != "" {
				t.Errorf("step %d: logits differ from qwen2's", i)
			}
		}
		probe := 0 // on a GPU, New runs one forward pass (probe) and counts no graph for it
		if testDevice() != DeviceCPU {
			probe = 1
		}
		if n := got.fw.(*countingForward).builds; n != got.graphsBuilt+probe || got.graphsReused == 0 {
			t.Errorf("the architecture built %d graphs; the executor built %d and reused %d", n, got.graphsBuilt, got.graphsReused)
		}
	})
}
