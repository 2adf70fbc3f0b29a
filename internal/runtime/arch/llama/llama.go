// Package llama is the llama family: llama, qwen2, qwen3, qwen3moe and
// mistral3, one forward pass (pre-norm blocks of grouped-query attention
// with RoPE and a SwiGLU MLP) with the variants' differences: qwen2's
// biases on the q, k and v projections and NEOX RoPE; qwen3's NEOX RoPE and
// RMS norms of each query and key head (attn_q_norm, attn_k_norm) before
// RoPE; qwen3moe's mixture-of-experts MLPs in place of qwen3's (moe.go);
// mistral3's YaRN keys and attention temperature. Every variant honours
// the file's RoPE scaling (linear, YaRN) as llama.cpp does.
package llama

import (
	"cmp"
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// The family's architectures.
var (
	Llama arch.Architecture = family{name: "llama", rope: arch.RopeNormal}
	Qwen2 arch.Architecture = family{name: "qwen2", rope: arch.RopeNeox}
	Qwen3 arch.Architecture = family{name: "qwen3", rope: arch.RopeNeox, qkNorm: true}
	// Mistral3 (Mistral Small 3.x, Devstral, Ministral 3) is llama's
	// graph with the YaRN parameters and attention temperature of its own
	// keys (see readMistral3).
	Mistral3 arch.Architecture = family{name: "mistral3", rope: arch.RopeNormal, mistral3: true}
)

// family is one variant: its GGUF name and RoPE mode (GGUF llama models'
// q and k weights are permuted at conversion for adjacent pairs), and
// whether each layer RMS-normalizes every query and key head by weights of
// HeadDim (qwen3). Whether q, k and v have biases is read from the file
// (Config.QKVBias).
type family struct {
	name   string
	rope   arch.RopeMode
	qkNorm bool
	// moe: every layer's MLP is a mixture of experts (moe.go).
	moe bool
	// mistral3 reads rope.scaling.yarn_* and attention.temperature_scale.
	mistral3 bool
}

func (f family) Name() string { return f.name }

func (f family) ReadConfig(file arch.File, c *arch.Config) error {
	p := f.name + "."
	if err := arch.Read(file,
		arch.Uint(p+"embedding_length", &c.Dim),
		arch.Uint(p+"block_count", &c.Layers),
		arch.Uint(p+"feed_forward_length", &c.FFN),
		arch.Uint(p+"attention.head_count", &c.Heads),
		arch.OptUint(p+"attention.head_count_kv", &c.KVHeads),
		arch.OptUint(p+"attention.key_length", &c.HeadDim),
		arch.Uint(p+"context_length", &c.ContextLen),
	); err != nil {
		return err
	}
	if err := arch.HeadDefaults(file, p, c); err != nil {
		return err
	}
	if v, ok, err := file.Uint(p + "rope.dimension_count"); err != nil {
		return err
	} else if ok && int(v) != c.HeadDim {
		return fmt.Errorf("partial rotary embeddings (%d of %d dimensions) are unsupported: %s rotates whole heads (llama.cpp's graph asserts it)", v, c.HeadDim, f.name)
	}
	c.RopeTheta, c.NormEps = 10000, 1e-5
	if err := arch.Read(file, arch.OptFloat(p+"rope.freq_base", &c.RopeTheta), arch.OptFloat(p+"attention.layer_norm_rms_epsilon", &c.NormEps)); err != nil {
		return err
	}
	if err := arch.ReadRopeScaling(file, p, &c.RopeScaling); err != nil {
		return err
	}
	if f.mistral3 {
		if err := readMistral3(file, p, c); err != nil {
			return err
		}
	}
	if err := arch.ReadVocab(file, c); err != nil {
		return err
	}
	c.QKVBias = file.Shape("blk.0.attn_q.bias") != nil
	if f.moe {
		if err := readMoE(file, p, c); err != nil {
			return err
		}
	}
	if s := file.Shape("rope_freqs.weight"); s != nil {
		if f.rope != arch.RopeNormal {
			// Of the family, llama.cpp loads the factors for llama and
			// mistral3 (adjacent-pair RoPE), not for qwen2 and qwen3 (NEOX):
			// what one in their files means is unclear, so it is refused
			// rather than applied or ignored.
			return fmt.Errorf("tensor rope_freqs.weight is unsupported (%s takes no RoPE frequency factors)", f.name)
		}
		if len(s) != 1 || s[0] != c.HeadDim/2 {
			return fmt.Errorf("tensor rope_freqs.weight has shape %v, want [%d] (half the head dim)", s, c.HeadDim/2)
		}
		c.RopeFreqFactors = true
	}
	// llama.cpp's llama and mistral3 graphs take optional output and MLP
	// biases and experts this forward pass does not run: a file with them
	// is refused rather than run without them.
	unsupported := []string{"attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias", "ffn_gate_inp.weight"}
	if f.moe {
		unsupported = []string{"attn_output.bias"} // experts are read by readMoE
	}
	for i := range c.Layers {
		for _, t := range unsupported {
			if name := fmt.Sprintf("blk.%d.%s", i, t); file.Shape(name) != nil {
				return fmt.Errorf("tensor %s is unsupported (%s runs no output or MLP biases and no experts)", name, f.name)
			}
		}
	}
	if f.qkNorm {
		// The loader checks every tensor's shape against Tensors; this
		// names the one a file of another variant lacks.
		for i := range c.Layers {
			for _, t := range []string{"attn_q_norm", "attn_k_norm"} {
				name := fmt.Sprintf("blk.%d.%s.weight", i, t)
				if s := file.Shape(name); s == nil {
					return fmt.Errorf("missing tensor %s (%s normalizes each query and key head)", name, f.name)
				} else if len(s) != 1 || s[0] != c.HeadDim {
					return fmt.Errorf("tensor %s has shape %v, want [%d] (the head dim)", name, s, c.HeadDim)
				}
			}
		}
	}
	return nil
}

func (f family) Metadata(c arch.Config) []arch.KV {
	p := f.name + "."
	kvs := append(arch.BaseMetadata(p, c), []arch.KV{
		{Key: p + "rope.dimension_count", Value: uint32(cmp.Or(c.RopeDims, c.HeadDim))},
		{Key: p + "rope.freq_base", Value: c.RopeTheta},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: c.NormEps},
	}...)
	kvs = append(kvs, arch.RopeScalingMetadata(p, c.RopeScaling)...)
	if f.moe {
		kvs = append(kvs, moeMetadata(p, c)...)
	}
	if f.mistral3 {
		kvs = append(kvs, mistral3Metadata(p, c)...)
	}
	return kvs
}

