// Package gptoss is OpenAI's gpt-oss architecture (gpt-oss-20b and
// gpt-oss-120b; GGUF "gpt-oss"), as llama.cpp's openai-moe graph runs it:
// pre-norm blocks of grouped-query attention with biased q/k/v/o
// projections, a learned sink logit per head in every softmax, NEOX RoPE,
// and layers alternating between a sliding window (even layers, by
// default) and the whole context; after attention a post-attention norm
// and a mixture of experts with biased router and experts, chosen by the
// router's raw logits and weighted by a softmax over the chosen ones, each
// expert a clamped SwiGLU (alpha 1.702, limit 7).
//
// RoPE is scaled as the file says (the released models: YaRN, factor 32
// over 4,096 tokens), on sliding and full layers alike. The sliding
// layers' KV cache keeps every position for now (their attention masks
// all but the window's).
package gptoss

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// GptOss is the architecture.
var GptOss arch.Architecture = gptoss{}

type gptoss struct{}

const prefix = "gpt-oss."

// The experts' SwiGLU constants: llama.cpp's for LLM_FFN_SWIGLU_OAI_MOE,
// gpt-oss's own (not in the GGUF).
const (
	swigluAlpha = 1.702
	swigluLimit = 7.0
)

// defaultPattern is llama.cpp's sliding-window pattern for gpt-oss when
// the file names none: of every 2 layers the first slides.
const defaultPattern = 2

func (gptoss) Name() string { return "gpt-oss" }

func (gptoss) ReadConfig(file arch.File, c *arch.Config) error {
	p := prefix
	pattern := defaultPattern
	if err := arch.Read(file,
		arch.Uint(p+"embedding_length", &c.Dim),
		arch.Uint(p+"block_count", &c.Layers),
		arch.OptUint(p+"feed_forward_length", &c.FFN),
		arch.Uint(p+"attention.head_count", &c.Heads),
		arch.OptUint(p+"attention.head_count_kv", &c.KVHeads),
		arch.OptUint(p+"attention.key_length", &c.HeadDim),
		arch.Uint(p+"context_length", &c.ContextLen),
		arch.Uint(p+"expert_count", &c.Experts),
		arch.Uint(p+"expert_used_count", &c.ExpertsUsed),
		arch.Uint(p+"expert_feed_forward_length", &c.ExpertFFN),
		arch.Uint(p+"attention.sliding_window", &c.SlidingWindow),
		arch.OptUint(p+"attention.sliding_window_pattern", &pattern),
	); err != nil {
		return err
	}
	if c.FFN == 0 {
		c.FFN = c.ExpertFFN // every layer's MLP is its experts
	}
	if err := arch.HeadDefaults(file, p, c); err != nil {
		return err
	}
	if c.SlidingWindow <= 0 {
		return fmt.Errorf("metadata %sattention.sliding_window = %d: want a positive window", p, c.SlidingWindow)
	}
	c.LayerKinds = LayerKinds(c.Layers, pattern)
	if v, ok, err := file.Uint(p + "rope.dimension_count"); err != nil {
		return err
	} else if ok && int(v) != c.HeadDim {
		return fmt.Errorf("metadata %srope.dimension_count = %d: partial RoPE (other than the head dim %d) is unsupported", p, v, c.HeadDim)
	}
	if err := arch.ReadRopeScaling(file, p, &c.RopeScaling); err != nil {
		return err
	}
	c.RopeTheta = 10000
	if err := arch.Read(file,
		arch.OptFloat(p+"rope.freq_base", &c.RopeTheta),
		arch.Float(p+"attention.layer_norm_rms_epsilon", &c.NormEps),
	); err != nil {
		return err
	}
	if v, ok, err := file.Float(p + "rope.freq_base_swa"); err != nil {
		return err
	} else if ok && float32(v) != c.RopeTheta {
		return fmt.Errorf("metadata %srope.freq_base_swa = %g differs from rope.freq_base %g (unsupported)", p, v, c.RopeTheta)
	}
	c.ExpertGating = arch.GatingSoftmaxWeight
	if err := arch.ReadVocab(file, c); err != nil {
		return err
	}
	c.QKVBias = true
	return nil
}

// LayerKinds is llama.cpp's sliding-window pattern over layers: of every
// pattern layers all but the last slide (pattern 0: every layer slides).
func LayerKinds(layers, pattern int) []arch.LayerKind {
	kinds := make([]arch.LayerKind, layers)
	for i := range kinds {
		if pattern == 0 || i%pattern < pattern-1 {
			kinds[i] = arch.SlidingWindow
		}
	}
	return kinds
}

