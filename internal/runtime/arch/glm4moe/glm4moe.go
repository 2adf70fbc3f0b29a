// Package glm4moe is GLM-4.5's architecture (GLM-4.5-Air, GLM-4.5; GGUF
// "glm4moe"), as llama.cpp's glm4-moe graph runs it: pre-norm blocks of
// grouped-query attention with q/k/v biases, optional per-head q/k norms
// and RoPE over the first RopeDims dimensions of each head (NEOX pairs);
// after attention a post-attention norm, then a dense SwiGLU MLP in the
// DenseLayers leading layers and in the others a mixture of experts routed
// by sigmoid, its choice biased by exp_probs_b, plus shared experts. The
// multi-token-prediction (nextn) layers a file carries after its Layers
// are skipped, as llama.cpp skips them when it decodes.
package glm4moe

import (
	"errors"
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// GLM4MoE is the architecture.
var GLM4MoE arch.Architecture = glm4moe{}

type glm4moe struct{}

const prefix = "glm4moe."

func (glm4moe) Name() string { return "glm4moe" }

func (glm4moe) ReadConfig(file arch.File, c *arch.Config) error {
	p := prefix
	if err := arch.Read(file,
		arch.Uint(p+"embedding_length", &c.Dim),
		arch.Uint(p+"feed_forward_length", &c.FFN),
		arch.Uint(p+"attention.head_count", &c.Heads),
		arch.OptUint(p+"attention.head_count_kv", &c.KVHeads),
		arch.OptUint(p+"attention.key_length", &c.HeadDim),
		arch.Uint(p+"context_length", &c.ContextLen),
	); err != nil {
		return err
	}
	if err := arch.ReadSharedMoE(file, p, c); err != nil {
		return err
	}
	if c.ExpertGating == 0 {
		c.ExpertGating = arch.GatingSigmoid // llama.cpp's default, GLM-4.5's
	}
	if c.ExpertGroups > 1 {
		return fmt.Errorf("metadata %sexpert_group_count = %d: grouped expert selection is unsupported here (deepseek2 runs it)", p, c.ExpertGroups)
	}
	if err := arch.HeadDefaults(file, p, c); err != nil {
		return err
	}
	if v, ok, err := file.Uint(p + "rope.dimension_count"); err != nil {
		return err
	} else if ok && int(v) != c.HeadDim {
		if v == 0 || v%2 != 0 || int(v) > c.HeadDim {
			return fmt.Errorf("rope dimension count %d: want an even count up to the head dim %d", v, c.HeadDim)
		}
		c.RopeDims = int(v)
	}
	if _, ok, _ := file.String(p + "rope.dimension_sections"); ok {
		return errors.New("rope.dimension_sections (multimodal RoPE, GLM-4.5V) is unsupported")
	}
	if err := arch.ReadUnscaledRope(file, p, c); err != nil {
		return err
	}
	c.QKVBias = file.Shape("blk.0.attn_q.bias") != nil
	c.QKNorm = file.Shape("blk.0.attn_q_norm.weight") != nil
	return nil
}

// Validate: experts, at least one shared (llama.cpp's graph runs them
// unconditionally), and the leading dense layers among the layers.
func (glm4moe) Validate(c arch.Config) error {
	switch {
	case c.Experts == 0:
		return errors.New("glm4moe needs experts (expert_count, expert_used_count)")
	case c.SharedExperts == 0:
		return errors.New("glm4moe needs shared experts (expert_shared_count)")
	case c.RopeDims < 0 || c.RopeDims%2 != 0 || c.RopeDims > c.HeadDim:
		return fmt.Errorf("rope dims %d: want an even count up to the head dim %d", c.RopeDims, c.HeadDim)
	}
	return nil
}

func ropeDims(c arch.Config) int {
	if c.RopeDims > 0 {
		return c.RopeDims
	}
	return c.HeadDim
}

func (glm4moe) Metadata(c arch.Config) []arch.KV {
	p := prefix
	base := c
	base.Layers += c.NextNLayers // block_count counts the next-token layers
	kvs := append(arch.BaseMetadata(p, base), []arch.KV{
		{Key: p + "rope.dimension_count", Value: uint32(ropeDims(c))},
		{Key: p + "rope.freq_base", Value: c.RopeTheta},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: c.NormEps},
	}...)
	return append(kvs, arch.SharedMoEMetadata(p, c)...)
}

// Tensors are the decoding layers' (a file's nextn layers, blk.Layers… ,
// are neither listed nor loaded).
func (glm4moe) Tensors(c arch.Config) []arch.TensorSpec {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	shared := c.SharedExperts * c.ExpertFFN
	s := []arch.TensorSpec{{Name: "token_embd.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true}}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		s = append(s,
			arch.TensorSpec{Name: p + "attn_norm.weight", Shape: []int{c.Dim}},
			arch.TensorSpec{Name: p + "attn_q.weight", Shape: []int{c.Dim, q}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_k.weight", Shape: []int{c.Dim, kv}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_v.weight", Shape: []int{c.Dim, kv}, Matrix: true},
		)
		if c.QKVBias {
			s = append(s,
				arch.TensorSpec{Name: p + "attn_q.bias", Shape: []int{q}},
				arch.TensorSpec{Name: p + "attn_k.bias", Shape: []int{kv}},
				arch.TensorSpec{Name: p + "attn_v.bias", Shape: []int{kv}},
			)
		}
		s = append(s, arch.TensorSpec{Name: p + "attn_output.weight", Shape: []int{q, c.Dim}, Matrix: true})
		if c.QKNorm {
			s = append(s,
				arch.TensorSpec{Name: p + "attn_q_norm.weight", Shape: []int{c.HeadDim}},
				arch.TensorSpec{Name: p + "attn_k_norm.weight", Shape: []int{c.HeadDim}},
			)
		}
		s = append(s, arch.TensorSpec{Name: p + "post_attention_norm.weight", Shape: []int{c.Dim}})
		if i < c.DenseLayers {
			s = append(s,
				arch.TensorSpec{Name: p + "ffn_gate.weight", Shape: []int{c.Dim, c.FFN}, Matrix: true},
				arch.TensorSpec{Name: p + "ffn_down.weight", Shape: []int{c.FFN, c.Dim}, Matrix: true},
				arch.TensorSpec{Name: p + "ffn_up.weight", Shape: []int{c.Dim, c.FFN}, Matrix: true},
			)
			continue
		}
		s = append(s,
			arch.TensorSpec{Name: p + "ffn_gate_inp.weight", Shape: []int{c.Dim, c.Experts}, Matrix: true},
			arch.TensorSpec{Name: p + "exp_probs_b.bias", Shape: []int{c.Experts}},
			arch.TensorSpec{Name: p + "ffn_gate_exps.weight", Shape: []int{c.Dim, c.ExpertFFN, c.Experts}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_down_exps.weight", Shape: []int{c.ExpertFFN, c.Dim, c.Experts}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_up_exps.weight", Shape: []int{c.Dim, c.ExpertFFN, c.Experts}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_gate_shexp.weight", Shape: []int{c.Dim, shared}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_down_shexp.weight", Shape: []int{shared, c.Dim}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_up_shexp.weight", Shape: []int{c.Dim, shared}, Matrix: true},
		)
	}
	s = append(s, arch.TensorSpec{Name: "output_norm.weight", Shape: []int{c.Dim}})
	if !c.TiedEmbeddings {
		s = append(s, arch.TensorSpec{Name: "output.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true})
	}
	return s
}
