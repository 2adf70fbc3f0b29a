package fleet

import "github.com/kvpilot/kvpilot/internal/runtime/programs"

type controlPlacement = programs.Placement