// Validate: experts, a window, biased projections and an untied head
// (llama.cpp requires all of them), RoPE over whole heads.
func (gptoss) Validate(c arch.Config) error {
	switch {
	case c.Experts == 0:
		return errors.New("gpt-oss needs experts (expert_count, expert_used_count)")
	case c.SlidingWindow <= 0:
		return fmt.Errorf("gpt-oss needs a sliding window, not %d", c.SlidingWindow)
	case pattern(c.LayerKinds) < 0:
		return errors.New("gpt-oss needs its layer kinds: sliding and full layers in a repeating pattern (LayerKinds)")
	case !c.QKVBias:
		return errors.New("gpt-oss has q/k/v biases")
	case c.TiedEmbeddings:
		return errors.New("gpt-oss has an output head of its own (no tied embeddings)")
	case c.RopeScaling.Type != "" && !slices.Contains(arch.RopeScalingTypes, c.RopeScaling.Type):
		return fmt.Errorf("rope scaling %q is unsupported (supported: %s)", c.RopeScaling.Type, strings.Join(arch.RopeScalingTypes, ", "))
	case c.RopeScaling.YarnBetaFast != 0 || c.RopeScaling.YarnBetaSlow != 0 || c.RopeScaling.YarnLogMul != 0 || c.AttnTempScale != 0 || c.RopeFreqFactors:
		return errors.New("gpt-oss reads no YaRN betas, log multiplier, attention temperature or rope_freqs (llama.cpp keeps its defaults)")
	case c.RopeDims != 0 && c.RopeDims != c.HeadDim:
		return fmt.Errorf("rope dims %d: gpt-oss rotates whole heads of %d", c.RopeDims, c.HeadDim)
	case c.SharedExperts != 0 || c.DenseLayers != 0 || c.NextNLayers != 0:
		return errors.New("gpt-oss has no shared experts, dense layers or next-token layers")
	}
	return nil
}

// pattern is the sliding-window pattern kinds follow (LayerKinds), or -1
// when they follow none.
func pattern(kinds []arch.LayerKind) int {
	if len(kinds) == 0 {
		return -1
	}
	for n := range len(kinds) + 1 {
		if slices.Equal(kinds, LayerKinds(len(kinds), n)) {
			return n
		}
	}
	return -1
}

// Metadata names the sliding-window pattern only when it is not
// llama.cpp's default for gpt-oss.
func (gptoss) Metadata(c arch.Config) []arch.KV {
	p := prefix
	kvs := append(arch.BaseMetadata(p, c), []arch.KV{
		{Key: p + "rope.freq_base", Value: c.RopeTheta},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: c.NormEps},
		{Key: p + "attention.sliding_window", Value: uint32(c.SlidingWindow)},
		{Key: p + "expert_count", Value: uint32(c.Experts)},
		{Key: p + "expert_used_count", Value: uint32(c.ExpertsUsed)},
		{Key: p + "expert_feed_forward_length", Value: uint32(c.ExpertFFN)},
	}...)
	kvs = append(kvs, arch.RopeScalingMetadata(p, c.RopeScaling)...)
	if n := pattern(c.LayerKinds); n >= 0 && n != defaultPattern {
		kvs = append(kvs, arch.KV{Key: p + "attention.sliding_window_pattern", Value: uint32(n)})
	}
	return kvs
}

// Tensors are llama.cpp's for LLM_ARCH_OPENAI_MOE, in its order.
func (gptoss) Tensors(c arch.Config) []arch.TensorSpec {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	s := []arch.TensorSpec{{Name: "token_embd.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true}}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		s = append(s,
			arch.TensorSpec{Name: p + "attn_norm.weight", Shape: []int{c.Dim}},
			arch.TensorSpec{Name: p + "post_attention_norm.weight", Shape: []int{c.Dim}},
			arch.TensorSpec{Name: p + "attn_q.weight", Shape: []int{c.Dim, q}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_k.weight", Shape: []int{c.Dim, kv}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_v.weight", Shape: []int{c.Dim, kv}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_q.bias", Shape: []int{q}},
			arch.TensorSpec{Name: p + "attn_k.bias", Shape: []int{kv}},
			arch.TensorSpec{Name: p + "attn_v.bias", Shape: []int{kv}},
			arch.TensorSpec{Name: p + "attn_output.weight", Shape: []int{q, c.Dim}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_output.bias", Shape: []int{c.Dim}},
			arch.TensorSpec{Name: p + "attn_sinks.weight", Shape: []int{c.Heads}},
			arch.TensorSpec{Name: p + "ffn_gate_inp.weight", Shape: []int{c.Dim, c.Experts}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_gate_inp.bias", Shape: []int{c.Experts}},
			arch.TensorSpec{Name: p + "ffn_gate_exps.weight", Shape: []int{c.Dim, c.ExpertFFN, c.Experts}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_gate_exps.bias", Shape: []int{c.ExpertFFN, c.Experts}},
			arch.TensorSpec{Name: p + "ffn_down_exps.weight", Shape: []int{c.ExpertFFN, c.Dim, c.Experts}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_down_exps.bias", Shape: []int{c.Dim, c.Experts}},
			arch.TensorSpec{Name: p + "ffn_up_exps.weight", Shape: []int{c.Dim, c.ExpertFFN, c.Experts}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_up_exps.bias", Shape: []int{c.ExpertFFN, c.Experts}},
		)
	}
	return append(s,
		arch.TensorSpec{Name: "output_norm.weight", Shape: []int{c.Dim}},
		arch.TensorSpec{Name: "output.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true},
	)
}
