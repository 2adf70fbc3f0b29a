package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/ggml"
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
		lib := os.Getenv(ggml.EnvLibDir)
		if lib == "" {
			if dir, err := os.UserCacheDir(); err == nil && fileExistsAt(filepath.Join(dir, "kvpilot", "ggml", "3.22.1", "cpu", "libggml-base.so")) {
				lib = filepath.Join(dir, "kvpilot", "ggml", "3.22.1", "cpu")
			}
		}
		if lib == "" {
			t.Skipf("ggml libraries not installed: run hack/setup-ggml.sh and set %s (make test does both)", ggml.EnvLibDir)
		}
		base := []string{"--executor", "ggml", "--device", "cpu", "--ggml-lib", lib, "--cpu-threads", "1"}
		f16, d := blocks(t, append(base, "--kv-cache-dtype", "f16")...)
		f32, _ := blocks(t, append(base, "--kv-cache-dtype", "f32")...)
		if d != kvcache.DTypeF16 || f16 != 2*f32 || f32 == 0 {
			t.Errorf("ggml: f16 (%s) holds %d blocks, f32 %d; want twice as many", d, f16, f32)
		}
	})
}

func fileExistsAt(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
