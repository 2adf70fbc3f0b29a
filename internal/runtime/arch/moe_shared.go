package arch

import "fmt"

// SharedMoE is a layer's MLP in DeepSeek's layout (glm4moe, deepseek2): a
// dense SwiGLU MLP (Gate, Up, Down: ffn_{gate,up,down}) in the
// Config.DenseLayers leading layers; in the others the routed experts
// (MoE) plus the shared ones, whose SwiGLU MLP Gate, Up and Down then
// are (ffn_{gate,up,down}_shexp).
type SharedMoE struct {
	Gate, Up, Down Tensor
	MoE            MoE // its Router is 0 in a dense layer
}

// BindSharedMoE binds layer i's MLP; its routers have a selection bias
// (exp_probs_b.bias) when bias is set, and route by gating when c sets
// none.
func BindSharedMoE(c Config, b *Binder, i int, bias bool, gating Gating) SharedMoE {
	p := fmt.Sprintf("blk.%d.", i)
	if i < c.DenseLayers {
		return SharedMoE{Gate: b.Get(p + "ffn_gate.weight"), Up: b.Get(p + "ffn_up.weight"), Down: b.Get(p + "ffn_down.weight")}
	}
	var sel Tensor
	if bias {
		sel = b.Get(p + "exp_probs_b.bias")
	}
	m := SharedMoE{Gate: b.Get(p + "ffn_gate_shexp.weight"), Up: b.Get(p + "ffn_up_shexp.weight"), Down: b.Get(p + "ffn_down_shexp.weight")}
	m.MoE = BindMoE(c, b, p, sel)
	if m.MoE.Gating == 0 {
		m.MoE.Gating = gating
	}
	return m
}

// Build is the MLP over x [Dim, n]: [Dim, n], the experts' sum plus the
// shared experts' in llama.cpp's order.
func (m SharedMoE) Build(o Ops, x Tensor) Tensor {
	dense := func() Tensor { return o.MulMat(m.Down, o.SwiGLU(o.MulMat(m.Gate, x), o.MulMat(m.Up, x))) }
	if m.MoE.Router == 0 {
		return dense()
	}
	return o.Add(m.MoE.Build(o, x), dense())
}

// Nodes bounds the graph nodes Build adds.
func (m SharedMoE) Nodes() int {
	if m.MoE.Router == 0 {
		return 8
	}
	return 10 + m.MoE.Nodes()
}

// ReadSharedMoE reads, under prefix p, what a mixture of experts in
// DeepSeek's layout adds to a file's metadata: the experts, how many a
// token runs, the shared ones, an expert's width, the leading dense
// layers, the multi-token-prediction layers block_count counts (c.Layers
// is the others), the weights' scale and normalization, and the gating
// (left 0 when the file has none: the architectures' defaults differ),
// and grouped expert selection's groups. Another gating is refused.
func ReadSharedMoE(file File, p string, c *Config) error {
	var blocks int
	if err := Read(file,
		Uint(p+"block_count", &blocks),
		Uint(p+"expert_count", &c.Experts),
		Uint(p+"expert_used_count", &c.ExpertsUsed),
		Uint(p+"expert_shared_count", &c.SharedExperts),
		Uint(p+"expert_feed_forward_length", &c.ExpertFFN),
		OptUint(p+"leading_dense_block_count", &c.DenseLayers),
		OptUint(p+"nextn_predict_layers", &c.NextNLayers),
		OptFloat(p+"expert_weights_scale", &c.ExpertWeightsScale),
	); err != nil {
		return err
	}
	if c.NextNLayers >= blocks {
		return fmt.Errorf("%d next-token prediction layers of %d blocks leave none to decode with", c.NextNLayers, blocks)
	}
	c.Layers = blocks - c.NextNLayers
	if v, ok, err := file.Bool(p + "expert_weights_norm"); err != nil {
		return err
	} else if ok {
		c.ExpertWeightsNorm = v
	}
	if v, ok, err := file.Uint(p + "expert_gating_func"); err != nil {
		return err
	} else if ok && v != 0 {
		if g := Gating(v); g != GatingSigmoid && g != GatingSoftmax {
			return fmt.Errorf("metadata %sexpert_gating_func = %d is unsupported (1 softmax, 2 sigmoid)", p, v)
		}
		c.ExpertGating = Gating(v)
	}
	if err := Read(file,
		OptUint(p+"expert_group_count", &c.ExpertGroups),
		OptUint(p+"expert_group_used_count", &c.ExpertGroupsUsed),
	); err != nil {
		return err
	}
	return nil
}

// ValidGroups checks grouped expert selection's geometry, as llama.cpp
// does: equal groups of at least two experts (a group scores by its best
// two), fewer used than there are, enough experts in them for a token.
func ValidGroups(c Config) error {
	g, used := c.ExpertGroups, c.ExpertGroupsUsed
	if g <= 1 {
		return nil
	}
	if c.Experts%g != 0 || c.Experts/g < 2 || used <= 0 || used >= g || c.ExpertsUsed > used*(c.Experts/g) {
		return fmt.Errorf("grouped expert selection: %d groups, %d used, of %d experts (%d a token): want equal groups of two or more, 0 < used < groups, and the token's experts within the used groups", g, used, c.Experts, c.ExpertsUsed)
	}
	return nil
}

// SharedMoEMetadata is c's keys ReadSharedMoE reads but block_count (the
// base metadata's), the gating and next-token layers only when set.
func SharedMoEMetadata(p string, c Config) []KV {
	kvs := []KV{
		{Key: p + "expert_count", Value: uint32(c.Experts)},
		{Key: p + "expert_used_count", Value: uint32(c.ExpertsUsed)},
		{Key: p + "expert_shared_count", Value: uint32(c.SharedExperts)},
		{Key: p + "expert_feed_forward_length", Value: uint32(c.ExpertFFN)},
		{Key: p + "leading_dense_block_count", Value: uint32(c.DenseLayers)},
		{Key: p + "expert_weights_scale", Value: c.ExpertWeightsScale},
		{Key: p + "expert_weights_norm", Value: c.ExpertWeightsNorm},
	}
	if c.ExpertGating != 0 {
		kvs = append(kvs, KV{Key: p + "expert_gating_func", Value: uint32(c.ExpertGating)})
	}
	if c.NextNLayers > 0 {
		kvs = append(kvs, KV{Key: p + "nextn_predict_layers", Value: uint32(c.NextNLayers)})
	}
	if c.ExpertGroups > 0 {
		kvs = append(kvs,
			KV{Key: p + "expert_group_count", Value: uint32(c.ExpertGroups)},
			KV{Key: p + "expert_group_used_count", Value: uint32(c.ExpertGroupsUsed)})
	}
	return kvs
}
