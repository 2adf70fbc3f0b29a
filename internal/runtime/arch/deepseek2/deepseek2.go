// Package deepseek2 is multi-head latent attention's architecture (GGUF
// "deepseek2": DeepSeek-V2, V2-Lite, V3, Kimi-K2, GLM-4.7-Flash), as
// llama.cpp's deepseek2 graph runs a file converted with its MLA keys:
// pre-norm blocks whose queries come from a low-rank projection
// (attn_q_a, attn_q_a_norm, attn_q_b; V2-Lite: attn_q) and whose keys and
// values come from one compressed latent per token (attn_kv_a_mqa,
// attn_kv_a_norm) plus a rotated key part every head shares; attention
// runs over the latent itself, each head's query absorbed through attn_k_b
// and its output decompressed through attn_v_b, so the KV cache keeps the
// latent (HeadDim = kv_lora_rank + rope dims, one KV head). Then a dense
// SwiGLU MLP in the leading_dense_block_count first layers and in the
// others a mixture of experts (softmax or sigmoid routing, an optional
// selection bias, normalized and scaled weights) plus shared experts.
// RoPE rotates adjacent pairs (llama.cpp's NORM mode) and may be YaRN, with
// deepseek2's reading of yarn_log_multiplier and its pre-scaled kq_scale.
// The multi-token-prediction layers a file carries after its Layers are
// skipped, as llama.cpp skips them when it decodes.
package deepseek2

