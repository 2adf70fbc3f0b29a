package arch

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Config is a model's geometry and hyperparameters: the fields every
// architecture has (the KV cache's geometry among them), and those of the
// llama family. Fields later architectures need are grouped at the end;
// their packages read them, and the llama family leaves them zero.
type Config struct {
	// Arch is the GGUF architecture name, a registered one ("llama", "qwen2").
	Arch string
	// VocabSize is the number of rows of the embedding and output matrices.
	VocabSize int
	// Dim is the residual stream width.
	Dim int
	// Layers is the number of transformer blocks.
	Layers int
	// Heads is the number of query heads; KVHeads the number of key/value heads
	// (grouped-query attention when KVHeads < Heads).
	Heads, KVHeads int
	// HeadDim is the width of one head (usually Dim/Heads).
	HeadDim int
	// FFN is the hidden width of the SwiGLU MLP.
	FFN int
	// ContextLen is the longest sequence the model was trained for.
	ContextLen int
	// RopeTheta is the rotary embedding base; NormEps the RMSNorm epsilon.
	RopeTheta, NormEps float32
	// TiedEmbeddings: the output head reuses the token embedding matrix.
	TiedEmbeddings bool
	// QKVBias: the q, k and v projections have biases (Qwen2).
	QKVBias bool
	// BOS is the beginning-of-sequence token, or -1 when the model has none.
	BOS int32
	// EOS are the tokens that end generation (end of text, end of turn).
	EOS []int32

	// RopeDims is the number of dimensions of a head RoPE rotates (partial
	// rotary embeddings); 0 means HeadDim.
	RopeDims int
	// RopeScaling stretches RoPE to a longer context; the zero value is
	// none.
	RopeScaling RopeScaling
	// LayerKinds says, per layer, what its attention is; nil means every
	// layer attends over its whole context (Full).
	LayerKinds []LayerKind
	// SlidingWindow is the window of the SlidingWindow layers, in tokens.
	SlidingWindow int
	// Experts and ExpertsUsed are a mixture-of-experts MLP's expert count
	// and how many each token runs; 0 for a dense MLP.
	Experts, ExpertsUsed int
	// ExpertFFN is the hidden width of one expert's SwiGLU MLP (GGUF's
	// expert_feed_forward_length); FFN stays the dense layers' width.
	ExpertFFN int
	// FusedGateUpExperts: the experts' gate and up projections are one
	// tensor, ffn_gate_up_exps.weight (ExpertSpecs), as newer llama.cpp
	// conversions store them; read from the file where llama.cpp accepts
	// it (deepseek2, qwen35moe, qwen3next).
	FusedGateUpExperts bool
	// SharedExperts counts the experts every token runs besides the routed
	// ones (GGUF's expert_shared_count), together one MLP of
	// SharedExperts·ExpertFFN.
	SharedExperts int
	// DenseLayers is how many leading layers have a dense MLP of FFN
	// instead of experts (GGUF's leading_dense_block_count).
	DenseLayers int
	// ExpertGating is how the router's logits become the experts' weights.
	ExpertGating Gating
	// ExpertWeightsNorm: the selected experts' weights are divided by
	// their sum (Hugging Face's norm_topk_prob).
	ExpertWeightsNorm bool
	// ExpertWeightsScale multiplies the selected experts' weights (the
	// routed scaling factor); 0 means 1.
	ExpertWeightsScale float32
	// QKNorm: each layer RMS-normalizes every query and key head by
	// weights of HeadDim (attn_q_norm, attn_k_norm) where an architecture
	// makes them optional (glm4moe; qwen3's are its architecture's).
	QKNorm bool
	// NextNLayers counts the multi-token-prediction layers a file carries
	// after its Layers (GGUF's nextn_predict_layers, counted in its
	// block_count): the forward pass skips them, as llama.cpp's does.
	NextNLayers int
	// AttnTempScale is Llama 4's attention temperature tuning, which
	// mistral3 reads (attention.temperature_scale): each query is
	// multiplied by 1 + AttnTempScale·ln(⌊pos/AttnTempFloor()⌋+1), so that
	// attention sharpens past the trained context; 0 for none.
	AttnTempScale float32
	// RopeFreqFactors: the file has rope_freqs.weight, RopeDims/2 divisors
	// of RoPE's per-pair frequencies (Llama 3.1's "llama3" scaling, which
	// converters bake into the file; mistral3 may carry one too).
	RopeFreqFactors bool
	// MLA is multi-head latent attention's geometry (deepseek2); zero
	// without it.
	MLA MLA
	// ExpertSelectionBias: the routers have a selection bias
	// (exp_probs_b.bias, DeepSeek-V3's), which deepseek2 reads from the
	// file (glm4moe's always have one).
	ExpertSelectionBias bool
	// ExpertGroups, when more than 1, is how many equal groups the experts
	// are split into, of which a token chooses from the ExpertGroupsUsed
	// best (GGUF's expert_group_count and expert_group_used_count,
	// DeepSeek-V3's grouped selection); deepseek2 reads them.
	ExpertGroups, ExpertGroupsUsed int
	// RopeSections are multimodal RoPE's sections (rope.dimension_sections:
	// how many of a head's rotated pairs each of up to four position
	// components turns); text tokens give every section the same position.
	// All zero for an architecture without M-RoPE.
	RopeSections [4]int
	// Recurrent holds the geometry of the layers LayerKinds marks
	// Recurrent (hybrid models); the zero value for the others.
	Recurrent RecurrentGeometry
}

