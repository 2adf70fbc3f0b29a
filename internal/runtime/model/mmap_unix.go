//go:build unix

package model

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps f read-only; unmap releases it.
func mapFile(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
