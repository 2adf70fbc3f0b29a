package qwen35

import (
	"fmt"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// Qwen35MoE is Qwen3.5's hybrid architecture with a mixture of experts in
// every layer (Qwen3.5-35B-A3B, Qwen3.6-35B-A3B; GGUF "qwen35moe"):
// qwen35's mixers, and as MLP ExpertsUsed of Experts SwiGLU experts
// routed by softmax, their weights renormalized to sum to one (and not
// scaled: llama.cpp reads no expert_weights_scale for it), plus a shared
// expert of FFN whose output is
// gated per token by sigmoid(ffn_gate_inp_shexp·x), as llama.cpp's
// qwen35moe graph runs it.
var Qwen35MoE arch.Architecture = moeArch{name: "qwen35moe"}

// moeArch is qwen35moe, or with next qwen3next (next.go): the same
// layers but for RoPE and the DeltaNet's inputs.
type moeArch struct {
	name string
	next bool
}

func (a moeArch) Name() string { return a.name }

func (a moeArch) ReadConfig(file arch.File, c *arch.Config) error {
	p := a.name + "."
	if err := readConfig(file, p, c, !a.next); err != nil {
		return err
	}
	if a.next {
		c.Recurrent.FusedQKVZ = fusedQKVZ(file, c.LayerKinds)
	}
	c.FusedGateUpExperts = arch.FusedGateUp(file, 0)
	if err := arch.Read(file,
		arch.Uint(p+"expert_count", &c.Experts),
		arch.Uint(p+"expert_used_count", &c.ExpertsUsed),
		arch.Uint(p+"expert_feed_forward_length", &c.ExpertFFN),
		arch.OptUint(p+"expert_shared_feed_forward_length", &c.FFN),
	); err != nil {
		return err
	}
	// llama.cpp reads no expert_weights_scale for qwen35moe and qwen3next:
	// a file's is not theirs.
	if w := file.Shape("blk.0.ffn_up_shexp.weight"); len(w) == 2 {
		c.FFN = w[1]
	}
	if c.FFN == 0 {
		return fmt.Errorf("metadata %sexpert_shared_feed_forward_length (the shared expert's width) is missing", p)
	}
	if v, ok, err := file.Uint(p + "expert_gating_func"); err != nil {
		return err
	} else if ok && v != 0 && arch.Gating(v) != arch.GatingSoftmax {
		return fmt.Errorf("metadata %sexpert_gating_func = %d is unsupported (%s routes by softmax, as llama.cpp does)", p, v, a.name)
	}
	c.ExpertGating, c.ExpertWeightsNorm = arch.GatingSoftmax, true
	return nil
}

func (a moeArch) Validate(c arch.Config) error {
	if c.Experts == 0 {
		return fmt.Errorf("%s needs experts (expert_count, expert_used_count)", a.name)
	}
	if c.ExpertWeightsScale != 0 && c.ExpertWeightsScale != 1 {
		return fmt.Errorf("%s scales no expert weights (llama.cpp reads no expert_weights_scale for it)", a.name)
	}
	return validate(c, !a.next)
}

func (a moeArch) Metadata(c arch.Config) []arch.KV {
	p := a.name + "."
	kvs := append(metadata(p, c), []arch.KV{
		{Key: p + "expert_count", Value: uint32(c.Experts)},
		{Key: p + "expert_used_count", Value: uint32(c.ExpertsUsed)},
		{Key: p + "expert_feed_forward_length", Value: uint32(c.ExpertFFN)},
		{Key: p + "expert_shared_feed_forward_length", Value: uint32(c.FFN)},
	}...)
	return kvs
}

func (a moeArch) Tensors(c arch.Config) []arch.TensorSpec {
	s := []arch.TensorSpec{{Name: "token_embd.weight", Shape: []int{c.Dim, c.VocabSize}, Matrix: true}}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		s = append(s, mixerTensors(c, i, p, a.next)...)
		s = append(s,
			arch.TensorSpec{Name: p + "ffn_gate_inp.weight", Shape: []int{c.Dim, c.Experts}, Matrix: true})
		s = append(s, arch.ExpertSpecs(c, p)...)
		s = append(s,
			// One gate logit per token: a row, kept F32.
			arch.TensorSpec{Name: p + "ffn_gate_inp_shexp.weight", Shape: []int{c.Dim}},
			arch.TensorSpec{Name: p + "ffn_gate_shexp.weight", Shape: []int{c.Dim, c.FFN}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_down_shexp.weight", Shape: []int{c.FFN, c.Dim}, Matrix: true},
			arch.TensorSpec{Name: p + "ffn_up_shexp.weight", Shape: []int{c.Dim, c.FFN}, Matrix: true},
		)
	}
	return append(s, outputTensors(c)...)
}

func (a moeArch) Bind(c arch.Config, weight func(name string) arch.Tensor) (arch.Forward, error) {
	fw := &forward{c: c, next: a.next, layers: make([]layer, c.Layers)}
	w := arch.NewBinder(weight)
	fw.tokEmbd, fw.outNorm, fw.head = w.Get("token_embd.weight"), w.Get("output_norm.weight"), w.Get("output.weight")
	for i := range fw.layers {
		l := &fw.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		bindMixer(c, w, l, i, p, a.next)
		l.gate, l.up, l.down = w.Get(p+"ffn_gate_shexp.weight"), w.Get(p+"ffn_up_shexp.weight"), w.Get(p+"ffn_down_shexp.weight")
		l.sharedGate = w.Get(p + "ffn_gate_inp_shexp.weight")
		l.moe = arch.BindMoE(c, w, p, 0)
		l.moe.Gating, l.moe.Norm = arch.GatingSoftmax, true // what ReadConfig reads
	}
	if err := w.Err(a.name); err != nil {
		return nil, err
	}
	return fw, nil
}
