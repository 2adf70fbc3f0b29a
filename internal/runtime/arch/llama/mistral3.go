package llama

import "github.com/kvpilot/kvpilot/internal/runtime/arch"

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