// RecurrentGeometry is the shape of a hybrid model's recurrent layers:
// gated DeltaNet (linear attention) over a fixed-size state per sequence,
// after a short causal convolution (GGUF's ssm.* keys, as llama.cpp reads
// them for qwen35, qwen35moe and qwen3next).
type RecurrentGeometry struct {
	// ConvKernel is the convolution's width (ssm.conv_kernel); the
	// convolution state keeps the last ConvKernel-1 inputs.
	ConvKernel int
	// StateSize is the width of a key and a value head (ssm.state_size).
	StateSize int
	// KeyHeads (ssm.group_count) and ValueHeads (ssm.time_step_rank) are
	// the key and value head counts; value head h reads key head
	// h mod KeyHeads (qwen35, qwen35moe) or h / (ValueHeads/KeyHeads)
	// (qwen3next).
	KeyHeads, ValueHeads int
	// Inner is the value width, StateSize·ValueHeads (ssm.inner_size).
	Inner int
	// FusedQKVZ: the convolution's channels and the output gate come
	// from one projection, ssm_in, laid out key head by key head (its
	// query, its key, then its value heads' values and gates), as older
	// qwen3next conversions store it; otherwise from attn_qkv and
	// attn_gate. The tensors say which (qwen3next only).
	FusedQKVZ bool
}

// Validate refuses a geometry the recurrent layers cannot run.
func (g RecurrentGeometry) Validate() error {
	switch {
	case g.ConvKernel < 2 || g.StateSize <= 0 || g.KeyHeads <= 0 || g.ValueHeads <= 0:
		return fmt.Errorf("recurrent layers: conv kernel %d, state size %d, key heads %d, value heads %d: want a kernel of 2 or more and the rest positive",
			g.ConvKernel, g.StateSize, g.KeyHeads, g.ValueHeads)
	case g.ValueHeads%g.KeyHeads != 0:
		return fmt.Errorf("recurrent layers: %d value heads are not a multiple of %d key heads", g.ValueHeads, g.KeyHeads)
	case g.Inner != g.StateSize*g.ValueHeads:
		return fmt.Errorf("recurrent layers: inner size %d, want state size × value heads = %d", g.Inner, g.StateSize*g.ValueHeads)
	}
	return nil
}

// ConvChannels is the convolution's width in channels: queries, keys and
// values.
func (g RecurrentGeometry) ConvChannels() int { return 2*g.KeyHeads*g.StateSize + g.Inner }

// ConvStateFloats is one sequence's convolution state in one layer: the
// last ConvKernel-1 inputs of every channel.
func (g RecurrentGeometry) ConvStateFloats() int { return (g.ConvKernel - 1) * g.ConvChannels() }

