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
//
// Files from converters that stored the DeltaNet's input projection fused
// (ssm_in: queries, keys, values and z interleaved per key head) are
// refused: llama.cpp's converter now writes attn_qkv and attn_gate.
var Qwen3Next arch.Architecture = moeArch{name: "qwen3next", next: true}

// readNext refuses what qwen3next files may hold that this graph does not
// run: the legacy fused ssm_in projection.
func readNext(file arch.File, p string) error {
	blocks, _, err := file.Uint(p + "block_count")
	if err != nil {
		return err
	}
	for i := range int(blocks) {
		if file.Shape(fmt.Sprintf("blk.%d.ssm_in.weight", i)) != nil {
			return fmt.Errorf("tensor blk.%d.ssm_in.weight: the fused qkvz projection of older qwen3next conversions is unsupported (convert again: llama.cpp's converter writes attn_qkv and attn_gate)", i)
		}
	}
	return nil
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
