package arch

// GptOssOps are the operations gpt-oss adds to the llama family's and
// MoEOps: its experts' clamped SwiGLU, per-expert biases, and attention
// sinks. They are ggml's (ggml_swiglu_oai, ggml_add_id,
// ggml_soft_max_add_sinks / ggml_flash_attn_ext_add_sinks), whose results
// an executor over ggml's kernels then shares with llama.cpp.
type GptOssOps interface {
	// SwiGLUOAI is OpenAI's clamped SwiGLU, element-wise over gate and
	// up of the same shape: with g = min(gate, limit) and
	// u = clamp(up, -limit, limit), g·sigmoid(alpha·g)·(u + 1).
	SwiGLUOAI(gate, up Tensor, alpha, limit float32) Tensor
	// AddID adds to each column (i, j) of x [m, used, n] the bias row
	// ids[i, j] of bias [m, experts]: a mixture of experts' per-expert
	// biases after MulMatID.
	AddID(x, bias, ids Tensor) Tensor
	// AttentionSinks is Attention with one learned logit per query head,
	// sinks [heads] (F32): it joins the softmax's denominator (each
	// head's weights then sum to less than 1) and is attended by nothing.
	AttentionSinks(layer int, q, k, v, sinks Tensor, scale float32) Tensor
}
