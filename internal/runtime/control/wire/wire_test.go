package wire

import (
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/layering"
)

// The wire types are data only: the controller side (fleet loop) and the
// pod side (program table, control API) share them without importing each
// other (they lived in the pod's program table before).
func TestWireTypesDependOnNoKvpilotPackage(t *testing.T) {
	layering.RequireNoDeps(t, "github.com/kvpilot/kvpilot/internal/runtime/control/wire",
		"github.com/kvpilot/kvpilot", "net/http")
}
