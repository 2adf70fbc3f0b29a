package main

import (
	"slices"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/layering"
)

const module = "github.com/kvpilot/kvpilot/"

// The operator links no pod code: it reaches pods through the control API's
// wire types and client (control/wire, control/controlclient), never
// through the pod's program table, engine, KV cache, batches, executors,
// models, HTTP server or the control API's handler.
func TestManagerLinksNoPodCode(t *testing.T) {
	pod := []string{
		"internal/runtime/programs", "internal/runtime/server", "internal/runtime/executor",
		"internal/runtime/control/kvstream", "internal/runtime/model", "internal/runtime/arch",
		"internal/runtime/openai", "internal/runtime/anthropic", "internal/runtime/chatformat",
		"internal/runtime/codec", "internal/runtime/jinja", "internal/runtime/device",
		"internal/scheduler/engine", "internal/scheduler/kvcache", "internal/scheduler/batch",
		"internal/scheduler/queue", "internal/scheduler/sampling", "internal/scheduler/grammar",
		"internal/scheduler/completion",
	}
	for i := range pod {
		pod[i] = module + pod[i]
	}
	layering.RequireNoDeps(t, module+"cmd/manager", pod...)
	// The control API's handler itself (its wire types and client, below
	// it, are the operator's to use).
	if slices.Contains(layering.Deps(t, module+"cmd/manager"), module+"internal/runtime/control") {
		t.Errorf("cmd/manager imports %sinternal/runtime/control, the pod's control API handler", module)
	}
}