// DeltaStateFloats is one sequence's DeltaNet state in one layer: a
// StateSize×StateSize matrix per value head.
func (g RecurrentGeometry) DeltaStateFloats() int { return g.StateSize * g.StateSize * g.ValueHeads }

// RecurrentLayers counts the layers LayerKinds marks Recurrent.
func (c Config) RecurrentLayers() int {
	n := 0
	for _, k := range c.LayerKinds {
		if k == Recurrent {
			n++
		}
	}
	return n
}

// KVLayers counts the layers that keep keys and values: all but the
// recurrent ones.
func (c Config) KVLayers() int { return c.Layers - c.RecurrentLayers() }

// StateBytes is one sequence's recurrent state over every recurrent
// layer, in F32: 0 for a model without recurrent layers.
func (c Config) StateBytes() int64 {
	g := c.Recurrent
	return 4 * int64(c.RecurrentLayers()) * int64(g.ConvStateFloats()+g.DeltaStateFloats())
}

// RopeScaling is GGUF's rope.scaling.*: Type "linear", "yarn" …, Factor
// the context's stretch and OrigContext the context trained before it.
// Type "" is a file without rope.scaling.type, which llama.cpp reads as
// "linear" (so a Factor alone stretches linearly); "none" ignores Factor.
type RopeScaling struct {
	Type        string
	Factor      float32
	OrigContext int
	// AttnFactor is rope.scaling.attn_factor, the model's own multiplier
	// of the rotated values (every architecture's); 0 means 1.
	AttnFactor float32
	// YarnBetaFast, YarnBetaSlow and YarnLogMul are
	// rope.scaling.yarn_beta_fast, yarn_beta_slow and
	// yarn_log_multiplier, which only some architectures read (mistral3;
	// llama.cpp's llama family keeps its defaults whatever the file says).
	// 0 means the defaults: betas 32 and 1, no log multiplier.
	YarnBetaFast, YarnBetaSlow, YarnLogMul float32
}

// LayerKind is what a layer's attention reads.
type LayerKind uint8

const (
	// Full attends over the whole context.
	Full LayerKind = iota
	// SlidingWindow attends over the last Config.SlidingWindow tokens.
	SlidingWindow
	// Recurrent keeps a per-sequence state instead of keys and values.
	Recurrent
)

// RopeNeox reports whether RoPE rotates the pairs (i, i+HeadDim/2) (GGUF's
// NEOX mode, used by qwen2 and qwen3) rather than the adjacent pairs (2i, 2i+1) that
// GGUF llama models use (their q/k weights are permuted for it at
// conversion). It is the llama family's choice, which the pure-Go
// reference executor reads; architectures choose their own in Forward.
func (c Config) RopeNeox() bool { return c.Arch == "qwen2" || c.Arch == "qwen3" }

