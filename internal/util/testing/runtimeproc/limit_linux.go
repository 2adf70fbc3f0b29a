package runtimeproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// limitOpenFiles sets process pid's soft and hard limits on open files.
func limitOpenFiles(pid int, n uint64) error {
	return unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}, nil)
}

// limitData sets process pid's soft and hard limits on its data segment
// (RLIMIT_DATA: its private writable mappings, the Go heap among them) to
// its size now plus extra bytes; past it the process's allocations fail.
func limitData(pid int, extra int64) error {
	now, err := statusBytes(pid, "VmData")
	if err != nil {
		return err
	}
	n := uint64(now + extra)
	return unix.Prlimit(pid, unix.RLIMIT_DATA, &unix.Rlimit{Cur: n, Max: n}, nil)
}

// peakRSS reads process pid's peak resident set size (VmHWM).
func peakRSS(pid int) (int64, error) { return statusBytes(pid, "VmHWM") }

// statusBytes reads a size field (VmHWM, VmData…) of process pid's
// /proc/<pid>/status, in bytes.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %v", field, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
