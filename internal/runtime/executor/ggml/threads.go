//go:build linux && (amd64 || arm64)

package ggml

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// defaultThreads is the CPU backend's thread count when none is given: the
// cores this process is given. That is its cgroup's CPU quota (a pod's CPU
// limit), rounded up, where there is one, and at most one thread per
// physical core among the CPUs its affinity allows (ggml's matrix kernels
// saturate a core's vector units, so a second hardware thread of a core
// adds little). More threads than the quota would only be throttled, and
// ggml's threads meet at a spinning barrier after every graph node, where a
// throttled or descheduled thread stalls all the others.
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
	n := physicalCores("/sys/devices/system/cpu", cpus, len(cpus))
	if q := cgroupCPUs("/proc/self/cgroup", "/sys/fs/cgroup"); q > 0 {
		n = min(n, q)
	}
	return max(n, 1)
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

// cgroupCPUs is the CPU quota of the process's cgroup in whole CPUs,
// rounded up (a limit of 1.5 CPUs is 2), 0 when there is none. cgroupFile
// is /proc/self/cgroup, root the cgroup file system's mount point. Version
// 2 (one "0::/path" line) reads cpu.max ("max 100000" or "150000 100000");
// version 1 reads cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us of the
// cpu controller's hierarchy. The cgroup's ancestors limit it too, and in
// a container the hierarchy's root is often the container's own cgroup,
// while /proc/self/cgroup names its path on the host: every directory from
// the named path up to the root that exists is read, and the smallest
// quota wins.
func cgroupCPUs(cgroupFile, root string) int {
	f, err := os.Open(cgroupFile)
	if err != nil {
		return 0
	}
	defer f.Close()
	best := math.Inf(1)
	consider := func(dir string, quota func(dir string) float64) {
		for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
			if q := quota(d); q > 0 {
				best = math.Min(best, q)
			}
			if d == root || !strings.HasPrefix(d, root) {
				return
			}
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		if parts[0] == "0" && ctrls == "" {
			consider(filepath.Join(root, path), cpuMaxV2)
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c != "cpu" {
				continue
			}
			for _, mount := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
				base := filepath.Join(root, mount)
				consider(filepath.Join(base, path), func(d string) float64 {
					if !strings.HasPrefix(d, base) {
						return 0
					}
					return cfsQuotaV1(d)
				})
			}
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return int(math.Ceil(best - 1e-9))
}

// cpuMaxV2 reads a cgroup v2 cpu.max: the quota in CPUs, 0 for none.
func cpuMaxV2(dir string) float64 {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 || fields[0] == "max" {
		return 0
	}
	return ratio(fields[0], fields[1])
}

// cfsQuotaV1 reads a cgroup v1 CFS quota: in CPUs, 0 for none (-1).
func cfsQuotaV1(dir string) float64 {
	q, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	p, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return 0
	}
	return ratio(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

func ratio(quota, period string) float64 {
	q, err1 := strconv.ParseFloat(quota, 64)
	p, err2 := strconv.ParseFloat(period, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q / p
}
