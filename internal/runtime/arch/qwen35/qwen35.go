// Package qwen35 is Qwen3.5's hybrid architecture (Qwen3.5 and Qwen3.6,
// GGUF "qwen35"), as llama.cpp's qwen35 graph runs it: pre-norm blocks
// whose mixer is, in three layers of four (full_attention_interval), a
// gated DeltaNet — linear attention over a fixed-size state per sequence
// after a short causal convolution, its output RMS-normed and gated by
// SiLU — and in the fourth gated attention: grouped-query attention with
// per-head q/k norms, M-RoPE over part of each head (interleaved
// sections, every section at the token's position for text) and a
// sigmoid gate the query projection also produces. A post-attention norm
// then precedes a SwiGLU MLP. The multi-token-prediction layers a file
// carries after its Layers are skipped, as llama.cpp skips them when it
// decodes.
package qwen35

import (
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// Qwen35 is the architecture.
var Qwen35 arch.Architecture = qwen35{}

type qwen35 struct{}

const prefix = "qwen35."

// ropeIMRoPE is ggml's interleaved multimodal RoPE (GGML_ROPE_TYPE_IMROPE),
// llama.cpp's rope type for qwen35.
const ropeIMRoPE arch.RopeMode = 40

// defaultInterval is llama.cpp's full_attention_interval when a file has
// none: every fourth layer attends.
const defaultInterval = 4

func (qwen35) Name() string { return "qwen35" }

func (qwen35) ReadConfig(file arch.File, c *arch.Config) error {
	return readConfig(file, prefix, c, true)
}

// readConfig reads what qwen35, qwen35moe and qwen3next share (keys
// under p), and with mrope M-RoPE's sections, which qwen3next's RoPE has
// none of.
func readConfig(file arch.File, p string, c *arch.Config, mrope bool) error {
	var blocks, interval int
	g := &c.Recurrent
	interval = defaultInterval
	if err := arch.Read(file,
		arch.Uint(p+"embedding_length", &c.Dim),
		arch.Uint(p+"block_count", &blocks),
		arch.Uint(p+"attention.head_count", &c.Heads),
		arch.OptUint(p+"attention.head_count_kv", &c.KVHeads),
		arch.OptUint(p+"attention.key_length", &c.HeadDim),
		arch.Uint(p+"context_length", &c.ContextLen),
		arch.Uint(p+"rope.dimension_count", &c.RopeDims),
		arch.Uint(p+"ssm.conv_kernel", &g.ConvKernel),
		arch.Uint(p+"ssm.inner_size", &g.Inner),
		arch.Uint(p+"ssm.state_size", &g.StateSize),
		arch.Uint(p+"ssm.time_step_rank", &g.ValueHeads),
		arch.Uint(p+"ssm.group_count", &g.KeyHeads),
		arch.OptUint(p+"full_attention_interval", &interval),
		arch.OptUint(p+"nextn_predict_layers", &c.NextNLayers),
	); err != nil {
		return err
	}
	if c.NextNLayers >= blocks {
		return fmt.Errorf("%d next-token prediction layers of %d blocks leave none to decode with", c.NextNLayers, blocks)
	}
	c.Layers = blocks - c.NextNLayers
	if err := arch.HeadDefaults(file, p, c); err != nil {
		return err
	}
	// The layers' kinds: attention.recurrent_layers when the file has it
	// (converters write it from the model's layer_types), else every
	// full_attention_interval-th layer attends, as llama.cpp reads them.
	recr, ok, err := file.Bools(p + "attention.recurrent_layers")
	switch {
	case err != nil:
		return err
	case ok:
		if len(recr) < c.Layers {
			return fmt.Errorf("metadata %sattention.recurrent_layers has %d entries for %d layers", p, len(recr), c.Layers)
		}
		c.LayerKinds = make([]arch.LayerKind, c.Layers)
		for i := range c.LayerKinds {
			if recr[i] {
				c.LayerKinds[i] = arch.Recurrent
			}
		}
	case interval < 1:
		return fmt.Errorf("full_attention_interval %d must be positive", interval)
	default:
		c.LayerKinds = LayerKinds(c.Layers, interval)
	}
	if mrope {
		secs, ok, err := file.Ints(p + "rope.dimension_sections")
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("metadata %srope.dimension_sections is required", p)
		case len(secs) > 4:
			return fmt.Errorf("metadata %srope.dimension_sections has %d sections, want at most 4", p, len(secs))
		}
		copy(c.RopeSections[:], secs)
	}
	if err := arch.ReadUnscaledRope(file, p, c); err != nil {
		return err
	}
	if w := file.Shape("blk.0.ffn_up.weight"); len(w) == 2 {
		c.FFN = w[1]
	}
	return arch.Read(file, arch.OptUint(p+"feed_forward_length", &c.FFN))
}