func (f family) Tensors(c arch.Config) []arch.TensorSpec {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	per := 9
	if c.QKVBias {
		per += 3
	}
	if f.qkNorm {
		per += 2
	}
	s := make([]arch.TensorSpec, 0, 4+per*c.Layers)
	s = append(s, arch.TensorSpec{Name: "token_embd.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true})
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		s = append(s,
			arch.TensorSpec{Name: p + "attn_norm.weight", Shape: []int{c.Dim}},
			arch.TensorSpec{Name: p + "attn_q.weight", Shape: []int{c.Dim, q}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_k.weight", Shape: []int{c.Dim, kv}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_v.weight", Shape: []int{c.Dim, kv}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_output.weight", Shape: []int{q, c.Dim}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_norm.weight", Shape: []int{c.Dim}},
		)
		if f.moe {
			s = append(s, moeTensors(p, c)...)
		} else {
			s = append(s,
				arch.TensorSpec{Name: p + "ffn_gate.weight", Shape: []int{c.Dim, c.FFN}, Matrix: true},
				arch.TensorSpec{Name: p + "ffn_up.weight", Shape: []int{c.Dim, c.FFN}, Matrix: true},
				arch.TensorSpec{Name: p + "ffn_down.weight", Shape: []int{c.FFN, c.Dim}, Matrix: true},
			)
		}
		if c.QKVBias {
			s = append(s,
				arch.TensorSpec{Name: p + "attn_q.bias", Shape: []int{q}},
				arch.TensorSpec{Name: p + "attn_k.bias", Shape: []int{kv}},
				arch.TensorSpec{Name: p + "attn_v.bias", Shape: []int{kv}},
			)
		}
		if f.qkNorm {
			s = append(s,
				arch.TensorSpec{Name: p + "attn_q_norm.weight", Shape: []int{c.HeadDim}},
				arch.TensorSpec{Name: p + "attn_k_norm.weight", Shape: []int{c.HeadDim}},
			)
		}
	}
	s = append(s, arch.TensorSpec{Name: "output_norm.weight", Shape: []int{c.Dim}})
	if !c.TiedEmbeddings {
		s = append(s, arch.TensorSpec{Name: "output.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true})
	}
	if c.RopeFreqFactors {
		// Last, so that a model drawn with them has the same other weights
		// as one drawn without.
		s = append(s, arch.TensorSpec{Name: "rope_freqs.weight", Shape: []int{cmp.Or(c.RopeDims, c.HeadDim) / 2}})
	}
	return s
}
