package deepseek2

import (
	"fmt"
	"math"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// forward is the forward pass over one executor's weights.
type forward struct {
	c                      arch.Config
	rope                   arch.RopeParams
	kqScale                float32
	tokEmbd, outNorm, head arch.Tensor
	layers                 []layer
}

type layer struct {
	attnNorm, ffnNorm arch.Tensor
	// qA, qANorm and qB project the queries through their low rank; q
	// directly (QRank 0).
	qA, qANorm, qB, q arch.Tensor
	kvA, kvANorm      arch.Tensor
	kB, vB, o         arch.Tensor
	mlp               arch.SharedMoE
}

func (deepseek2) Bind(c arch.Config, weight func(name string) arch.Tensor) (arch.Forward, error) {
	rope, kq := attention(c)
	fw := &forward{c: c, rope: rope, kqScale: kq, layers: make([]layer, c.Layers)}
	b := arch.NewBinder(weight)
	get := b.Get
	fw.tokEmbd, fw.outNorm, fw.head = get("token_embd.weight"), get("output_norm.weight"), get("output.weight")
	for i := range fw.layers {
		l := &fw.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		l.attnNorm, l.ffnNorm = get(p+"attn_norm.weight"), get(p+"ffn_norm.weight")
		if c.MLA.QRank > 0 {
			l.qA, l.qANorm, l.qB = get(p+"attn_q_a.weight"), get(p+"attn_q_a_norm.weight"), get(p+"attn_q_b.weight")
		} else {
			l.q = get(p + "attn_q.weight")
		}
		l.kvA, l.kvANorm = get(p+"attn_kv_a_mqa.weight"), get(p+"attn_kv_a_norm.weight")
		l.kB, l.vB, l.o = get(p+"attn_k_b.weight"), get(p+"attn_v_b.weight"), get(p+"attn_output.weight")
		l.mlp = arch.BindSharedMoE(c, b, i, c.ExpertSelectionBias, defaultGating(c)) // the gating ReadConfig defaults to
	}
	if err := b.Err("deepseek2"); err != nil {
		return nil, err
	}
	return fw, nil
}

// attention is the RoPE and the kq_scale of c as llama.cpp's deepseek2
// derives them. Its context reads yarn_log_multiplier as the file's value
// over 0.1 and, for deepseek2, sets YaRN's mscale to it, so that the
// magnitude ratio the rotation carries is 1; the graph then cancels ggml's
// own 1+0.1·ln(factor) and pre-scales kq_scale by the square of
// mscale = attn_factor·(1+0.1·ln(factor))·(1+0.1·log_mul·ln(factor)),
// over √key_length_mla. The arithmetic is float32, as llama.cpp's.
func attention(c arch.Config) (arch.RopeParams, float32) {
	logMul := c.RopeScaling.YarnLogMul / 0.1
	r := c
	r.RopeScaling.YarnLogMul = 0
	if logMul != 0 {
		r.RopeScaling.YarnLogMul = 1 // mscale(f, m)/mscale(f, m)
	}
	p := r.RopeParams(arch.RopeNormal)
	ln := float32(math.Log(float64(1 / p.FreqScale)))
	orig := p.AttnFactor * (1 + 0.1*ln)
	mscale := orig * (1 + 0.1*logMul*ln)
	return p, 1 * mscale * mscale / float32(math.Sqrt(float64(c.MLA.KeyLength)))
}

// Nodes: about 40 a block with its views and shared experts (56 leaves
// room), a mixture of experts' besides, and the embedding, final norm and
// head.
func (fw *forward) Nodes() int {
	n := 56*len(fw.layers) + 16
	for _, l := range fw.layers {
		n += l.mlp.Nodes()
	}
	return n
}

// Build is, per block, llama.cpp's absorbed MLA over the attention-normed
// x: queries [KeyLength, heads, n] split into their unrotated part, which
// attn_k_b absorbs into the latent's space, and their rotated part; the
// latent [KVRank] RMS-normed and its rotated key part, both from
// attn_kv_a_mqa; attention of [latent-space query | rotated query] over
// [latent | rotated key] (one KV head), its output through attn_v_b and
// attn_output; then x += mlp(ffn-normed x), the dense MLP in the leading
// layers and the routed experts' sum plus the shared experts' MLP in the
// others; then the final norm and head of the sampled rows.
func (fw *forward) Build(o arch.Ops) arch.Tensor {
	c, m := fw.c, fw.c.MLA
	rank, rd, kl := m.KVRank, c.RopeDims, m.KeyLength
	nope, heads := kl-rd, c.Heads
	norm := func(x, w arch.Tensor) arch.Tensor { return arch.RMSNormed(o, x, w, c.NormEps) }
	x := o.Embed(fw.tokEmbd) // [dim, n]
	n := o.Tokens()
	for li := range fw.layers {
		l := &fw.layers[li]
		xn := norm(x, l.attnNorm)
		var q arch.Tensor
		if l.q != 0 {
			q = o.MulMat(l.q, xn)
		} else {
			q = o.MulMat(l.qB, norm(o.MulMat(l.qA, xn), l.qANorm))
		}
		q = o.Reshape3D(q, kl, heads, n)
		kvpe := o.MulMat(l.kvA, xn) // [rank+rd, n]
		latent := o.View3D(kvpe, rank, 1, n, rank+rd, rank+rd, 0)
		kpe := o.RopeExt(o.View3D(kvpe, rd, 1, n, rank+rd, rank+rd, rank), fw.rope)
		latent = norm(latent, l.kvANorm)
		qNope := o.View3D(q, nope, heads, n, kl, kl*heads, 0)
		qPE := o.RopeExt(o.View3D(q, rd, heads, n, kl, kl*heads, nope), fw.rope)
		qAbs := o.Permute(o.MulMat(l.kB, o.Permute(qNope, 0, 2, 1, 3)), 0, 2, 1, 3) // [rank, heads, n]
		att := o.AttentionMLA(li, o.Concat(qAbs, qPE), o.Concat(latent, kpe), l.vB, fw.kqScale)
		x = o.Add(o.MulMat(l.o, att), x)

		x = o.Add(l.mlp.Build(o, norm(x, l.ffnNorm)), x)
	}
	x, ok := o.Sampled(x) // [dim, rows]
	if !ok {
		return x
	}
	return o.MulMat(fw.head, norm(x, fw.outNorm))
}