// LayerKinds is llama.cpp's qwen35 pattern: layer i attends when
// (i+1) is a multiple of interval, and is recurrent otherwise.
func LayerKinds(layers, interval int) []arch.LayerKind {
	kinds := make([]arch.LayerKind, layers)
	for i := range kinds {
		if (i+1)%interval != 0 {
			kinds[i] = arch.Recurrent
		}
	}
	return kinds
}

// recurrentOrFull: kinds has a kind for every layer, each Recurrent or
// Full.
func recurrentOrFull(kinds []arch.LayerKind) bool {
	for _, k := range kinds {
		if k != arch.Recurrent && k != arch.Full {
			return false
		}
	}
	return len(kinds) > 0
}

// interval is the pattern kinds follow (LayerKinds), or -1.
func interval(kinds []arch.LayerKind) int {
	for n := 1; n <= len(kinds); n++ {
		ok := true
		for i, k := range kinds {
			if (k == arch.Recurrent) != ((i+1)%n != 0) {
				ok = false
				break
			}
		}
		if ok {
			return n
		}
	}
	return -1
}

// Validate: the layer pattern, M-RoPE's sections within the rotated
// pairs, and no mixture of experts (qwen35moe's).
func (qwen35) Validate(c arch.Config) error { return validate(c, true) }

// validate checks what the package's architectures share, with mrope
// M-RoPE's sections (their presence) and without it their absence.
func validate(c arch.Config, mrope bool) error {
	pairs := 0
	for _, s := range c.RopeSections {
		pairs += s
	}
	switch {
	case !recurrentOrFull(c.LayerKinds):
		return fmt.Errorf("%s needs its layer kinds: recurrent layers and attending ones (LayerKinds)", c.Arch)
	case c.RopeDims <= 0 || c.RopeDims%2 != 0 || c.RopeDims > c.HeadDim:
		return fmt.Errorf("rope dims %d: want an even count up to the head dim %d", c.RopeDims, c.HeadDim)
	case mrope && pairs == 0:
		return fmt.Errorf("%s needs M-RoPE sections (rope.dimension_sections)", c.Arch)
	case !mrope && pairs != 0:
		return fmt.Errorf("%s rotates by NEOX RoPE: M-RoPE sections %v are not its", c.Arch, c.RopeSections)
	case c.KVHeads*c.HeadDim == 0:
		return fmt.Errorf("%s: no key/value heads", c.Arch)
	case mrope && c.Recurrent.FusedQKVZ:
		return fmt.Errorf("%s has no fused ssm_in projection (qwen3next's older files have)", c.Arch)
	}
	return nil
}

func metadata(p string, c arch.Config) []arch.KV {
	base := c
	base.Layers += c.NextNLayers
	g := c.Recurrent
	kvs := append(arch.BaseMetadata(p, base), arch.KV{Key: p + "rope.dimension_count", Value: uint32(c.RopeDims)})
	if c.RopeSections != [4]int{} {
		secs := make([]int32, 4)
		for i, s := range c.RopeSections {
			secs[i] = int32(s)
		}
		kvs = append(kvs, arch.KV{Key: p + "rope.dimension_sections", Value: secs})
	}
	kvs = append(kvs, []arch.KV{
		{Key: p + "rope.freq_base", Value: c.RopeTheta},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: c.NormEps},
		{Key: p + "ssm.conv_kernel", Value: uint32(g.ConvKernel)},
		{Key: p + "ssm.state_size", Value: uint32(g.StateSize)},
		{Key: p + "ssm.group_count", Value: uint32(g.KeyHeads)},
		{Key: p + "ssm.time_step_rank", Value: uint32(g.ValueHeads)},
		{Key: p + "ssm.inner_size", Value: uint32(g.Inner)},
	}...)
	if n := interval(c.LayerKinds); n > 0 {
		kvs = append(kvs, arch.KV{Key: p + "full_attention_interval", Value: uint32(n)})
	} else {
		// Another pattern: llama.cpp's explicit one, the MTP layers none.
		recr := make([]bool, c.Layers+c.NextNLayers)
		for i, k := range c.LayerKinds {
			recr[i] = k == arch.Recurrent
		}
		kvs = append(kvs, arch.KV{Key: p + "attention.recurrent_layers", Value: recr})
	}
	if c.NextNLayers > 0 {
		kvs = append(kvs, arch.KV{Key: p + "nextn_predict_layers", Value: uint32(c.NextNLayers)})
	}
	return kvs
}

