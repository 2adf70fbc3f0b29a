// Package llamacpp finds, for tests, the llama.cpp that
// hack/setup-llama-cpp.sh installs: node-llama-cpp 3.22.1 (llama.cpp
// v0.5.0, ggml 0.25.1) and the llama.cpp source tree its package ships,
// the references every architecture, tokenizer and template is held to.
// Without them a test skips, naming what is missing, or fails when
// KVPILOT_REQUIRE_LLAMA_CPP is set (as .ci/run sets it).
package llamacpp

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const (
	// EnvDir names the install (what hack/setup-llama-cpp.sh prints);
	// `make test` sets it.
	EnvDir = "KVPILOT_LLAMA_CPP_DIR"
	// EnvRequire makes a missing install fail the tests that need it
	// instead of skipping them.
	EnvRequire = "KVPILOT_REQUIRE_LLAMA_CPP"
	// Version is the node-llama-cpp release the repo pins.
	Version = "3.22.1"
)

// Missing skips t with the reason, or fails it under EnvRequire.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(EnvRequire) != "" {
		t.Fatalf("%s is set: "+format, append([]any{EnvRequire}, args...)...)
	}
	t.Skipf(format, args...)
}

// Dir is the node-llama-cpp install: $KVPILOT_LLAMA_CPP_DIR, else the
// script's default cache when it is complete. It holds node_modules.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvDir)
	if dir == "" {
		if cache, err := os.UserCacheDir(); err == nil {
			if d := filepath.Join(cache, "kvpilot", "node-llama-cpp", Version); exists(filepath.Join(d, ".complete")) {
				dir = d
			}
		}
	}
	if dir == "" {
		Missing(t, "llama.cpp not installed: run hack/setup-llama-cpp.sh and set %s (make test does both when npm's registry answers)", EnvDir)
	}
	if !exists(filepath.Join(dir, "node_modules", "node-llama-cpp", "package.json")) {
		Missing(t, "%s=%s holds no node_modules/node-llama-cpp: run hack/setup-llama-cpp.sh", EnvDir, dir)
	}
	return dir
}

// Node is Dir for tests that run llama.cpp itself in node: it also
// needs node on the PATH.
func Node(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		Missing(t, "node is not installed: llama.cpp runs in node-llama-cpp")
	}
	return Dir(t)
}

// Source is the root of the llama.cpp source tree (models/, src/,
// tests/), cloned by hack/setup-llama-cpp.sh into Dir/llama.cpp.
func Source(t testing.TB) string {
	t.Helper()
	src := filepath.Join(Dir(t), "llama.cpp")
	if !exists(filepath.Join(src, ".complete")) {
		Missing(t, "the llama.cpp source tree is not at %s: run hack/setup-llama-cpp.sh (it needs git)", src)
	}
	return src
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
