//go:build linux && (amd64 || arm64)

package ggml

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestStartErrors: each way the executor cannot start gives one error that
// names what is wrong and how to fix it.
func TestStartErrors(t *testing.T) {
	dir := testLibDir(t)
	m := model.Random(model.Config{VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, FFN: 96}, 1)

	t.Setenv(EnvLibDir, "")
	_, err := New(m, 8, 4, Options{})
	if !errors.Is(err, ErrLibraryMissing) || !strings.Contains(err.Error(), "hack/setup-ggml.sh") {
		t.Errorf("no library directory: got %v", err)
	}
	_, err = New(m, 8, 4, Options{LibDir: t.TempDir()})
	if !errors.Is(err, ErrLibraryMissing) || !strings.Contains(err.Error(), "hack/setup-ggml.sh") {
		t.Errorf("empty library directory: got %v", err)
	}
	if !fileExists(filepath.Join(dir, "libggml-cuda.so")) {
		_, err = New(m, 8, 4, Options{LibDir: dir, Device: DeviceCUDA})
		if err == nil || !strings.Contains(err.Error(), "setup-ggml.sh cuda") {
			t.Errorf("CUDA without the CUDA build: got %v", err)
		}
	}

	bad := model.Random(model.Config{VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, FFN: 96}, 1)
	bad.Weights.Layers[0].Gate.Type = model.DType(3) // Q4_1
	if _, err = New(bad, 8, 4, Options{LibDir: dir}); err == nil || !strings.Contains(err.Error(), "blk.0.ffn_gate.weight has type Q4_1") {
		t.Errorf("unsupported tensor type: got %v", err)
	}

	// A KV cache larger than the machine: refused before allocating.
	if _, err = New(m, 1<<30, 16, Options{LibDir: dir}); err == nil || !strings.Contains(err.Error(), "--kv-cache-memory") {
		t.Errorf("too big for the device: got %v", err)
	}
}

func TestExecuteErrors(t *testing.T) {
	m := model.Random(model.Config{VocabSize: 300, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, FFN: 96}, 1)
	e := newTestExec(t, m, 4)
	exectest.CheckExecuteErrors(t, e, testBlockSize,
		exectest.ErrorCase{Name: "beyond the context", Seq: batch.Seq{Tokens: []int32{1}, Pos: 4096, Blocks: make([]kvcache.BlockID, 1025)}, Want: "beyond the context length"})
}

// TestProbeLeavesNoTrace: the start-up forward pass that GPUs run (probe)
// gives finite logits and changes nothing a later sequence in block 0
// computes.
func TestProbeLeavesNoTrace(t *testing.T) {
	m := randomModel(t, parityConfigs()["llama"], model.F16, 3)
	probed, fresh := newTestExec(t, m, 8), newTestExec(t, m, 8)
	if err := probed.probe(); err != nil {
		t.Fatal(err)
	}
	seq := []batch.Seq{{Tokens: []int32{7, 1, 2}, Blocks: contiguous(0, 1), Sample: true}}
	got, want := execute(t, probed, seq)[0], execute(t, fresh, seq)[0]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logits after the probe differ (-fresh +probed):\n%s", diff)
	}
}

// TestCUDAPDLOffUnlessSet: the CUDA backend starts with ggml's programmatic
// dependent launch off (GGML_CUDA_PDL=0) and its CUDA graphs off
// (GGML_CUDA_DISABLE_GRAPHS set), unless the environment names the
// variable already; Options.CUDAGraphs skips the second.
func TestCUDAPDLOffUnlessSet(t *testing.T) {
	for _, sw := range []struct {
		env, def string
		off      func() error
	}{{EnvCUDAPDL, "0", cudaPDLOffByDefault}, {EnvCUDADisableGraphs, "1", cudaGraphsOffByDefault}} {
		for _, tc := range []struct {
			env  string
			set  bool
			want string
		}{{want: sw.def}, {env: "1", set: true, want: "1"}, {env: "0", set: true, want: "0"}, {env: "", set: true, want: ""}} {
			t.Setenv(sw.env, tc.env) // restored after the test
			if !tc.set {
				os.Unsetenv(sw.env)
			}
			if err := sw.off(); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.LookupEnv(sw.env); got != tc.want {
				t.Errorf("%s=%q (set %v): after start %q, want %q", sw.env, tc.env, tc.set, got, tc.want)
			}
		}
	}
}
