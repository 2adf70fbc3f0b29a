//go:build linux && (amd64 || arm64)

package ggml

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
)

// TestQuantizedExpertsMatchLlamaCpp: a qwen3moe GGUF in Q4_0 and in Q4_K
// (the types of the files people download, whose experts llama.cpp puts
// in ggml's repacked CPU buffer where the CPU offers it, as the executor
// does) gives llama.cpp's logits, within parityLogitsTol, at every step
// of a greedy decode fed llama.cpp's tokens. Experts make this a test of
// placement too: a router's near-tie, summed in another order (repacked
// or not), picks another expert and moves the logits by a percent, far
// beyond the tolerance.
func TestQuantizedExpertsMatchLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llama.cpp in node: not in -short (race) runs")
	}
	if testDevice() != DeviceCPU {
		t.Skipf("llama.cpp runs on the CPU here, not %s", testDevice())
	}
	libDir := testLibDir(t)
	lib, err := Open(libDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := llamacpp.Node(t)
	// Rows of 256: Q4_K's block.
	cfg := model.Config{Arch: model.ArchQwen3MoE, VocabSize: 320, Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 512, TiedEmbeddings: true, RopeTheta: 1e6, NormEps: 1e-6,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 256}
	const steps = 16
	prompt := []int32{5, 17, 99, 3, 250, 11, 42, 7, 8, 200, 31, 64}
	for _, typ := range []model.DType{model.Q4_0, model.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			q, err := lib.QuantizeModel(parityModel(cfg, 3), typ)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "qwen3moe-"+strings.ToLower(typ.String())+".gguf")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := model.WriteGGUF(f, q); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			m, lc := openParity(t, dir, path)
			var want struct {
				Tokens []int32
				Logits [][]float32
			}
			lc.ask(t, map[string]any{"op": "greedy", "prompt": prompt, "steps": steps}, &want)
			if len(want.Logits) != steps {
				t.Fatalf("llama.cpp answered %d logit rows, want %d", len(want.Logits), steps)
			}
			blocks := 64
			e := newParityExec(t, m, blocks, Options{LibDir: libDir, Device: DeviceCPU, Threads: 1, KVCacheDType: kvcache.DTypeF16})
			t.Logf("%s", e.Weights())
			in, pos, diff := prompt, 0, 0.0
			for i := range steps {
				l := exectest.Execute(t, e, parityBlockSize, []batch.Seq{{Tokens: in, Pos: pos, Blocks: contiguous(0, blocks), Sample: true}})
				if argmax(l[0]) != want.Tokens[i] {
					t.Errorf("step %d: argmax %d, llama.cpp's %d", i, argmax(l[0]), want.Tokens[i])
				}
				for j := range l[0] {
					diff = math.Max(diff, math.Abs(float64(l[0][j]-want.Logits[i][j])))
				}
				pos += len(in)
				in = []int32{want.Tokens[i]}
			}
			t.Logf("%d steps: logits max |diff| %.3g", steps, diff)
			if diff > parityLogitsTol {
				t.Errorf("logits differ from llama.cpp's by up to %.3g, more than %g", diff, parityLogitsTol)
			}
		})
	}
}
