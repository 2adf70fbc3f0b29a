package codec

import (
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/util/testing/layering"
)

// Encoding prompts needs no HTTP: benchmarks and tools use the codecs
// without the server (they lived in the server package before).
func TestCodecsNeedNoHTTP(t *testing.T) {
	layering.RequireNoDeps(t, "github.com/kvpilot/kvpilot/internal/runtime/codec",
		"net/http", "github.com/kvpilot/kvpilot/internal/runtime/server")
}

func TestSimEncodesChatAsRoleLines(t *testing.T) {
	acc, err := sim.LookupAccelerator("H100-SXM")
	if err != nil {
		t.Fatal(err)
	}
	geo, err := sim.LookupGeometry("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	x, err := sim.New(sim.Options{Accelerator: acc, Geometry: geo})
	if err != nil {
		t.Fatal(err)
	}
	c := Sim{Vocab: x.Vocabulary()}
	chat, err := c.EncodeChat(&model.Chat{Messages: []model.Message{{Role: "user", Content: "read the file"}}, AddGenerationPrompt: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(chat), len(c.EncodePrompt("user: read the file\nassistant:")); got != want || got == 0 {
		t.Errorf("chat of one message: %d tokens, want %d (its role line and the assistant header)", got, want)
	}
}