import (
	"errors"
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// DeepSeek2 is the architecture.
var DeepSeek2 arch.Architecture = deepseek2{}

type deepseek2 struct{}

const prefix = "deepseek2."

func (deepseek2) Name() string { return "deepseek2" }

func (deepseek2) ReadConfig(file arch.File, c *arch.Config) error {
	p := prefix
	var valueLen int
	if err := arch.Read(file,
		arch.Uint(p+"embedding_length", &c.Dim),
		arch.Uint(p+"feed_forward_length", &c.FFN),
		arch.Uint(p+"attention.head_count", &c.Heads),
		arch.OptUint(p+"attention.head_count_kv", &c.KVHeads),
		arch.Uint(p+"attention.key_length", &c.HeadDim),
		arch.Uint(p+"attention.value_length", &valueLen),
		arch.Uint(p+"context_length", &c.ContextLen),
		arch.OptUint(p+"attention.q_lora_rank", &c.MLA.QRank),
		arch.Uint(p+"attention.kv_lora_rank", &c.MLA.KVRank),
		arch.OptUint(p+"attention.key_length_mla", &c.MLA.KeyLength),
		arch.OptUint(p+"attention.value_length_mla", &c.MLA.ValueLength),
		arch.Uint(p+"rope.dimension_count", &c.RopeDims),
	); err != nil {
		return err
	}
	if err := arch.ReadSharedMoE(file, p, c); err != nil {
		return err
	}
	if err := arch.ValidGroups(*c); err != nil {
		return err
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads // llama.cpp's default
	}
	m := c.MLA
	switch {
	case m.KeyLength == 0 || m.ValueLength == 0:
		return errors.New("deepseek2 without attention.key_length_mla and value_length_mla (an older conversion with attn_kv_b, attention without the latent cache) is unsupported: convert the model again with a current llama.cpp")
	case c.KVHeads != 1:
		return fmt.Errorf("attention.head_count_kv %d: a deepseek2 file with MLA has 1 (the latent)", c.KVHeads)
	case c.HeadDim != m.KVRank+c.RopeDims:
		return fmt.Errorf("attention.key_length %d: want kv_lora_rank %d + rope dimension count %d, the latent's width", c.HeadDim, m.KVRank, c.RopeDims)
	case valueLen != m.KVRank:
		return fmt.Errorf("attention.value_length %d: want kv_lora_rank %d", valueLen, m.KVRank)
	}
	if _, ok, _ := file.String(p + "rope.dimension_sections"); ok {
		return errors.New("rope.dimension_sections (multimodal RoPE) is unsupported")
	}
	if err := arch.ReadRopeScaling(file, p, &c.RopeScaling); err != nil {
		return err
	}
	c.RopeTheta = 10000
	if err := arch.Read(file,
		arch.OptFloat(p+"rope.freq_base", &c.RopeTheta),
		arch.Float(p+"attention.layer_norm_rms_epsilon", &c.NormEps),
		arch.OptFloat(p+"rope.scaling.yarn_log_multiplier", &c.RopeScaling.YarnLogMul),
	); err != nil {
		return err
	}
	if v, ok, err := file.Float(p + "attention.temperature_scale"); err != nil {
		return err
	} else if ok && v != 0 {
		return fmt.Errorf("metadata %sattention.temperature_scale = %g (attention temperature tuning) is unsupported", p, v)
	}
	if err := arch.ReadVocab(file, c); err != nil {
		return err
	}
	if c.ExpertGating == 0 {
		c.ExpertGating = defaultGating(*c)
	}
	if c.DenseLayers < c.Layers {
		c.ExpertSelectionBias = file.Shape(fmt.Sprintf("blk.%d.exp_probs_b.bias", c.DenseLayers)) != nil
		c.FusedGateUpExperts = arch.FusedGateUp(file, c.DenseLayers)
	}
	switch qa := file.Shape("blk.0.attn_q_a.weight") != nil; {
	case qa && c.MLA.QRank == 0:
		return errors.New("attention.q_lora_rank 0 but the file has attn_q_a")
	case !qa && c.MLA.QRank > 0:
		return fmt.Errorf("attention.q_lora_rank %d but the file has no attn_q_a", c.MLA.QRank)
	}
	return nil
}

// defaultGating is llama.cpp's gating for a file without
// expert_gating_func: softmax (DeepSeek-V2's), but sigmoid in
// GLM-4.7-Flash's shape (47 layers and a vocabulary of 154,880).
func defaultGating(c arch.Config) arch.Gating {
	if (c.Layers == 47 || c.Layers == 48) && c.VocabSize == 154880 {
		return arch.GatingSigmoid
	}
	return arch.GatingSoftmax
}

// Validate: MLA's geometry (the latent cache of one head, its width the
// latent's and the rotated part's), experts with shared ones (llama.cpp's
// graph runs them unconditionally).
func (deepseek2) Validate(c arch.Config) error {
	m := c.MLA
	switch {
	case m.KVRank <= 0 || m.QRank < 0:
		return fmt.Errorf("kv_lora_rank %d, q_lora_rank %d: want a positive kv rank and a q rank of 0 or more", m.KVRank, m.QRank)
	case c.RopeDims <= 0 || m.KeyLength <= c.RopeDims || m.ValueLength <= 0:
		return fmt.Errorf("rope dims %d, key length %d, value length %d: want 0 < rope dims < key length and a positive value length", c.RopeDims, m.KeyLength, m.ValueLength)
	case c.KVHeads != 1 || c.HeadDim != m.KVRank+c.RopeDims:
		return fmt.Errorf("kv heads %d, head dim %d: MLA caches one latent of kv_lora_rank + rope dims = %d", c.KVHeads, c.HeadDim, m.KVRank+c.RopeDims)
	case c.Experts == 0:
		return errors.New("deepseek2 needs experts (expert_count, expert_used_count)")
	case c.SharedExperts == 0:
		return errors.New("deepseek2 needs shared experts (expert_shared_count)")
	}
	return arch.ValidGroups(c)
}

func (deepseek2) Metadata(c arch.Config) []arch.KV {
	p := prefix
	base := c
	base.Layers += c.NextNLayers // block_count counts the next-token layers
	kvs := arch.BaseMetadata(p, base)
	for i := range kvs {
		if kvs[i].Key == p+"attention.value_length" {
			kvs[i].Value = uint32(c.MLA.KVRank) // the latent's values
		}
	}
	kvs = append(kvs, []arch.KV{
		{Key: p + "attention.q_lora_rank", Value: uint32(c.MLA.QRank)},
		{Key: p + "attention.kv_lora_rank", Value: uint32(c.MLA.KVRank)},
		{Key: p + "attention.key_length_mla", Value: uint32(c.MLA.KeyLength)},
		{Key: p + "attention.value_length_mla", Value: uint32(c.MLA.ValueLength)},
		{Key: p + "rope.dimension_count", Value: uint32(c.RopeDims)},
		{Key: p + "rope.freq_base", Value: c.RopeTheta},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: c.NormEps},
	}...)
	kvs = append(kvs, arch.SharedMoEMetadata(p, c)...)
	kvs = append(kvs, arch.RopeScalingMetadata(p, c.RopeScaling)...)
	if c.RopeScaling.YarnLogMul != 0 {
		kvs = append(kvs, arch.KV{Key: p + "rope.scaling.yarn_log_multiplier", Value: c.RopeScaling.YarnLogMul})
	}
	return kvs
}

