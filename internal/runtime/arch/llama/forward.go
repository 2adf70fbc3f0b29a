package llama

import (
	"fmt"
	"math"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// forward is the family's forward pass over one executor's weights.
type forward struct {
	c                      arch.Config
	rope                   arch.RopeMode
	tokEmbd, outNorm, head arch.Tensor
	ropeFreqs              arch.Tensor // rope_freqs.weight (Config.RopeFreqFactors), else 0
	layers                 []layer
}

type layer struct {
	attnNorm, ffnNorm   arch.Tensor
	q, k, v, o          arch.Tensor
	qBias, kBias, vBias arch.Tensor
	qNorm, kNorm        arch.Tensor // [HeadDim] (qwen3), else 0
	gate, up, down      arch.Tensor
	moe                 arch.MoE // its Router is 0 in a dense layer
}

func (f family) Bind(c arch.Config, weight func(name string) arch.Tensor) (arch.Forward, error) {
	fw := &forward{c: c, rope: f.rope, layers: make([]layer, c.Layers)}
	b := arch.NewBinder(weight)
	get := b.Get
	fw.tokEmbd, fw.outNorm, fw.head = get("token_embd.weight"), get("output_norm.weight"), get("output.weight")
	if c.RopeFreqFactors {
		fw.ropeFreqs = get("rope_freqs.weight")
	}
	for i := range fw.layers {
		l := &fw.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		l.attnNorm, l.ffnNorm = get(p+"attn_norm.weight"), get(p+"ffn_norm.weight")
		l.q, l.k, l.v, l.o = get(p+"attn_q.weight"), get(p+"attn_k.weight"), get(p+"attn_v.weight"), get(p+"attn_output.weight")
		if f.moe {
			l.moe = moeLayer(c, p, get)
		} else {
			l.gate, l.up, l.down = get(p+"ffn_gate.weight"), get(p+"ffn_up.weight"), get(p+"ffn_down.weight")
		}
		if c.QKVBias {
			l.qBias, l.kBias, l.vBias = get(p+"attn_q.bias"), get(p+"attn_k.bias"), get(p+"attn_v.bias")
		}
		if f.qkNorm {
			l.qNorm, l.kNorm = get(p+"attn_q_norm.weight"), get(p+"attn_k_norm.weight")
		}
	}
	if err := b.Err(f.name); err != nil {
		return nil, err
	}
	return fw, nil
}

// Nodes: about 20 a block, 24 with qwen3's head norms (40 leaves room),
// a mixture of experts' besides, and the embedding, final norm and head.
func (fw *forward) Nodes() int {
	n := 40*len(fw.layers) + 16
	for _, l := range fw.layers {
		if l.moe.Router != 0 {
			n += l.moe.Nodes()
		}
	}
	return n
}

// Build is, per block, x += o·attn(rope(q), rope(k), v) (RoPE scaled as
// the file says: Config.RopeParams, its frequencies divided by
// rope_freqs.weight where the file has one) over the
// attention-normed x (qwen3: each head of q and of k RMS-normed by its
// layer's weights, with the model's epsilon, before RoPE, as llama.cpp's
// qwen3 graph), then x += down·swiglu(gate·x', up·x') over the
// MLP-normed x' (qwen3moe: x += the mixture of experts over x', arch.MoE);
// then the final norm and head of the sampled rows.
func (fw *forward) Build(o arch.Ops) arch.Tensor {
	c := fw.c
	hd := c.HeadDim
	scale := float32(1 / math.Sqrt(float64(hd)))
	rope := c.RopeParams(fw.rope) // with the file's scaling, as llama.cpp's context derives it
	rope.Factors = fw.ropeFreqs
	norm := func(x, w arch.Tensor) arch.Tensor { return arch.RMSNormed(o, x, w, c.NormEps) }
	proj := func(w, x, bias arch.Tensor) arch.Tensor { return arch.Linear(o, w, x, bias) }
	x := o.Embed(fw.tokEmbd) // [dim, n]
	n := o.Tokens()
	sampled := false
	for li := range fw.layers {
		l := &fw.layers[li]
		xn := norm(x, l.attnNorm)
		q := o.Reshape3D(proj(l.q, xn, l.qBias), hd, c.Heads, n)
		k := o.Reshape3D(proj(l.k, xn, l.kBias), hd, c.KVHeads, n)
		v := proj(l.v, xn, l.vBias) // [kvDim, n]
		if l.qNorm != 0 {
			q, k = norm(q, l.qNorm), norm(k, l.kNorm) // per head: rows of HeadDim
		}
		q, k = o.RopeExt(q, rope), o.RopeExt(k, rope)
		if c.AttnTempScale != 0 {
			q = o.AttnTemperature(q, c.AttnTempScale, c.AttnTempFloor())
		}
		x = o.Add(x, o.MulMat(l.o, o.Attention(li, q, k, v, scale)))
		if li == len(fw.layers)-1 {
			x, n, sampled = arch.SampledForLastMLP(o, x, n)
		}

		xn = norm(x, l.ffnNorm)
		if l.moe.Router != 0 {
			x = o.Add(l.moe.BuildRows(o, xn, n), x)
			continue
		}
		h := o.SwiGLU(o.MulMat(l.gate, xn), o.MulMat(l.up, xn))
		x = o.Add(x, o.MulMat(l.down, h))
	}
	if !sampled {
		return x
	}
	return o.MulMat(fw.head, norm(x, fw.outNorm)) // x: [dim, rows]
}
