//go:build !(linux && (amd64 || arm64))

package ggml

import (
	"errors"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Devices the executor runs on.
const (
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda"
)

// EnvLibDir names the environment variable holding the library directory.
const EnvLibDir = "KVPILOT_GGML_LIB"

// Options choose the libraries, the device and its threads.
type Options struct {
	LibDir         string
	Device         string
	Threads        int
	Poll           int
	PlainAttention bool
	PlainWeights   bool
	KVCacheDType   kvcache.DType
}

// Executor is unavailable on this platform.
type Executor struct{ batch.Executor }

var errPlatform = errors.New("ggml executor: runs on linux/amd64 and linux/arm64 only (purego passes structs by value there)")

// New fails: the executor is built for linux/amd64 and linux/arm64 only.
func New(*model.Model, int, int, Options) (*Executor, error) { return nil, errPlatform }

// Device describes where the executor runs.
func (e *Executor) Device() string { return "" }

// Close does nothing.
func (e *Executor) Close() {}
