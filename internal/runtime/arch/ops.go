package arch

// Tensor is an executor's handle of a tensor in the graph being built (a
// weight, an input, an intermediate result). 0 is no tensor.
type Tensor uintptr

// RopeMode is how RoPE pairs a head's dimensions (ggml's mode numbers).
type RopeMode int32

const (
	// RopeNormal rotates adjacent pairs (2i, 2i+1): GGUF llama models.
	RopeNormal RopeMode = 0
	// RopeNeox rotates the pairs (i, i+dims/2): qwen2 and most others.
	RopeNeox RopeMode = 2
)

// Ops are the tensor operations an executor offers a forward pass while it
// builds one iteration's graph over the batch's n tokens. Shapes are in
// ggml order ([row length, rows, …]). The operations only describe the
// graph: nothing is computed until the executor runs it, and every call
// must be made in the same order for batches of the same shape, so that
// the executor may build once and reuse the graph (what Forward.Build
// promises by depending on nothing but its Ops and its bound weights).
type Ops interface {
	// Tokens is n, the batch's token count.
	Tokens() int
	// Embed looks the batch's token ids up in table: [Dim, n].
	Embed(table Tensor) Tensor
	// MulMat is w·x: w [k, m], x [k, n] → [m, n].
	MulMat(w, x Tensor) Tensor
	// Add and Mul are element-wise, b broadcast over a's rows.
	Add(a, b Tensor) Tensor
	Mul(a, b Tensor) Tensor
	// RMSNorm normalizes each row of x (no weight: Mul by it).
	RMSNorm(x Tensor, eps float32) Tensor
	// Reshape3D views x, contiguous, as [ne0, ne1, ne2].
	Reshape3D(x Tensor, ne0, ne1, ne2 int) Tensor
	// Rope rotates the first dims dimensions of every head of x
	// [headDim, heads, n] by the batch's positions: RopeExt without
	// scaling.
	Rope(x Tensor, dims int, mode RopeMode, theta float32) Tensor
	// RopeExt is Rope with every parameter of ggml_rope_ext: partial
	// rotation, linear and YaRN scaling (Config.RopeParams derives them
	// from a model's hyperparameters as llama.cpp does).
	RopeExt(x Tensor, p RopeParams) Tensor
	// AttnTemperature multiplies each token's rows of q [headDim, heads, n]
	// by 1 + scale·ln(⌊pos/floor⌋+1) at its position pos (Llama 4's
	// attention temperature tuning, Config.AttnTempScale): the same scale
	// and floor in every call of a forward pass.
	AttnTemperature(q Tensor, scale float32, floor int) Tensor
	// SwiGLU is silu(gate) ⊙ up.
	SwiGLU(gate, up Tensor) Tensor
	// Attention writes this iteration's keys k [headDim, kvHeads, n] and
	// values v [headDim·kvHeads, n] into layer's paged KV cache and
	// returns the attention of q [headDim, heads, n] over each sequence's
	// context, scaled by scale before the softmax: [headDim·heads, n]. A
	// layer Config.LayerKinds marks SlidingWindow attends only over the
	// last Config.SlidingWindow positions up to each query's own (a key at
	// position p is seen from position t when t-window < p ≤ t, llama.cpp's
	// standard window), though the cache keeps every position.
	Attention(layer int, q, k, v Tensor, scale float32) Tensor
	// Sampled keeps the rows of x [w, n] the batch samples: [w, rows]. ok
	// is false when it samples none; the forward pass then ends at x (its
	// KV writes are what the iteration is for).
	Sampled(x Tensor) (rows Tensor, ok bool)
	// SampledRows is how many rows Sampled keeps (0 when it samples none),
	// the width of what a forward pass runs on after it.
	SampledRows() int
	// MoEOps are those of mixture-of-experts MLPs (moe.go).
	MoEOps
	// GptOssOps are gpt-oss's (ops_oss.go).
	GptOssOps
	// RecurrentOps are hybrid models' (ops_recurrent.go).
	RecurrentOps
	// MLAOps are multi-head latent attention's (ops_mla.go).
	MLAOps
	// GroupOps are grouped expert selection's (moe_group.go).
	GroupOps
}

// Forward is an architecture's forward pass over its bound weights.
type Forward interface {
	// Build describes one iteration over ops and returns the logits of
	// the sampled rows ([VocabSize, rows]), or, when the batch samples
	// none, the last hidden state Sampled was given.
	Build(ops Ops) Tensor
	// Nodes bounds the graph nodes Build adds, views included, besides
	// those of Ops.Attention (the executor bounds its own): the executor
	// sizes the graph by it, and ggml aborts on a graph that outgrows it.
	Nodes() int
}
