//go:build linux && (amd64 || arm64)

package ggml

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPhysicalCores: hardware threads of one core count once, the count is
// capped by GOMAXPROCS's limit, and unreadable topology counts each CPU.
func TestPhysicalCores(t *testing.T) {
	root := t.TempDir()
	// Four CPUs, two cores with two hardware threads each (an SMT host).
	for cpu, core := range []string{"0", "1", "0", "1"} {
		d := filepath.Join(root, "cpu"+strconv.Itoa(cpu), "topology")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"core_id": core, "physical_package_id": "0"} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		cpus        []int
		limit, want int
	}{
		{[]int{0, 1, 2, 3}, 4, 2}, // siblings counted once
		{[]int{0, 2}, 4, 1},       // both threads of core 0
		{[]int{0, 1, 2, 3}, 1, 1}, // GOMAXPROCS caps it
		{[]int{0, 1, 7, 8}, 8, 4}, // cpu7, cpu8 have no topology: one core each
		{nil, 3, 3},               // affinity unknown: the limit
	} {
		if got := physicalCores(root, c.cpus, c.limit); got != c.want {
			t.Errorf("physicalCores(%v, limit %d) = %d, want %d", c.cpus, c.limit, got, c.want)
		}
	}
	if n := defaultThreads(); n < 1 {
		t.Errorf("defaultThreads() = %d", n)
	}
}