// Tensors are the decoding layers' (a file's nextn layers, blk.Layers… ,
// are neither listed nor loaded).
func (deepseek2) Tensors(c arch.Config) []arch.TensorSpec {
	m := c.MLA
	nope, q := m.KeyLength-c.RopeDims, c.Heads*m.KeyLength
	shared := c.SharedExperts * c.ExpertFFN
	mat := func(name string, shape ...int) arch.TensorSpec {
		return arch.TensorSpec{Name: name, Shape: shape, Matrix: true}
	}
	vec := func(name string, n int) arch.TensorSpec { return arch.TensorSpec{Name: name, Shape: []int{n}} }
	s := []arch.TensorSpec{mat("token_embd.weight", c.Dim, c.VocabSize)}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		s = append(s, vec(p+"attn_norm.weight", c.Dim))
		if m.QRank > 0 {
			s = append(s, mat(p+"attn_q_a.weight", c.Dim, m.QRank), vec(p+"attn_q_a_norm.weight", m.QRank), mat(p+"attn_q_b.weight", m.QRank, q))
		} else {
			s = append(s, mat(p+"attn_q.weight", c.Dim, q))
		}
		s = append(s,
			mat(p+"attn_kv_a_mqa.weight", c.Dim, m.KVRank+c.RopeDims),
			vec(p+"attn_kv_a_norm.weight", m.KVRank),
			mat(p+"attn_k_b.weight", nope, m.KVRank, c.Heads),
			mat(p+"attn_v_b.weight", m.KVRank, m.ValueLength, c.Heads),
			mat(p+"attn_output.weight", c.Heads*m.ValueLength, c.Dim),
			vec(p+"ffn_norm.weight", c.Dim),
		)
		if i < c.DenseLayers {
			s = append(s, mat(p+"ffn_gate.weight", c.Dim, c.FFN), mat(p+"ffn_down.weight", c.FFN, c.Dim), mat(p+"ffn_up.weight", c.Dim, c.FFN))
			continue
		}
		s = append(s, mat(p+"ffn_gate_inp.weight", c.Dim, c.Experts))
		if c.ExpertSelectionBias {
			s = append(s, vec(p+"exp_probs_b.bias", c.Experts))
		}
		s = append(s, arch.ExpertSpecs(c, p)...)
		s = append(s,
			mat(p+"ffn_gate_shexp.weight", c.Dim, shared),
			mat(p+"ffn_down_shexp.weight", shared, c.Dim),
			mat(p+"ffn_up_shexp.weight", c.Dim, shared),
		)
	}
	s = append(s, vec("output_norm.weight", c.Dim))
	if !c.TiedEmbeddings {
		s = append(s, mat("output.weight", c.Dim, c.VocabSize))
	}
	return s
}
