//go:build linux && (amd64 || arm64)

package ggml

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
)

// TestSplitModelFile: a model written in parts of 5 tensors
// (llama.cpp's gguf-split layout) and loaded from its first part runs as
// the same model written whole: the same greedy tokens and logits, bit for
// bit, for llama and deepseek2; on the CPU every part's tensors run from
// its own mapping.
func TestSplitModelFile(t *testing.T) {
	for _, cfg := range []model.Config{parityConfigs()["llama"], deepseek2Config()} {
		t.Run(cfg.Arch, func(t *testing.T) {
			m := randomModel(t, cfg, model.Q8_0, 12)
			whole, split := exectest.WriteAndLoad(t, m), exectest.WriteSplitAndLoad(t, m, 5)
			a, b := newTestExec(t, whole, 64), newTestExec(t, split, 64)
			if testDevice() == DeviceCPU && len(b.mappedBufs) != len(a.mappedBufs) {
				t.Errorf("%d tensors run from the split files' mappings, %d from the whole file's", len(b.mappedBufs), len(a.mappedBufs))
			}
			prompt := make([]int32, 40)
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range prompt {
				prompt[i] = int32(rng.IntN(cfg.VocabSize))
			}
			wantToks, wantLogits := greedy(t, a, prompt, 12)
			gotToks, gotLogits := greedy(t, b, prompt, 12)
			if diff := cmp.Diff(wantToks, gotToks); diff != "" {
				t.Errorf("greedy tokens (-whole +split):\n%s", diff)
			}
			if !cmp.Equal(wantLogits, gotLogits) {
				t.Errorf("logits of the split files differ from the whole file's")
			}
		})
	}
}

// TestSplitModelParityWithLlamaCpp: llama.cpp loads the parts
// model.WriteSplitGGUF writes from their first (its loader's split path),
// and the executor over the same parts generates its greedy tokens
// (checkGreedyParity), deepseek2 in F16.
func TestSplitModelParityWithLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llama.cpp in node: not in -short runs")
	}
	lib := testLibDir(t)
	if testDevice() != DeviceCPU {
		t.Skipf("llama.cpp runs on the CPU here, not on %s", testDevice())
	}
	dir := llamacpp.Node(t)
	in, err := parityModel(deepseek2Config(), 7).Convert(model.F16)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := model.WriteSplitGGUF(filepath.Join(t.TempDir(), "deepseek2"), in, 7)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(paths[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	t.Logf("%d parts", len(paths))
	lc := startLlamaCpp(t, "llama-cpp-greedy.mjs", dir, paths[0], 1, kvcache.DTypeF16)
	t.Cleanup(lc.close)
	opts := Options{LibDir: lib, Device: DeviceCPU, Threads: 1, KVCacheDType: kvcache.DTypeF16}
	blocks := parityMaxModelLen / parityBlockSize
	eng := parityEngine(t, m, newParityExec(t, m, blocks, opts), blocks)
	rng := rand.New(rand.NewPCG(41, parityShortPrompt))
	prompt := make([]int32, parityShortPrompt)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(m.Config.VocabSize))
	}
	checkGreedyParity(t, lc, eng, newParityExec(t, m, blocks, opts), blocks, prompt)
}
