//go:build !linux

package runtimeproc

import "errors"

func limitOpenFiles(int, uint64) error {
	return errors.New("limiting another process's open files needs Linux (prlimit)")
}
