package llama

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// readRopeScaling reads the rope.scaling.* keys every llama.cpp
// architecture reads (p is "<arch>."): the type, the factor (or the older
// rope.scale_linear), the original context and the attention factor. A
// type the forward pass does not run ("longrope", which needs factor
// tensors, or an unknown one) is refused, naming it.
func readRopeScaling(file arch.File, p string, s *arch.RopeScaling) error {
	typ, _, err := file.String(p + "rope.scaling.type")
	if err != nil {
		return err
	}
	if typ != "" && !slices.Contains(arch.RopeScalingTypes, typ) {
		return fmt.Errorf("rope scaling %q is unsupported (supported: %s)", typ, strings.Join(arch.RopeScalingTypes, ", "))
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

// ropeScalingMetadata is s as the keys readRopeScaling reads, each only
// when set.
func ropeScalingMetadata(p string, s arch.RopeScaling) []arch.KV {
	var kvs []arch.KV
	if s.Type != "" {
		kvs = append(kvs, arch.KV{Key: p + "rope.scaling.type", Value: s.Type})
	}
	if s.Factor != 0 {
		kvs = append(kvs, arch.KV{Key: p + "rope.scaling.factor", Value: s.Factor})
	}
	if s.OrigContext != 0 {
		kvs = append(kvs, arch.KV{Key: p + "rope.scaling.original_context_length", Value: uint32(s.OrigContext)})
	}
	if s.AttnFactor != 0 {
		kvs = append(kvs, arch.KV{Key: p + "rope.scaling.attn_factor", Value: s.AttnFactor})
	}
	return kvs
}

// readMistral3 reads what llama.cpp's mistral3 reads besides llama's
// keys: YaRN's betas and log multiplier (rope.scaling.yarn_beta_fast,
// yarn_beta_slow, yarn_log_multiplier) and the attention temperature
// (attention.temperature_scale, stepping every original context).
func readMistral3(file arch.File, p string, c *arch.Config) error {
	for _, x := range []struct {
		key string
		dst *float32
	}{
		{p + "rope.scaling.yarn_beta_fast", &c.RopeScaling.YarnBetaFast},
		{p + "rope.scaling.yarn_beta_slow", &c.RopeScaling.YarnBetaSlow},
		{p + "rope.scaling.yarn_log_multiplier", &c.RopeScaling.YarnLogMul},
		{p + "attention.temperature_scale", &c.AttnTempScale},
	} {
		v, ok, err := file.Float(x.key)
		if err != nil {
			return err
		}
		if ok {
			*x.dst = float32(v)
		}
	}
	return nil
}

// mistral3Metadata is what readMistral3 reads, each key only when set.
func mistral3Metadata(p string, c arch.Config) []arch.KV {
	var kvs []arch.KV
	for _, x := range []struct {
		key string
		v   float32
	}{
		{p + "rope.scaling.yarn_beta_fast", c.RopeScaling.YarnBetaFast},
		{p + "rope.scaling.yarn_beta_slow", c.RopeScaling.YarnBetaSlow},
		{p + "rope.scaling.yarn_log_multiplier", c.RopeScaling.YarnLogMul},
		{p + "attention.temperature_scale", c.AttnTempScale},
	} {
		if x.v != 0 {
			kvs = append(kvs, arch.KV{Key: x.key, Value: x.v})
		}
	}
	return kvs
}
