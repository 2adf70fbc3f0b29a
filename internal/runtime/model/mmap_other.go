//go:build !unix

package model

import (
	"io"
	"os"
)

// mapFile reads f into memory where mmap is unavailable.
func mapFile(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	data = make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
