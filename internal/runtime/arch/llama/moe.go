package llama

import (
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// Qwen3MoE is qwen3 with a mixture of experts for every layer's MLP
// (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B): a softmax router
// over Experts, the ExpertsUsed best run, their weights renormalized to
// sum to one (llama.cpp's qwen3moe graph always does, as the models'
// norm_topk_prob says), no shared experts.
var Qwen3MoE arch.Architecture = family{name: "qwen3moe", rope: arch.RopeNeox, qkNorm: true, moe: true}

// readMoE reads the experts' geometry under prefix p (after the family's
// keys: c.FFN is read).
func readMoE(file arch.File, p string, c *arch.Config) error {
	for _, x := range []struct {
		key string
		dst *int
	}{{p + "expert_count", &c.Experts}, {p + "expert_used_count", &c.ExpertsUsed}} {
		v, ok, err := file.Uint(x.key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("metadata %s is missing (a mixture of experts needs it)", x.key)
		}
		if v > 1<<16 {
			return fmt.Errorf("metadata %s = %d is out of range", x.key, v)
		}
		*x.dst = int(v)
	}
	if c.Experts == 0 || c.ExpertsUsed == 0 || c.ExpertsUsed > c.Experts {
		return fmt.Errorf("%d experts with %d used per token: want 0 < used ≤ experts", c.Experts, c.ExpertsUsed)
	}
	// llama.cpp's default when the key is absent.
	c.ExpertFFN = c.FFN / c.ExpertsUsed
	if v, ok, err := file.Uint(p + "expert_feed_forward_length"); err != nil {
		return err
	} else if ok {
		if v == 0 || v > 1<<31 {
			return fmt.Errorf("metadata %sexpert_feed_forward_length = %d is out of range", p, v)
		}
		c.ExpertFFN = int(v)
	}
	if norm, ok, err := file.Bool(p + "expert_weights_norm"); err != nil {
		return err
	} else if ok && !norm {
		return fmt.Errorf("metadata %sexpert_weights_norm = false is unsupported (qwen3moe renormalizes the chosen experts' weights, as llama.cpp does)", p)
	}
	if g, ok, err := file.Uint(p + "expert_gating_func"); err != nil {
		return err
	} else if ok && arch.Gating(g) != arch.GatingSoftmax {
		return fmt.Errorf("metadata %sexpert_gating_func = %d is unsupported (qwen3moe routes by softmax, as llama.cpp does)", p, g)
	}
	if v, ok, err := file.Uint(p + "expert_shared_count"); err != nil {
		return err
	} else if ok && v != 0 {
		return fmt.Errorf("metadata %sexpert_shared_count = %d is unsupported (qwen3moe has no shared experts)", p, v)
	}
	c.ExpertGating, c.ExpertWeightsNorm = arch.GatingSoftmax, true
	return nil
}

func moeMetadata(p string, c arch.Config) []arch.KV {
	return []arch.KV{
		{Key: p + "expert_count", Value: uint32(c.Experts)},
		{Key: p + "expert_used_count", Value: uint32(c.ExpertsUsed)},
		{Key: p + "expert_feed_forward_length", Value: uint32(c.ExpertFFN)},
	}
}

// moeTensors are a layer's router and experts, under prefix p ("blk.3.").
func moeTensors(p string, c arch.Config) []arch.TensorSpec {
	return []arch.TensorSpec{
		{Name: p + "ffn_gate_inp.weight", Shape: []int{c.Dim, c.Experts}, Matrix: true},
		{Name: p + "ffn_gate_exps.weight", Shape: []int{c.Dim, c.ExpertFFN, c.Experts}, Matrix: true},
		{Name: p + "ffn_down_exps.weight", Shape: []int{c.ExpertFFN, c.Dim, c.Experts}, Matrix: true},
		{Name: p + "ffn_up_exps.weight", Shape: []int{c.Dim, c.ExpertFFN, c.Experts}, Matrix: true},
	}
}

// moeLayer is the MoE of the layer whose tensors are named p+…, routed as
// qwen3moe routes whatever c says (a model built in memory leaves the
// gating unset).
func moeLayer(c arch.Config, p string, get func(string) arch.Tensor) arch.MoE {
	m := arch.MoEOf(c, get(p+"ffn_gate_inp.weight"), get(p+"ffn_gate_exps.weight"), get(p+"ffn_up_exps.weight"), get(p+"ffn_down_exps.weight"), 0)
	m.Gating, m.Norm, m.Scale = arch.GatingSoftmax, true, 0
	return m
}

// Validate: a mixture of experts needs experts (Config.Validate checks
// their counts).
func (f family) Validate(c arch.Config) error {
	if f.moe && c.Experts == 0 {
		return fmt.Errorf("%s needs experts (expert_count, expert_used_count)", f.name)
	}
	if !f.moe && c.Experts > 0 {
		return fmt.Errorf("%s has a dense MLP, not %d experts", f.name, c.Experts)
	}
	return nil
}
