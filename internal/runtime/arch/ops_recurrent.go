package arch

// RecurrentOps are the operations of hybrid models (qwen35, qwen35moe,
// qwen3next): their recurrent layers' convolution and gated DeltaNet,
// each over a state per sequence the executor keeps (the engine gives
// each sequence a state slot; a sequence at position 0 starts from a zero
// state), and what their attention layers and DeltaNet add: M-RoPE,
// views, repeats and the element-wise activations. Shapes are in ggml
// order.
type RecurrentOps interface {
	// SSMConv is layer's short causal convolution: for each sequence of
	// the batch, its tokens' columns of x [channels, n] are appended to
	// its convolution state (its last kernel-1 inputs, zero at position
	// 0) and convolved, channel by channel, with kernel [kernel,
	// channels] (F32): [channels, n]. The state then holds the last
	// kernel-1 inputs. No activation is applied.
	SSMConv(layer int, x, kernel Tensor) Tensor
	// GatedDeltaNet runs layer's gated delta rule over each sequence's
	// state (one StateSize×StateSize matrix per value head, zero at
	// position 0), token by token: q, k [S, heads, n] (heads dividing
	// valueHeads: the geometry's KeyHeads, or valueHeads when the caller
	// has repeated them), v [S, valueHeads, n], gate and beta [1,
	// valueHeads, n]; value head h reads q/k head h mod heads. The state
	// decays by exp(gate), is corrected toward v by beta, and is read by
	// q scaled by 1/√S (ggml's ggml_gated_delta_net): [S, valueHeads, n].
	// The state then holds the sequence's last token.
	GatedDeltaNet(layer int, q, k, v, gate, beta Tensor) Tensor
	// RopeMulti is multimodal RoPE (ggml_rope_multi) over x [headDim,
	// heads, n] with p's parameters and sections, every section at the
	// token's position (text).
	RopeMulti(x Tensor, p RopeParams, sections [4]int) Tensor
	// Softplus and SiLU are element-wise.
	Softplus(x Tensor) Tensor
	SiLU(x Tensor) Tensor
	// View is a view of x (F32) of shape [ne0, ne1, ne2] whose rows are
	// nb1 and whose matrices nb2 elements apart, from element offset.
	View(x Tensor, ne0, ne1, ne2, nb1, nb2, offset int) Tensor
	// Cont is x laid out contiguously as [ne0, ne1] (a view's copy).
	Cont(x Tensor, ne0, ne1 int) Tensor
	// Repeat tiles x (F32, each of its dimensions dividing the target's)
	// to [ne0, ne1, ne2]: element (i, j, k) is x's (i mod x.ne0, j mod
	// x.ne1, k mod x.ne2), as ggml_repeat_4d.
	Repeat(x Tensor, ne0, ne1, ne2 int) Tensor
}
