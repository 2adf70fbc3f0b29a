//go:build linux && (amd64 || arm64)

package ggml

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
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

// TestCgroupCPUs: the CPU quota of the process's cgroup, from cgroup v2's
// cpu.max or v1's CFS quota, rounded up, the smallest along the path to the
// root, and read at the hierarchy's root when the named path is the host's
// (a container).
func TestCgroupCPUs(t *testing.T) {
	for _, c := range []struct {
		name   string
		cgroup string
		files  map[string]string
		want   int
	}{
		{"v2 limit of 1.5 CPUs", "0::/kubepods/pod1/ctr\n", map[string]string{"kubepods/pod1/ctr/cpu.max": "150000 100000\n"}, 2},
		{"v2 ancestor limits more", "0::/kubepods/pod1/ctr\n", map[string]string{"kubepods/pod1/ctr/cpu.max": "400000 100000", "kubepods/pod1/cpu.max": "100000 100000"}, 1},
		{"v2 no limit", "0::/kubepods/pod1/ctr\n", map[string]string{"kubepods/pod1/ctr/cpu.max": "max 100000"}, 0},
		{"v2 container's own root", "0::/\n", map[string]string{"cpu.max": "300000 100000"}, 3},
		{"v1 host path, container root", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n", map[string]string{
			"cpu,cpuacct/cpu.cfs_quota_us": "200000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 2},
		{"v1 no quota", "3:cpu,cpuacct:/\n", map[string]string{"cpu,cpuacct/cpu.cfs_quota_us": "-1", "cpu,cpuacct/cpu.cfs_period_us": "100000"}, 0},
		{"v1 separate cpu hierarchy", "2:cpuacct:/\n1:cpu:/x\n", map[string]string{"cpu/x/cpu.cfs_quota_us": "50000", "cpu/x/cpu.cfs_period_us": "100000"}, 1},
		{"no cgroup files", "0::/a\n", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "sys", "fs", "cgroup")
			for name, body := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cg := filepath.Join(dir, "cgroup")
			if err := os.WriteFile(cg, []byte(c.cgroup), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := cgroupCPUs(cg, root); got != c.want {
				t.Errorf("cgroupCPUs = %d, want %d", got, c.want)
			}
		})
	}
	if got := cgroupCPUs(filepath.Join(t.TempDir(), "missing"), "/nonexistent"); got != 0 {
		t.Errorf("without /proc/self/cgroup: %d, want 0", got)
	}
}

// TestThreadPoolSleepsBetweenGraphs: the CPU backend's pool was created
// with polling 0 (the parameters' layout was the one the binding knows), or
// what Options.Poll asks.
func TestThreadPoolSleepsBetweenGraphs(t *testing.T) {
	if testDevice() != DeviceCPU {
		t.Skip("the thread pool is the CPU backend's")
	}
	m := randomModel(t, parityConfigs()["llama"], model.F32, 1)
	for _, poll := range []int{0, 50} {
		e, err := New(m, 4, testBlockSize, Options{LibDir: testLibDir(t), Device: DeviceCPU, Threads: 2, Poll: poll})
		if err != nil {
			t.Fatal(err)
		}
		if e.be.Poll != poll || e.be.Threads != 2 {
			t.Errorf("asked for polling %d: the pool has polling %d (-1: unknown layout), %d threads", poll, e.be.Poll, e.be.Threads)
		}
		execute(t, e, []batch.Seq{{Tokens: []int32{1, 2, 3}, Blocks: contiguous(0, 1), Sample: true}})
		e.Close()
	}
	if _, err := New(m, 4, testBlockSize, Options{LibDir: testLibDir(t), Device: DeviceCPU, Poll: 101}); err == nil {
		t.Error("polling level 101 accepted")
	}
}
