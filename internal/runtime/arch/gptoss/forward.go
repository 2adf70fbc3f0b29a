package gptoss

import (
	"fmt"
	"math"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// forward is the forward pass over one executor's weights.
type forward struct {
	c                      arch.Config
	tokEmbd, outNorm, head arch.Tensor
	layers                 []layer
}

type layer struct {
	attnNorm, postNorm  arch.Tensor
	q, k, v, o          arch.Tensor
	qBias, kBias, vBias arch.Tensor
	oBias, sinks        arch.Tensor
	moe                 arch.MoE
}

func (gptoss) Bind(c arch.Config, weight func(name string) arch.Tensor) (arch.Forward, error) {
	fw := &forward{c: c, layers: make([]layer, c.Layers)}
	b := arch.NewBinder(weight)
	get := b.Get
	fw.tokEmbd, fw.outNorm, fw.head = get("token_embd.weight"), get("output_norm.weight"), get("output.weight")
	for i := range fw.layers {
		l := &fw.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		l.attnNorm, l.postNorm = get(p+"attn_norm.weight"), get(p+"post_attention_norm.weight")
		l.q, l.k, l.v, l.o = get(p+"attn_q.weight"), get(p+"attn_k.weight"), get(p+"attn_v.weight"), get(p+"attn_output.weight")
		l.qBias, l.kBias, l.vBias = get(p+"attn_q.bias"), get(p+"attn_k.bias"), get(p+"attn_v.bias")
		l.oBias, l.sinks = get(p+"attn_output.bias"), get(p+"attn_sinks.weight")
		l.moe = arch.MoEOf(c, get(p+"ffn_gate_inp.weight"), get(p+"ffn_gate_exps.weight"), get(p+"ffn_up_exps.weight"), get(p+"ffn_down_exps.weight"), 0)
		l.moe.RouterBias = get(p + "ffn_gate_inp.bias")
		l.moe.GateBias, l.moe.UpBias, l.moe.DownBias = get(p+"ffn_gate_exps.bias"), get(p+"ffn_up_exps.bias"), get(p+"ffn_down_exps.bias")
		l.moe.Gating, l.moe.Norm, l.moe.Scale = arch.GatingSoftmaxWeight, false, 0
		l.moe.OAI, l.moe.Alpha, l.moe.Limit = true, swigluAlpha, swigluLimit
	}
	if err := b.Err("gpt-oss"); err != nil {
		return nil, err
	}
	return fw, nil
}

// Nodes: about 24 a block with its biases (32 leaves room), the mixture
// of experts' besides, and the embedding, final norm and head.
func (fw *forward) Nodes() int {
	n := 16
	for _, l := range fw.layers {
		n += 32 + l.moe.Nodes()
	}
	return n
}

// Build is, per block, x += o·attn(rope(q), rope(k), v) + o's bias (RoPE
// scaled as Config.RopeScaling says) over
// the attention-normed x (attention with the layer's sinks, over its
// window in a sliding layer: the executor masks by Config.LayerKinds),
// then x += moe(x') over the post-attention-normed x'; then the final
// norm and head of the sampled rows. The order of every sum is
// llama.cpp's.
func (fw *forward) Build(o arch.Ops) arch.Tensor {
	c := fw.c
	hd := c.HeadDim
	rope := c.RopeParams(arch.RopeNeox)
	scale := float32(1 / math.Sqrt(float64(hd)))
	norm := func(x, w arch.Tensor) arch.Tensor { return arch.RMSNormed(o, x, w, c.NormEps) }
	x := o.Embed(fw.tokEmbd) // [dim, n]
	n := o.Tokens()
	sampled := false
	for li := range fw.layers {
		l := &fw.layers[li]
		xn := norm(x, l.attnNorm)
		q := o.Reshape3D(o.Add(o.MulMat(l.q, xn), l.qBias), hd, c.Heads, n)
		k := o.Reshape3D(o.Add(o.MulMat(l.k, xn), l.kBias), hd, c.KVHeads, n)
		v := o.Add(o.MulMat(l.v, xn), l.vBias) // [kvDim, n]
		q, k = o.RopeExt(q, rope), o.RopeExt(k, rope)
		att := o.AttentionSinks(li, q, k, v, l.sinks, scale)
		x = o.Add(o.Add(o.MulMat(l.o, att), l.oBias), x)
		if li == len(fw.layers)-1 {
			x, n, sampled = arch.SampledForLastMLP(o, x, n)
		}
		x = o.Add(l.moe.BuildRows(o, norm(x, l.postNorm), n), x)
	}
	if !sampled {
		return x
	}
	return o.MulMat(fw.head, norm(x, fw.outNorm)) // x: [dim, rows]
}
