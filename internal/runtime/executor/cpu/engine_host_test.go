package cpu

import (
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// TestEngineRestoresBesideIterations: see
// exectest.CheckEngineRestoresBesideIterations; the overlapped copies run
// on another goroutine.
func TestEngineRestoresBesideIterations(t *testing.T) {
	m := testModel(t)
	exectest.CheckEngineRestoresBesideIterations(t, m, testBlockSize, func(t testing.TB, blocks int) batch.Executor {
		return newExec(t, m, blocks)
	})
}

// TestEngineMovesKV: see exectest.CheckEngineMovesKV (a program paused on
// pod A resumes on pod B after its KV moved, with the same tokens).
func TestEngineMovesKV(t *testing.T) {
	m := testModel(t)
	exectest.CheckEngineMovesKV(t, m, testBlockSize, func(t testing.TB, blocks int) batch.Executor {
		return newExec(t, m, blocks)
	})
}
