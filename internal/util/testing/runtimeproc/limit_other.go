//go:build !linux

package runtimeproc

import "errors"

func limitOpenFiles(int, uint64) error {
	return errors.New("limiting another process's open files needs Linux (prlimit)")
}

func peakRSS(int) (int64, error) {
	return 0, errors.New("reading another process's peak resident memory needs Linux (/proc/<pid>/status)")
}

func limitData(int, int64) error {
	return errors.New("limiting another process's memory needs Linux (prlimit)")
}