func (qwen35) Metadata(c arch.Config) []arch.KV { return metadata(prefix, c) }

// mixerTensors are layer i's (prefix p) norms and mixer: gated
// attention's in an attending layer, the DeltaNet's in a recurrent one,
// whose beta and alpha projections are one, ssm_ba, in qwen3next (next).
func mixerTensors(c arch.Config, i int, p string, next bool) []arch.TensorSpec {
	s := []arch.TensorSpec{
		{Name: p + "attn_norm.weight", Shape: []int{c.Dim}},
		{Name: p + "post_attention_norm.weight", Shape: []int{c.Dim}},
	}
	if c.LayerKinds[i] != arch.Recurrent {
		q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
		return append(s,
			arch.TensorSpec{Name: p + "attn_q.weight", Shape: []int{c.Dim, 2 * q}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_k.weight", Shape: []int{c.Dim, kv}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_v.weight", Shape: []int{c.Dim, kv}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_output.weight", Shape: []int{q, c.Dim}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_q_norm.weight", Shape: []int{c.HeadDim}},
			arch.TensorSpec{Name: p + "attn_k_norm.weight", Shape: []int{c.HeadDim}},
		)
	}
	g := c.Recurrent
	if g.FusedQKVZ {
		s = append(s, arch.TensorSpec{Name: p + "ssm_in.weight", Shape: []int{c.Dim, g.ConvChannels() + g.Inner}, Matrix: true})
	} else {
		s = append(s,
			arch.TensorSpec{Name: p + "attn_qkv.weight", Shape: []int{c.Dim, g.ConvChannels()}, Matrix: true},
			arch.TensorSpec{Name: p + "attn_gate.weight", Shape: []int{c.Dim, g.Inner}, Matrix: true},
		)
	}
	s = append(s,
		// The convolution's kernel stays F32: ggml's ssm_conv takes no other.
		arch.TensorSpec{Name: p + "ssm_conv1d.weight", Shape: []int{g.ConvKernel, g.ConvChannels()}},
		arch.TensorSpec{Name: p + "ssm_dt.bias", Shape: []int{g.ValueHeads}},
		arch.TensorSpec{Name: p + "ssm_a", Shape: []int{g.ValueHeads}},
	)
	if next {
		s = append(s, arch.TensorSpec{Name: p + "ssm_ba.weight", Shape: []int{c.Dim, 2 * g.ValueHeads}, Matrix: true})
	} else {
		s = append(s,
			arch.TensorSpec{Name: p + "ssm_beta.weight", Shape: []int{c.Dim, g.ValueHeads}, Matrix: true},
			arch.TensorSpec{Name: p + "ssm_alpha.weight", Shape: []int{c.Dim, g.ValueHeads}, Matrix: true},
		)
	}
	return append(s,
		arch.TensorSpec{Name: p + "ssm_norm.weight", Shape: []int{g.StateSize}},
		arch.TensorSpec{Name: p + "ssm_out.weight", Shape: []int{g.Inner, c.Dim}, Matrix: true},
	)
}

// Tensors are the decoding layers' (a file's nextn layers are neither
// listed nor loaded).
func (qwen35) Tensors(c arch.Config) []arch.TensorSpec {
	s := []arch.TensorSpec{{Name: "token_embd.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true}}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		s = append(s, mixerTensors(c, i, p, false)...)
		s = append(s,
			arch.TensorSpec{Name: p + "ffn_gate.weight", Shape: []int{c.Dim, c.FFN}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_down.weight", Shape: []int{c.FFN, c.Dim}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_up.weight", Shape: []int{c.Dim, c.FFN}, Matrix: true},
		)
	}
	return append(s, outputTensors(c)...)
}

func outputTensors(c arch.Config) []arch.TensorSpec {
	s := []arch.TensorSpec{{Name: "output_norm.weight", Shape: []int{c.Dim}}}
	if !c.TiedEmbeddings {
		s = append(s, arch.TensorSpec{Name: "output.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true})
	}
	return s
}
