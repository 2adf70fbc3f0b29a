//go:build linux && (amd64 || arm64)

package ggml

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// defaultThreads is the CPU backend's thread count when none is given: one
// per physical core among the CPUs this process may run on, at most
// GOMAXPROCS (which follows the container's CPU limit). ggml's matrix
// kernels saturate a core's vector units, so a second hardware thread on the
// same core adds little, and every thread costs a spinning wait at each of
// the graph's nodes (see docs/benchmarks.md).
func defaultThreads() int {
	var set unix.CPUSet
	var cpus []int
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		for c := range 1024 {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
	}
	return physicalCores("/sys/devices/system/cpu", cpus, runtime.GOMAXPROCS(0))
}

// physicalCores counts the distinct (package, core) pairs of cpus as sysfs
// under root describes them, capped at limit. A CPU whose topology cannot be
// read counts as a core of its own; with no CPUs known the answer is limit.
func physicalCores(root string, cpus []int, limit int) int {
	if len(cpus) == 0 {
		return max(limit, 1)
	}
	read := func(cpu int, name string) string {
		b, err := os.ReadFile(filepath.Join(root, "cpu"+strconv.Itoa(cpu), "topology", name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	cores := map[string]bool{}
	for _, c := range cpus {
		pkg, core := read(c, "physical_package_id"), read(c, "core_id")
		key := pkg + "/" + core
		if core == "" {
			key = "cpu" + strconv.Itoa(c)
		}
		cores[key] = true
	}
	return max(min(len(cores), limit), 1)
}
