package arch

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// RopeParams are ggml_rope_ext's parameters besides the tensor and the
// positions. The zero values of FreqScale and AttnFactor mean 1.
type RopeParams struct {
	// Dims is how many leading dimensions of each head rotate (partial
	// rotary embeddings leave the rest as they are); Mode pairs them.
	Dims int
	Mode RopeMode
	// Theta is the frequency base.
	Theta float32
	// FreqScale multiplies every position's angle: 1/factor for linear
	// and YaRN scaling, 1 without.
	FreqScale float32
	// OrigContext is the context trained before scaling (YaRN's
	// correction dimensions depend on it).
	OrigContext int
	// ExtFactor mixes extrapolated angles back into the high
	// frequencies (YaRN: 1; 0 disables YaRN's ramp and magnitude
	// scaling, and with it BetaFast and BetaSlow).
	ExtFactor float32
	// AttnFactor multiplies the rotated values (YaRN's magnitude
	// correction; ggml multiplies it by 1+0.1·ln(1/FreqScale) itself
	// when ExtFactor is not 0).
	AttnFactor float32
	// BetaFast and BetaSlow bound YaRN's ramp, in rotations over
	// OrigContext.
	BetaFast, BetaSlow float32
	// Factors, when not 0, is a [Dims/2] F32 tensor dividing each pair's
	// frequency (rope_freqs.weight: Config.RopeFreqFactors).
	Factors Tensor
}

// RopeScalingTypes are the RoPE scalings the forward passes run
// (llama.cpp's names; "longrope" needs per-dimension factor tensors).
var RopeScalingTypes = []string{"none", "linear", "yarn"}

// RopeParams are the ggml_rope_ext parameters of c's RoPE in mode, as
// llama.cpp's context derives them from the same hyperparameters: the
// rotated dimensions (RopeDims, else HeadDim), FreqScale 1/Factor unless
// the type is "none", and for YaRN the ramp (ExtFactor 1, OrigContext
// the trained context, else ContextLen) and the magnitude AttnFactor:
// mscale(factor)/mscale(factor, YarnLogMul) (or mscale(factor) without a
// log multiplier) divided by the 1+0.1·ln(factor) ggml multiplies back, so
// that the net magnitude is YaRN's; then times RopeScaling.AttnFactor.
// The arithmetic is float32, as llama.cpp's.
func (c Config) RopeParams(mode RopeMode) RopeParams {
	s := c.RopeScaling
	p := RopeParams{
		Dims: c.HeadDim, Mode: mode, Theta: c.RopeTheta, FreqScale: 1, OrigContext: c.ContextLen,
		AttnFactor: 1, BetaFast: 32, BetaSlow: 1,
	}
	if c.RopeDims > 0 {
		p.Dims = c.RopeDims
	}
	if s.OrigContext > 0 {
		p.OrigContext = s.OrigContext
	}
	if s.YarnBetaFast != 0 {
		p.BetaFast = s.YarnBetaFast
	}
	if s.YarnBetaSlow != 0 {
		p.BetaSlow = s.YarnBetaSlow
	}
	if s.Type != "none" && s.Factor != 0 {
		p.FreqScale = 1 / s.Factor
	}
	if s.Type == "yarn" {
		p.ExtFactor = 1
		factor := 1 / p.FreqScale
		if s.YarnLogMul != 0 {
			p.AttnFactor = yarnMscale(factor, 1) / yarnMscale(factor, s.YarnLogMul)
		} else {
			p.AttnFactor = yarnMscale(factor, 1)
		}
		p.AttnFactor *= 1 / (1 + float32(0.1)*logf(factor))
	}
	if s.AttnFactor != 0 {
		p.AttnFactor *= s.AttnFactor
	}
	return p
}

// yarnMscale is YaRN's attention magnitude for a stretch of scale.
func yarnMscale(scale, mscale float32) float32 {
	if scale <= 1 {
		return 1
	}
	return float32(0.1)*mscale*logf(scale) + 1
}

func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// AttnTempFloor is the position step of the attention temperature:
// llama.cpp's original YaRN context (RopeScaling.OrigContext, else
// ContextLen).
func (c Config) AttnTempFloor() int {
	if c.RopeScaling.OrigContext > 0 {
		return c.RopeScaling.OrigContext
	}
	return c.ContextLen
}

// ReadRopeScaling reads the rope.scaling.* keys llama.cpp reads for every
// architecture (p is "<arch>."): the type, the factor (or the older
// rope.scale_linear), the original context and the attention factor. A
// type no forward pass runs ("longrope", which needs factor tensors, or
// an unknown one) is refused, naming it. The YaRN betas and log
// multiplier are the architectures' own to read (llama.cpp reads them for
// some only).
func ReadRopeScaling(file File, p string, s *RopeScaling) error {
	typ, _, err := file.String(p + "rope.scaling.type")
	if err != nil {
		return err
	}
	if typ != "" && !slices.Contains(RopeScalingTypes, typ) {
		return fmt.Errorf("rope scaling %q is unsupported (supported: %s)", typ, strings.Join(RopeScalingTypes, ", "))
	}
	s.Type = typ
	factor, ok, err := file.Float(p + "rope.scaling.factor")
	if err != nil {
		return err
	}
	if !ok {
		if factor, _, err = file.Float(p + "rope.scale_linear"); err != nil {
			return err
		}
	}
	if factor < 0 || factor != factor {
		return fmt.Errorf("metadata %srope.scaling.factor = %g must be positive", p, factor)
	}
	s.Factor = float32(factor)
	if v, ok, err := file.Uint(p + "rope.scaling.original_context_length"); err != nil {
		return err
	} else if ok {
		if v > 1<<31 {
			return fmt.Errorf("metadata %srope.scaling.original_context_length = %d is out of range", p, v)
		}
		s.OrigContext = int(v)
	}
	if v, ok, err := file.Float(p + "rope.scaling.attn_factor"); err != nil {
		return err
	} else if ok {
		s.AttnFactor = float32(v)
	}
	return nil
}

// RopeScalingMetadata is s as the keys ReadRopeScaling reads, each only
// when set.
func RopeScalingMetadata(p string, s RopeScaling) []KV {
	var kvs []KV
	if s.Type != "" {
		kvs = append(kvs, KV{Key: p + "rope.scaling.type", Value: s.Type})
	}
	if s.Factor != 0 {
		kvs = append(kvs, KV{Key: p + "rope.scaling.factor", Value: s.Factor})
	}
	if s.OrigContext != 0 {
		kvs = append(kvs, KV{Key: p + "rope.scaling.original_context_length", Value: uint32(s.OrigContext)})
	}
	if s.AttnFactor != 0 {
		kvs = append(kvs, KV{Key: p + "rope.scaling.attn_factor", Value: s.AttnFactor})
	}
	return kvs
}
