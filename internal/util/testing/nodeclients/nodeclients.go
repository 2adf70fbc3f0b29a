// Package nodeclients runs Node.js API clients (OpenAI's `openai`, the
// Vercel AI SDK, Anthropic's SDK, zod, ajv, ajv-formats) against a runtime on loopback,
// for tests that check the API the way agent frameworks use it. The
// packages are installed once into a cache by the repo's
// hack/setup-node-clients.sh (the one place their versions are pinned). It
// is imported only from _test.go files.
package nodeclients

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Dir installs the clients (once; later calls reuse the cache) and returns
// the directory holding their node_modules. It skips the test, saying why,
// when node or npm is missing or the registry cannot be reached.
func Dir(t testing.TB) string {
	t.Helper()
	script := filepath.Join(repoRoot(t), "hack", "setup-node-clients.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		t.Skipf("Node.js clients unavailable, skipping: %s", bytes.TrimSpace(stderr.Bytes()))
	case ctx.Err() != nil:
		t.Skipf("installing the Node.js clients timed out (registry unreachable?), skipping: %s", stderr.Bytes())
	case err != nil:
		t.Fatalf("%s: %v\n%s", script, err, stderr.Bytes())
	}
	return string(bytes.TrimSpace(out))
}

// Run runs a Node.js module (a file: ES module .mjs, CommonJS .cjs) with
// the clients of dir on its path and env added to the environment, and
// returns its last output line (scripts print their findings there as
// JSON). A failing script fails the test with its whole output.
func Run(t testing.TB, dir, module string, env ...string) []byte {
	t.Helper()
	lines := bytes.Split(Output(t, dir, module, env...), []byte("\n"))
	return lines[len(lines)-1]
}

// Output runs module as Run does and returns all it printed, trimmed.
func Output(t testing.TB, dir, module string, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// An ES module resolves packages from its own directory upwards, not
	// from NODE_PATH: it runs from a copy placed beside node_modules.
	src, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(dir, "test-*"+filepath.Ext(module))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(src); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cmd := exec.CommandContext(ctx, "node", f.Name())
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", filepath.Base(module), err, out)
	}
	return bytes.TrimSpace(out)
}

// repoRoot is the module root: the directory above the working directory
// that holds go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
