package arch

// MLA is multi-head latent attention's geometry (deepseek2: DeepSeek-V2,
// V3, Kimi-K2, GLM-4.7-Flash), zero for every other architecture. Keys
// and values are projected from one compressed latent of KVRank per token
// (plus RopeDims rotated dimensions shared by every head), which is what
// the KV cache keeps: Config.HeadDim is KVRank+RopeDims and
// Config.KVHeads 1, every query head attending over the latent (llama.cpp's
// "absorbed" MLA).
type MLA struct {
	// QRank is the queries' low rank (attention.q_lora_rank: attn_q_a,
	// attn_q_a_norm, attn_q_b); 0 projects them directly (attn_q:
	// DeepSeek-V2-Lite).
	QRank int
	// KVRank is the latent's width (attention.kv_lora_rank).
	KVRank int
	// KeyLength is a head's key width decompressed, its unrotated part and
	// RopeDims (attention.key_length_mla); ValueLength its value width
	// (attention.value_length_mla).
	KeyLength, ValueLength int
}

// MLAOps are the operations multi-head latent attention adds (ggml's
// views, permutes and concat, and attention over a latent cache).
type MLAOps interface {
	// View3D is a view of x, an F32 tensor, as [ne0, ne1, ne2] with strides
	// s1 and s2 between rows and matrices, starting at element off
	// (strides and offset in elements).
	View3D(x Tensor, ne0, ne1, ne2, s1, s2, off int) Tensor
	// Permute moves x's axis i to position axes[i] (ggml_permute).
	Permute(x Tensor, ax0, ax1, ax2, ax3 int) Tensor
	// Concat joins a and b along their first dimension (their other
	// dimensions equal).
	Concat(a, b Tensor) Tensor
	// AttentionMLA writes this iteration's latents kv [HeadDim, 1, n] into
	// layer's paged key cache, then attends q [HeadDim, heads, n] over
	// each sequence's latents, scaled by scale before the softmax, the
	// values being the first MLA.KVRank elements of each latent; each
	// head's output is then multiplied by its matrix of vb [KVRank,
	// ValueLength, heads]: [ValueLength·heads, n]. There is no value
	// cache (the executor keeps keys only).
	AttentionMLA(layer int, q, kv, vb Tensor, scale float32) Tensor
}
