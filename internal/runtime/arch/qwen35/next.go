package qwen35

import (
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// Qwen3Next is Qwen3-Next's hybrid architecture (Qwen3-Next-80B-A3B,
// Qwen3-Coder-Next; GGUF "qwen3next"), as llama.cpp's qwen3next graph
// runs it: qwen35moe's layers (the same DeltaNet and gated attention,
// experts routed by softmax beside a sigmoid-gated shared expert) with
// three differences. Its attention rotates by NEOX RoPE over the first
// RopeDims of each head (no M-RoPE sections); its DeltaNet's beta and
// alpha come from one projection, ssm_ba, whose output runs key head by
// key head, each its value heads' betas then their alphas; and its value
// heads follow their key heads in groups (value head h reads key head
// h / (ValueHeads/KeyHeads), where qwen35's reads h mod KeyHeads), so
// queries and keys are repeated, head by head, to the value heads before
// the delta rule, as llama.cpp repeats them. Expert weights are not
// scaled (llama.cpp reads no expert_weights_scale for it).
// Files of older conversions project the DeltaNet's inputs through one
// ssm_in (queries, keys, values and z interleaved per key head:
// RecurrentGeometry.FusedQKVZ), split as llama.cpp splits it; llama.cpp's
// converter now writes attn_qkv and attn_gate.
var Qwen3Next arch.Architecture = moeArch{name: "qwen3next", next: true}

// fusedQKVZ reports whether the file's recurrent layers project through
// one ssm_in (older conversions) rather than attn_qkv and attn_gate: the
// first recurrent layer's tensors say.
func fusedQKVZ(file arch.File, kinds []arch.LayerKind) bool {
	for i, k := range kinds {
		if k == arch.Recurrent {
			return file.Shape(fmt.Sprintf("blk.%d.ssm_in.weight", i)) != nil
		}
	}
	return false
}

// splitQKVZ splits a fused ssm_in's output mixed [ch+inner, n], laid out
// key head by key head (its query, its key, its r = hv/hk value heads'
// values, then their gates), into the convolution's channels (all
// queries, all keys, all values: [ch, n]) and z [inner, n], as llama.cpp
// does: views, copies and concatenations.
func splitQKVZ(o arch.Ops, g arch.RecurrentGeometry, mixed arch.Tensor) (qkv, z arch.Tensor) {
	S, hk, n := g.StateSize, g.KeyHeads, o.Tokens()
	rS := g.Inner / hk // a key head's values (and gates)
	w := 2*S + 2*rS    // a key head's group
	part := func(width, offset int) arch.Tensor {
		return o.Cont(o.View(mixed, width, hk, n, w, w*hk, offset), width*hk, n)
	}
	z = part(rS, 2*S+rS)
	q, k, v := part(S, 0), part(S, S), part(rS, 2*S)
	return o.Concat(o.Concat(q, k), v), z
}

// nextBetaAlpha are qwen3next's beta (sigmoid applied) and alpha [hv, n]
// from ssm_ba, whose [2·hv, n] output holds, per key head, its r =
// hv/hk value heads' betas and then their alphas.
func nextBetaAlpha(o arch.Ops, g arch.RecurrentGeometry, l *layer, xn arch.Tensor) (beta, alpha arch.Tensor) {
	n, hk, hv := o.Tokens(), g.KeyHeads, g.ValueHeads
	r := hv / hk
	ba := o.MulMat(l.ba, xn) // [2·hv, n]
	beta = o.Sigmoid(o.Cont(o.View(ba, r, hk, n, 2*r, 2*hv, 0), hv, n))
	alpha = o.Cont(o.View(ba, r, hk, n, 2*r, 2*hv, r), hv, n)
	return beta, alpha
}

// repeatGroups repeats each key head of x [S, hk, n] (contiguous) for the
// hv/hk value heads that read it: [S, hv, n], head h being x's h/(hv/hk).
func repeatGroups(o arch.Ops, g arch.RecurrentGeometry, x arch.Tensor) arch.Tensor {
	S, hk, hv, n := g.StateSize, g.KeyHeads, g.ValueHeads, o.Tokens()
	if hk == hv {
		return x
	}
	return o.Reshape3D(o.Repeat(o.Reshape3D(x, S, 1, hk*n), S, hv/hk, hk*n), S, hv, n)
}
