package qwen35

import (
	"fmt"
	"math"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// forward is the forward pass over one executor's weights.
type forward struct {
	c arch.Config
	// next is qwen3next's graph: NEOX RoPE, the fused beta/alpha
	// projection and q/k repeated per value head (next.go).
	next                   bool
	tokEmbd, outNorm, head arch.Tensor
	layers                 []layer
}

// layer is one block's weights: its norms, its mixer's (attention's or
// the DeltaNet's, by Config.LayerKinds) and its MLP's.
type layer struct {
	attnNorm, postNorm arch.Tensor
	// Gated attention.
	q, k, v, o, qNorm, kNorm arch.Tensor
	// Gated DeltaNet (ba: qwen3next's beta and alpha, in one; qkvz: the
	// fused ssm_in of its older files, in place of qkv and z).
	qkv, z, qkvz, conv, dt, a, beta, alpha, ba, ssmNorm, ssmOut arch.Tensor
	// The MLP: qwen35's, or qwen35moe's shared expert, gated per token
	// by sigmoid(sharedGate·x), beside its experts (moe.Router is 0 in
	// qwen35).
	gate, up, down arch.Tensor
	sharedGate     arch.Tensor
	moe            arch.MoE
}

// bindMixer resolves layer i's norms and mixer (next: qwen3next's).
func bindMixer(c arch.Config, w *arch.Binder, l *layer, i int, p string, next bool) {
	l.attnNorm, l.postNorm = w.Get(p+"attn_norm.weight"), w.Get(p+"post_attention_norm.weight")
	if c.LayerKinds[i] != arch.Recurrent {
		l.q, l.k, l.v, l.o = w.Get(p+"attn_q.weight"), w.Get(p+"attn_k.weight"), w.Get(p+"attn_v.weight"), w.Get(p+"attn_output.weight")
		l.qNorm, l.kNorm = w.Get(p+"attn_q_norm.weight"), w.Get(p+"attn_k_norm.weight")
		return
	}
	if c.Recurrent.FusedQKVZ {
		l.qkvz = w.Get(p + "ssm_in.weight")
	} else {
		l.qkv, l.z = w.Get(p+"attn_qkv.weight"), w.Get(p+"attn_gate.weight")
	}
	l.conv = w.Get(p + "ssm_conv1d.weight")
	l.dt, l.a = w.Get(p+"ssm_dt.bias"), w.Get(p+"ssm_a")
	if next {
		l.ba = w.Get(p + "ssm_ba.weight")
	} else {
		l.beta, l.alpha = w.Get(p+"ssm_beta.weight"), w.Get(p+"ssm_alpha.weight")
	}
	l.ssmNorm, l.ssmOut = w.Get(p+"ssm_norm.weight"), w.Get(p+"ssm_out.weight")
}

func (qwen35) Bind(c arch.Config, weight func(name string) arch.Tensor) (arch.Forward, error) {
	fw := &forward{c: c, layers: make([]layer, c.Layers)}
	w := arch.NewBinder(weight)
	fw.tokEmbd, fw.outNorm, fw.head = w.Get("token_embd.weight"), w.Get("output_norm.weight"), w.Get("output.weight")
	for i := range fw.layers {
		l := &fw.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		bindMixer(c, w, l, i, p, false)
		l.gate, l.up, l.down = w.Get(p+"ffn_gate.weight"), w.Get(p+"ffn_up.weight"), w.Get(p+"ffn_down.weight")
	}
	if err := w.Err("qwen35"); err != nil {
		return nil, err
	}
	return fw, nil
}

// Nodes: about 45 a recurrent block and 35 an attending one (60 leaves
// room; qwen3next's split of ssm_ba and repeats of q and k add 12, and
// the split of a fused ssm_in 12 more), a
// mixture of experts' besides, and the embedding, final norm and head.
func (fw *forward) Nodes() int {
	per := 60
	if fw.next {
		per += 12
	}
	if fw.c.Recurrent.FusedQKVZ {
		per += 12
	}
	n := per*len(fw.layers) + 16
	for _, l := range fw.layers {
		if l.moe.Router != 0 {
			n += l.moe.Nodes() + 8
		}
	}
	return n
}

// Build is, per block, x += mixer(x') over the attention-normed x' (the
// DeltaNet in a recurrent layer, gated attention in the others), then
// x += mlp(x”) over the post-attention-normed x”; then the final norm
// and head of the sampled rows. The order of every sum is llama.cpp's.
func (fw *forward) Build(o arch.Ops) arch.Tensor {
	c := fw.c
	x := o.Embed(fw.tokEmbd) // [dim, n]
	n, sampled := o.Tokens(), false
	for li := range fw.layers {
		l := &fw.layers[li]
		xn := arch.RMSNormed(o, x, l.attnNorm, c.NormEps)
		x = o.Add(fw.mix(o, li, l, xn), x)
		if li == len(fw.layers)-1 {
			x, n, sampled = arch.SampledForLastMLP(o, x, n)
		}
		xn = arch.RMSNormed(o, x, l.postNorm, c.NormEps)
		x = o.Add(mlp(o, l, xn, n), x)
	}
	if !sampled {
		return x
	}
	return o.MulMat(fw.head, arch.RMSNormed(o, x, fw.outNorm, c.NormEps)) // x: [dim, rows]
}

// mlp is layer l's MLP over the normed xn ([dim, n]): qwen35's SwiGLU, or
// qwen35moe's experts plus its gated shared expert.
func mlp(o arch.Ops, l *layer, xn arch.Tensor, n int) arch.Tensor {
	y := o.MulMat(l.down, o.SwiGLU(o.MulMat(l.gate, xn), o.MulMat(l.up, xn)))
	if l.moe.Router == 0 {
		return y
	}
	shared := o.Mul(y, o.Sigmoid(o.MulMat(l.sharedGate, xn)))
	return o.Add(l.moe.BuildRows(o, xn, n), shared)
}

// mix is layer li's mixer over the normed xn [dim, n].
func (fw *forward) mix(o arch.Ops, li int, l *layer, xn arch.Tensor) arch.Tensor {
	if fw.c.LayerKinds[li] == arch.Recurrent {
		return fw.deltaNet(o, li, l, xn)
	}
	return fw.gatedAttention(o, li, l, xn)
}

// gatedAttention: the query projection gives each head its query and
// its gate, side by side; queries and keys are RMS-normed per head and
// rotated by M-RoPE (qwen3next: NEOX RoPE) over RopeDims; the
// attention's output is gated by sigmoid(gate).
func (fw *forward) gatedAttention(o arch.Ops, li int, l *layer, xn arch.Tensor) arch.Tensor {
	c := fw.c
	hd, n := c.HeadDim, o.Tokens()
	qg := o.MulMat(l.q, xn) // [2·hd·heads, n]: per head hd of query, then hd of gate
	q := o.View(qg, hd, c.Heads, n, 2*hd, 2*hd*c.Heads, 0)
	gate := o.Cont(o.View(qg, hd, c.Heads, n, 2*hd, 2*hd*c.Heads, hd), hd*c.Heads, n)
	q = arch.RMSNormed(o, q, l.qNorm, c.NormEps)
	k := arch.RMSNormed(o, o.Reshape3D(o.MulMat(l.k, xn), hd, c.KVHeads, n), l.kNorm, c.NormEps)
	v := o.MulMat(l.v, xn) // [kvDim, n]
	if fw.next {
		rp := c.RopeParams(arch.RopeNeox)
		q, k = o.RopeExt(q, rp), o.RopeExt(k, rp)
	} else {
		rp := c.RopeParams(ropeIMRoPE)
		q, k = o.RopeMulti(q, rp, c.RopeSections), o.RopeMulti(k, rp, c.RopeSections)
	}
	attn := o.Attention(li, q, k, v, float32(1/math.Sqrt(float64(hd))))
	return o.MulMat(l.o, o.Mul(attn, o.Sigmoid(gate)))
}

// deltaNet: one projection gives the convolution's channels (queries,
// keys, values), another the output gate z; per value head, beta =
// sigmoid(ssm_beta·x) and the decay gate = softplus(ssm_alpha·x + dt) ×
// ssm_a (ssm_a is −exp(A_log)). After the convolution and SiLU, queries
// and keys are L2-normed (llama.cpp's: an RMS norm of eps/S, scaled by
// 1/√S); the DeltaNet's output is RMS-normed per head by ssm_norm, gated
// by silu(z), and projected back. qwen3next's differences are next.go's.
func (fw *forward) deltaNet(o arch.Ops, li int, l *layer, xn arch.Tensor) arch.Tensor {
	c := fw.c
	g, n := c.Recurrent, o.Tokens()
	S, hk, hv, ch := g.StateSize, g.KeyHeads, g.ValueHeads, g.ConvChannels()
	var qkv, z arch.Tensor // [ch, n], [inner, n]
	if l.qkvz != 0 {
		qkv, z = splitQKVZ(o, g, o.MulMat(l.qkvz, xn))
	} else {
		qkv, z = o.MulMat(l.qkv, xn), o.MulMat(l.z, xn)
	}
	var beta, alpha arch.Tensor
	if fw.next {
		beta, alpha = nextBetaAlpha(o, g, l, xn)
	} else {
		beta, alpha = o.Sigmoid(o.MulMat(l.beta, xn)), o.MulMat(l.alpha, xn)
	}
	gate := o.Mul(o.Softplus(o.Add(alpha, l.dt)), l.a) // [hv, n]
	conv := o.SiLU(o.SSMConv(li, qkv, l.conv))         // [ch, n]
	l2 := func(x arch.Tensor) arch.Tensor {
		return o.Scale(o.RMSNorm(x, c.NormEps/float32(S)), float32(1/math.Sqrt(float64(S))))
	}
	q := l2(o.View(conv, S, hk, n, S, ch, 0))
	k := l2(o.View(conv, S, hk, n, S, ch, S*hk))
	if fw.next {
		q, k = repeatGroups(o, g, q), repeatGroups(o, g, k)
	}
	v := o.Cont(o.View(conv, S, hv, n, S, ch, 2*S*hk), S*hv, n)
	out := o.GatedDeltaNet(li, q, k, v, gate, beta) // [S·hv, n]
	normed := arch.RMSNormed(o, o.Reshape3D(out, S, hv, n), l.ssmNorm, c.NormEps)
	gated := o.Mul(normed, o.SiLU(o.Reshape3D(z, S, hv, n)))
	return o.MulMat(l.ssmOut, o.Reshape2D(gated, g.Inner, n))
}
