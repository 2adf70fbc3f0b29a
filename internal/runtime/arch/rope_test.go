package arch_test

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// TestRopeParams: the ggml_rope_ext parameters of each RoPE scaling, as
// llama.cpp's context derives them (llama-context.cpp): none, a factor
// with no type (linear), "none" ignoring its factor, linear, YaRN (whose
// attention factor cancels the 1+0.1·ln(factor) ggml multiplies back:
// net magnitude mscale(4) = 1+0.1·ln 4), YaRN with a log multiplier of 1
// (net magnitude 1) and with a model's attention factor, and partial RoPE.
func TestRopeParams(t *testing.T) {
	base := arch.Config{Arch: "x", HeadDim: 64, ContextLen: 4096, RopeTheta: 1e6}
	ln4 := math.Log(4)
	for _, tc := range []struct {
		name string
		dims int
		s    arch.RopeScaling
		want arch.RopeParams
	}{
		{"none", 0, arch.RopeScaling{}, arch.RopeParams{Dims: 64, Mode: arch.RopeNeox, Theta: 1e6, FreqScale: 1, OrigContext: 4096, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}},
		{"factor only", 0, arch.RopeScaling{Factor: 2}, arch.RopeParams{Dims: 64, Mode: arch.RopeNeox, Theta: 1e6, FreqScale: 0.5, OrigContext: 4096, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}},
		{"type none", 0, arch.RopeScaling{Type: "none", Factor: 2}, arch.RopeParams{Dims: 64, Mode: arch.RopeNeox, Theta: 1e6, FreqScale: 1, OrigContext: 4096, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}},
		{"linear", 0, arch.RopeScaling{Type: "linear", Factor: 8}, arch.RopeParams{Dims: 64, Mode: arch.RopeNeox, Theta: 1e6, FreqScale: 0.125, OrigContext: 4096, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}},
		{"yarn", 0, arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 1024},
			arch.RopeParams{Dims: 64, Mode: arch.RopeNeox, Theta: 1e6, FreqScale: 0.25, OrigContext: 1024, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}},
		{"yarn log mul", 0, arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 1024, YarnLogMul: 1, YarnBetaFast: 16, YarnBetaSlow: 2},
			arch.RopeParams{Dims: 64, Mode: arch.RopeNeox, Theta: 1e6, FreqScale: 0.25, OrigContext: 1024, ExtFactor: 1, AttnFactor: float32(1 / (1 + 0.1*ln4)), BetaFast: 16, BetaSlow: 2}},
		{"yarn attn factor", 0, arch.RopeScaling{Type: "yarn", Factor: 4, AttnFactor: 0.5},
			arch.RopeParams{Dims: 64, Mode: arch.RopeNeox, Theta: 1e6, FreqScale: 0.25, OrigContext: 4096, ExtFactor: 1, AttnFactor: 0.5, BetaFast: 32, BetaSlow: 1}},
		{"partial", 16, arch.RopeScaling{}, arch.RopeParams{Dims: 16, Mode: arch.RopeNeox, Theta: 1e6, FreqScale: 1, OrigContext: 4096, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}},
	} {
		c := base
		c.RopeDims, c.RopeScaling = tc.dims, tc.s
		got := c.RopeParams(arch.RopeNeox)
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestValidateRopeScaling: an unknown scaling, a negative factor and RoPE
// dims past the head or odd are refused, naming the value.
func TestValidateRopeScaling(t *testing.T) {
	c := arch.Config{Arch: "llama", VocabSize: 10, Dim: 8, Layers: 1, Heads: 1, KVHeads: 1, HeadDim: 8, FFN: 8, ContextLen: 16, RopeTheta: 1e4, NormEps: 1e-5}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*arch.Config)
		want string
	}{
		{func(c *arch.Config) { c.RopeScaling.Type = "longrope" }, `rope scaling "longrope" is unsupported`},
		{func(c *arch.Config) { c.RopeScaling.Factor = -1 }, "rope scaling factor -1"},
		{func(c *arch.Config) { c.RopeDims = 10 }, "rope dims 10"},
		{func(c *arch.Config) { c.RopeDims = 3 }, "rope dims 3"},
	} {
		bad := c
		tc.edit(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
