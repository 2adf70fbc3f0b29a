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
	m.MoE = MoEOf(c, b.Get(p+"ffn_gate_inp.weight"), b.Get(p+"ffn_gate_exps.weight"), b.Get(p+"ffn_up_exps.weight"), b.Get(p+"ffn_down_exps.weight"), sel)
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
