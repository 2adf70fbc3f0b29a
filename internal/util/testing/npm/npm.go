// Package npm installs npm packages (the JavaScript clients agents use:
// openai, zod, ajv…) for loopback tests, into a cache outside the
// repository, once per package set. Tests that need them skip, saying
// why, when node or npm is missing or the registry cannot be reached.
package npm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// installTimeout bounds one npm install: past it the registry is taken
// to be unreachable.
const installTimeout = 3 * time.Minute

// Install makes packages (npm specs such as "zod@4") available and
// returns the node_modules directory holding them, for NODE_PATH. The
// set is installed once into $XDG_CACHE_HOME/kvpilot/npm-<name>-<hash of
// the specs> (a new set of specs gets a new directory; an interrupted
// install is never mistaken for a finished one). It skips t when node or
// npm is missing or the install fails.
func Install(t testing.TB, name string, packages ...string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: skipping the test of the npm packages %s", tool, strings.Join(packages, " "))
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache directory for npm packages: %v", err)
	}
	sum := sha256.Sum256([]byte(strings.Join(packages, "\x00")))
	dir := filepath.Join(cache, "kvpilot", fmt.Sprintf("npm-%s-%s", name, hex.EncodeToString(sum[:4])))
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(dir, "installed")); err == nil {
		return modules
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// Install beside the final directory and rename: concurrent test
	// processes each install, and one rename wins.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	args := append([]string{"install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error"}, packages...)
	cmd := exec.Command("npm", args...)
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(installTimeout):
		_ = cmd.Process.Kill()
		<-done
		t.Skipf("npm install %s timed out: the registry is unreachable; skipping", strings.Join(packages, " "))
	}
	if err != nil {
		t.Skipf("npm install %s failed (registry unreachable?): skipping: %v\n%s", strings.Join(packages, " "), err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "installed"), []byte(strings.Join(packages, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "installed")); statErr != nil {
			t.Fatalf("installing npm packages: %v", err)
		}
	}
	return modules
}

// Run runs a node script with NODE_PATH set to modules and env added to
// the environment; it returns the script's standard output and fails t
// (with the script's standard error) when the script fails.
func Run(t testing.TB, modules, script string, env ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", "-e", script)
	cmd.Env = append(append(os.Environ(), "NODE_PATH="+modules), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	return out
}
