package runtimeproc

import "golang.org/x/sys/unix"

// limitOpenFiles sets process pid's soft and hard limits on open files.
func limitOpenFiles(pid int, n uint64) error {
	return unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}, nil)
}
