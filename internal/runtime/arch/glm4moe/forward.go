package glm4moe

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
	qBias, kBias, vBias arch.Tensor // 0 without QKVBias
	qNorm, kNorm        arch.Tensor // 0 without QKNorm
	mlp                 arch.SharedMoE
}

func (glm4moe) Bind(c arch.Config, weight func(name string) arch.Tensor) (arch.Forward, error) {
	fw := &forward{c: c, layers: make([]layer, c.Layers)}
	b := arch.NewBinder(weight)
	get := b.Get
	fw.tokEmbd, fw.outNorm, fw.head = get("token_embd.weight"), get("output_norm.weight"), get("output.weight")
	for i := range fw.layers {
		l := &fw.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		l.attnNorm, l.postNorm = get(p+"attn_norm.weight"), get(p+"post_attention_norm.weight")
		l.q, l.k, l.v, l.o = get(p+"attn_q.weight"), get(p+"attn_k.weight"), get(p+"attn_v.weight"), get(p+"attn_output.weight")
		if c.QKVBias {
			l.qBias, l.kBias, l.vBias = get(p+"attn_q.bias"), get(p+"attn_k.bias"), get(p+"attn_v.bias")
		}
		if c.QKNorm {
			l.qNorm, l.kNorm = get(p+"attn_q_norm.weight"), get(p+"attn_k_norm.weight")
		}
		l.mlp = arch.BindSharedMoE(c, b, i, true, arch.GatingSigmoid) // the gating ReadConfig defaults to
	}
	if err := b.Err("glm4moe"); err != nil {
		return nil, err
	}
	return fw, nil
}

// Nodes: about 30 a block with its biases, head norms and shared experts
// (40 leaves room), a mixture of experts' besides, and the embedding,
// final norm and head.
func (fw *forward) Nodes() int {
	n := 40*len(fw.layers) + 16
	for _, l := range fw.layers {
		n += l.mlp.Nodes()
	}
	return n
}

// Build is, per block, x += o·attn(rope(q), rope(k), v) over the
// attention-normed x (RoPE over the first RopeDims of each head), then
// x += mlp(x') over the post-attention-normed x', where mlp is a dense
// SwiGLU MLP in the leading dense layers and the routed experts' sum plus
// the shared experts' MLP in the others; then the final norm and head of
// the sampled rows. The order of every sum is llama.cpp's.
func (fw *forward) Build(o arch.Ops) arch.Tensor {
	c := fw.c
	hd, rd := c.HeadDim, ropeDims(c)
	scale := float32(1 / math.Sqrt(float64(hd)))
	norm := func(x, w arch.Tensor) arch.Tensor { return arch.RMSNormed(o, x, w, c.NormEps) }
	proj := func(w, x, bias arch.Tensor) arch.Tensor { return arch.Linear(o, w, x, bias) }
	x := o.Embed(fw.tokEmbd) // [dim, n]
	n := o.Tokens()
	for li := range fw.layers {
		l := &fw.layers[li]
		xn := norm(x, l.attnNorm)
		q := o.Reshape3D(proj(l.q, xn, l.qBias), hd, c.Heads, n)
		k := o.Reshape3D(proj(l.k, xn, l.kBias), hd, c.KVHeads, n)
		v := proj(l.v, xn, l.vBias) // [kvDim, n]
		if l.qNorm != 0 {
			q, k = norm(q, l.qNorm), norm(k, l.kNorm)
		}
		q, k = o.Rope(q, rd, arch.RopeNeox, c.RopeTheta), o.Rope(k, rd, arch.RopeNeox, c.RopeTheta)
		x = o.Add(o.MulMat(l.o, o.Attention(li, q, k, v, scale)), x)

		x = o.Add(l.mlp.Build(o, norm(x, l.postNorm)), x)
	}
	x, ok := o.Sampled(x) // [dim, rows]
	if !ok {
		return x
	}
	return o.MulMat(fw.head, norm(x, fw.outNorm))
}