// Validate reports the first inconsistency in the geometry, or an
// architecture that is not registered.
func (c Config) Validate() error {
	a, err := Lookup(c.Arch)
	if err != nil {
		return err
	}
	switch {
	case c.VocabSize <= 0 || c.Dim <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.FFN <= 0:
		return fmt.Errorf("vocab %d, dim %d, layers %d, heads %d, kv heads %d, head dim %d, ffn %d: all must be positive",
			c.VocabSize, c.Dim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.FFN)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("heads %d is not a multiple of kv heads %d", c.Heads, c.KVHeads)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("head dim %d is odd; rotary embeddings rotate pairs", c.HeadDim)
	case c.ContextLen <= 0:
		return fmt.Errorf("context length %d must be positive", c.ContextLen)
	case !(c.RopeTheta > 0) || !(c.NormEps > 0):
		return fmt.Errorf("rope theta %g and norm eps %g must be positive", c.RopeTheta, c.NormEps)
	case c.BOS < -1 || int(c.BOS) >= c.VocabSize:
		return fmt.Errorf("bos token %d outside the vocabulary of %d", c.BOS, c.VocabSize)
	case c.LayerKinds != nil && len(c.LayerKinds) != c.Layers:
		return fmt.Errorf("%d layer kinds for %d layers", len(c.LayerKinds), c.Layers)
	case c.Experts < 0 || c.ExpertsUsed < 0 || c.ExpertsUsed > c.Experts || (c.Experts > 0) != (c.ExpertsUsed > 0):
		return fmt.Errorf("%d experts, %d used per token: want 0 < used ≤ experts, or both 0", c.Experts, c.ExpertsUsed)
	case c.Experts > 0 && c.ExpertFFN <= 0:
		return fmt.Errorf("expert ffn %d must be positive with %d experts", c.ExpertFFN, c.Experts)
	case c.FusedGateUpExperts && c.Experts == 0:
		return fmt.Errorf("fused experts' gate and up projections (ffn_gate_up_exps) without experts")
	case c.DenseLayers < 0 || c.DenseLayers > c.Layers || c.SharedExperts < 0 || c.NextNLayers < 0:
		return fmt.Errorf("%d leading dense layers of %d, %d shared experts, %d next-token layers: out of range", c.DenseLayers, c.Layers, c.SharedExperts, c.NextNLayers)
	case c.RopeDims < 0 || c.RopeDims > c.HeadDim || c.RopeDims%2 != 0:
		return fmt.Errorf("rope dims %d: must be even and at most the head dim %d (0: all of it)", c.RopeDims, c.HeadDim)
	case c.RopeScaling.Type != "" && !slices.Contains(RopeScalingTypes, c.RopeScaling.Type):
		return fmt.Errorf("rope scaling %q is unsupported (supported: %s)", c.RopeScaling.Type, strings.Join(RopeScalingTypes, ", "))
	case c.RopeScaling.Factor < 0 || math.IsInf(float64(c.RopeScaling.Factor), 0) || c.RopeScaling.Factor != c.RopeScaling.Factor:
		return fmt.Errorf("rope scaling factor %g must be positive (0: none)", c.RopeScaling.Factor)
	case math.IsInf(float64(c.AttnTempScale), 0) || c.AttnTempScale != c.AttnTempScale:
		return fmt.Errorf("attention temperature scale %g must be finite", c.AttnTempScale)
	case c.RopeScaling.OrigContext < 0:
		return fmt.Errorf("rope scaling original context %d must not be negative", c.RopeScaling.OrigContext)
	case c.KVLayers() == 0:
		return fmt.Errorf("all %d layers are recurrent: a model needs an attention layer", c.Layers)
	}
	if c.RecurrentLayers() > 0 {
		if err := c.Recurrent.Validate(); err != nil {
			return err
		}
	}
	for _, id := range c.EOS {
		if id < 0 || int(id) >= c.VocabSize {
			return fmt.Errorf("eos token %d outside the vocabulary of %d", id, c.VocabSize)
		}
	}
	if v, ok := a.(Validator); ok {
		return v.Validate(c)
	}
	return nil
}

// Validator is implemented by an architecture whose geometry has rules of
// its own (a mixture of experts needs experts): Config.Validate calls it
// after its own checks.
type Validator interface {
	Validate(c Config) error
}

// NumParams is the number of weights, counting a tied head once: the sum
// over the architecture's tensors (0 when it is not registered).
func (c Config) NumParams() int64 {
	a, err := Lookup(c.Arch)
	if err != nil {
		return 0
	}
	return Params(a.Tensors(c))
}

// WithDefaults fills unset fields the way model.Random does: arch llama,
// head dim Dim/Heads, kv heads Heads, context 4096, theta 10000, eps 1e-5,
// expert ffn FFN/ExpertsUsed.
func (c Config) WithDefaults() Config {
	if c.Arch == "" {
		c.Arch = "llama"
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Dim / c.Heads
	}
	if c.ContextLen == 0 {
		c.ContextLen = 4096
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-5
	}
	if c.Experts > 0 && c.ExpertFFN == 0 && c.ExpertsUsed > 0 {
		c.ExpertFFN = c.FFN / c.ExpertsUsed // llama.cpp's default
	}
	return c
}
