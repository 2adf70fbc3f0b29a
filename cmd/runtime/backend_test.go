package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/device"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/ggml"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestKVCapacityFollowsDType: on the same --kv-cache-memory the runtime
// sizes the KV cache from the cache's type: the ggml executor holds twice
// the blocks in f16 as in f32, and the sim executor's 70B profile twice in
// bf16 (its auto) as in f32; the backend reports the type for the metrics.
func TestKVCapacityFollowsDType(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	blocks := func(t *testing.T, args ...string) (int, kvcache.DType) {
		t.Helper()
		o, err := parseOptions(append(args, "--kv-cache-memory", "64Mi"), env(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		be, err := buildBackend(o, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		defer be.close()
		if be.kvBytesPerBlock*int64(be.numBlocks) > 64<<20 {
			t.Errorf("%q: %d blocks of %d bytes exceed the 64 MiB budget", args, be.numBlocks, be.kvBytesPerBlock)
		}
		return be.numBlocks, be.kvDType
	}
	t.Run("sim", func(t *testing.T) {
		bf, d := blocks(t, "--executor", "sim", "--sim-model", "llama-3.1-70b")
		f32, _ := blocks(t, "--executor", "sim", "--sim-model", "llama-3.1-70b", "--kv-cache-dtype", "f32")
		if d != kvcache.DTypeBF16 || bf != 2*f32 || f32 == 0 {
			t.Errorf("sim: auto (%s) holds %d blocks, f32 %d; want bf16 holding twice as many", d, bf, f32)
		}
	})
	t.Run("ggml", func(t *testing.T) {
		base := []string{"--executor", "ggml", "--device", "cpu", "--ggml-lib", testGGMLLib(t), "--cpu-threads", "1"}
		f16, d := blocks(t, append(base, "--kv-cache-dtype", "f16")...)
		f32, _ := blocks(t, append(base, "--kv-cache-dtype", "f32")...)
		if d != kvcache.DTypeF16 || f16 != 2*f32 || f32 == 0 {
			t.Errorf("ggml: f16 (%s) holds %d blocks, f32 %d; want twice as many", d, f16, f32)
		}
	})
}

// writeRandomGGUF writes a random model of cfg to a GGUF file of its own
// and returns its path.
func writeRandomGGUF(t *testing.T, cfg model.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), cfg.Arch+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteGGUF(f, model.Random(cfg.WithDefaults(), 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// envRequireGGML makes missing ggml libraries fail the tests that need
// them instead of skipping them (make test sets it, as for the ggml
// package's tests).
const envRequireGGML = "KVPILOT_REQUIRE_GGML"

// testGGMLLib is the ggml CPU libraries' directory, or skips t (fails it
// under KVPILOT_REQUIRE_GGML).
func testGGMLLib(t *testing.T) string {
	t.Helper()
	lib := os.Getenv(ggml.EnvLibDir)
	if lib == "" {
		if dir, err := os.UserCacheDir(); err == nil && fileExistsAt(filepath.Join(dir, "kvpilot", "ggml", "3.22.1", "cpu", "libggml-base.so")) {
			lib = filepath.Join(dir, "kvpilot", "ggml", "3.22.1", "cpu")
		}
	}
	if lib == "" {
		msg := fmt.Sprintf("ggml libraries not installed: run hack/setup-ggml.sh and set %s (make test does both)", ggml.EnvLibDir)
		if os.Getenv(envRequireGGML) != "" {
			t.Fatalf("%s is set: %s", envRequireGGML, msg)
		}
		t.Skip(msg)
	}
	return lib
}

func fileExistsAt(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestKVMemoryForFraction(t *testing.T) {
	const gib = int64(1) << 30
	for _, tt := range []struct {
		name     string
		device   uint64
		fraction float64
		weights  int64
		want     int64 // 0: an error
	}{
		{name: "L4, 8B at Q4_K_M", device: 24 << 30, fraction: 0.75, weights: 4 * gib, want: 18*gib - 4*gib - 2*gib},
		{name: "H100, 8B at F16, all of it", device: 80 << 30, fraction: 1, weights: 15 * gib, want: 63 * gib},
		{name: "weights fill the fraction", device: 24 << 30, fraction: 0.5, weights: 15 * gib},
		{name: "exactly full", device: 16 << 30, fraction: 1, weights: 14 * gib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kvMemoryForFraction(tt.device, tt.fraction, tt.weights, sim.ActivationReserve)
			if tt.want == 0 {
				if err == nil {
					t.Fatalf("got %d bytes, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestGGMLFractionNeedsAGPU: ggml sizes a KV cache from
// --kv-cache-memory-fraction only on a GPU NVML found, says why otherwise,
// and does not fall back to the CPU with a cache sized for the GPU.
func TestGGMLFractionNeedsAGPU(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gpu := func(name string, mem uint64) []device.Device {
		return []device.Device{{Index: 0, Vendor: "nvidia", Name: name, MemoryBytes: mem}}
	}
	for _, tt := range []struct {
		name string
		devs []device.Device
		want string
	}{
		{name: "no GPU", want: "NVML found no GPU"},
		// Half of 1 GiB is less than the compute reserve alone.
		{name: "a GPU too small", devs: gpu("small GPU", 1<<30), want: "GPU 0 (small GPU): --kv-cache-memory-fraction 0.5 of 1024 MiB is 512 MiB"},
		// No ggml libraries at all, so the CUDA backend cannot start.
		{name: "no CUDA backend", devs: gpu("big GPU", 80<<30), want: "does not fall back to ggml's CPU kernels"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"--executor", "ggml", "--kv-cache-memory-fraction", "0.5", "--ggml-lib", t.TempDir()}
			o, err := parseOptions(args, env(nil), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			be, err := buildBackend(o, tt.devs, log)
			if err == nil {
				be.close()
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to say %q", err, tt.want)
			}
		})
	}
}

// TestBackendArchitecture: /v1/models reports the model file's
// architecture (server.Config.ModelArchitecture, from the backend): the
// loaded GGUF's general.architecture, none for the sim executor.
func TestBackendArchitecture(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	qwen2 := writeRandomGGUF(t, model.Config{Arch: model.ArchQwen2, VocabSize: model.ByteVocabSize, Dim: 32, Layers: 1, Heads: 2, FFN: 64, ContextLen: 256, QKVBias: true})
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--executor", "cpu"}, "llama"}, // builtin:tiny
		{[]string{"--executor", "cpu", "--model", qwen2}, "qwen2"},
		{[]string{"--executor", "sim"}, ""},
	} {
		o, err := parseOptions(append(tt.args, "--kv-cache-memory", "16Mi"), env(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if tt.args[1] == "sim" {
			o.KVCacheMemory = 0
		}
		be, err := buildBackend(o, nil, log)
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		be.close()
		if be.architecture != tt.want {
			t.Errorf("%q: architecture %q, want %q", tt.args, be.architecture, tt.want)
		}
	}
}

// TestSimWeightBits: GLM-4.5-Air's BF16 weights (214 GB) do not fit one
// simulated H100; at --sim-weight-bits 4.5 (60 GB) they do, and the
// blocks are what the 0.9 fraction leaves beside them.
func TestSimWeightBits(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	build := func(args ...string) (*backend, error) {
		o, err := parseOptions(append([]string{"--executor", "sim", "--sim-model", "glm-4.5-air"}, args...), env(nil), io.Discard)
		if err != nil {
			return nil, err
		}
		return buildBackend(o, nil, log)
	}
	if _, err := build(); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("GLM-4.5-Air in BF16 on one H100: %v, want it not to fit", err)
	}
	be, err := build("--sim-weight-bits", "4.5")
	if err != nil {
		t.Fatal(err)
	}
	defer be.close()
	acc, _ := sim.LookupAccelerator("H100-SXM")
	geom, _ := sim.LookupGeometry("glm-4.5-air")
	want, err := sim.KVBlocksForDevice(acc, geom.WithWeightBits(4.5, 0), 1, 0.9, 16)
	if err != nil || be.numBlocks != want || want == 0 {
		t.Errorf("at 4.5 bits: %d blocks, want %d (%v)", be.numBlocks, want, err)
	}
	for _, bad := range [][]string{{"--sim-weight-bits", "0.5"}, {"--sim-weight-bits", "64"}} {
		if _, err := build(bad...); err == nil || !strings.Contains(err.Error(), "--sim-weight-bits") {
			t.Errorf("%q: %v, want an error naming --sim-weight-bits", bad, err)
		}
	}
	if _, err := parseOptions([]string{"--sim-weight-bits", "8"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "--executor sim only") {
		t.Errorf("--sim-weight-bits with the cpu executor: %v", err)
	}
}

// TestSimHybridBackend: a hybrid sim model gets recurrent-state slots
// sized beside its KV (two a sequence, at most half the cache), and
// reports a state's cost in KV tokens; with explicit blocks, two a
// sequence.
func TestSimHybridBackend(t *testing.T) {
	build := func(args ...string) *backend { return buildSimBackend(t, "qwen3.6-35b-a3b", args...) }
	acc, _ := sim.LookupAccelerator("H200")
	geom, _ := sim.LookupGeometry("qwen3.6-35b-a3b")
	blocks, slots, err := sim.StateSlotsForDevice(acc, geom, 1, 0.9, 16, 256)
	if err != nil {
		t.Fatal(err)
	}
	be := build()
	if be.numBlocks != blocks || be.stateSlots != slots || be.stateBytes != geom.StateBytes() || be.stateTokens != (geom.StateBytes()+20479)/20480 {
		t.Errorf("%d blocks, %d state slots, %d state bytes (%d tokens); want %d, %d, %d", be.numBlocks, be.stateSlots, be.stateBytes, be.stateTokens, blocks, slots, geom.StateBytes())
	}
	if be := build("--kv-cache-blocks", "1000", "--max-num-seqs", "8"); be.numBlocks != 1000 || be.stateSlots != 16 {
		t.Errorf("--kv-cache-blocks 1000, 8 sequences: %d blocks, %d state slots", be.numBlocks, be.stateSlots)
	}
}
