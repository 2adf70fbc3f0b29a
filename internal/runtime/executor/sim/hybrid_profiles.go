package sim

// hybridProfiles are the hybrid models agents run: three gated DeltaNet
// layers in four, one gated full-attention layer (full_attention_interval
// 4), from their Hugging Face configs (config.json, text_config for the
// Qwen3.6 checkpoints, which carry a vision encoder the profiles leave
// out), in BF16 as they ship; Qwen3-Coder-Next (80B) fits one device only
// as Qwen's FP8 checkpoint (qwen3-coder-next-fp8).
//
// Sources, as recorded in public material:
//   - Qwen3.6-27B: Qwen's model card as quoted by the Core AI conversion
//     card (huggingface.co/mlboydaisuke/Qwen3.6-27B-CoreAI) and
//     eadst.com/blog/325 (config.json): hidden_size 5120, 64 layers (48
//     DeltaNet + 16 attention), num_attention_heads 24,
//     num_key_value_heads 4, head_dim 256, intermediate_size 17408,
//     linear_num_key_heads 16, linear_num_value_heads 48, linear key and
//     value head dim 128, vocab 248320 untied; the kernel width 4 is the
//     Qwen3.5 family's (linear_conv_kernel_dim in every qwen3_5 config).
//   - Qwen3.6-35B-A3B: Qwen's model card (as submitted to
//     mera.a-ai.ru/en/industrial/submits/181, and chaobro.com's summary):
//     hidden 2048, 40 layers = 10 × (3 DeltaNet + 1 attention), 16 Q and
//     2 KV heads of 256, DeltaNet 16 QK and 32 V heads of 128, 256
//     experts, 8 routed + 1 shared, expert intermediate 512, vocab 248320;
//     config.json's num_experts 256, num_experts_per_tok 8,
//     shared_expert_intermediate_size 512 (radixark.com's Qwen3.6-MoE
//     recipe).
//   - Qwen3-Coder-Next: Qwen's model card (docker/model-runner's
//     ai/qwen3-coder-next-vllm.md): 80B total, 3B active, hidden 2048, 48
//     layers = 12 × (3 DeltaNet + 1 attention), 16 Q and 2 KV heads of
//     256, DeltaNet 16 QK and 32 V heads of 128, 512 experts, 10 routed + 1
//     shared; the qwen3_next config (transformers' Qwen3NextConfig
//     defaults, which are the 80B-A3B's): moe_intermediate_size 512,
//     shared_expert_intermediate_size 512, linear_conv_kernel_dim 4,
//     vocab 151936, max_position_embeddings 262144.
func hybridProfiles() []Geometry {
	linear := func(valueHeads int) linearShape {
		return linearShape{keyHeads: 16, valueHeads: valueHeads, keyDim: 128, valueDim: 128, kernel: 4}
	}
	dense27 := moeShape{name: "qwen3.6-27b", layers: 64, hidden: 5120, heads: 24, kvHeads: 4, head: 256,
		vocab: 248320, contextLen: 262144, denseLayers: 64, denseFFN: 17408,
		attnGate: true, interval: 4, linear: linear(48)}
	moe35 := moeShape{name: "qwen3.6-35b-a3b", layers: 40, hidden: 2048, heads: 16, kvHeads: 2, head: 256,
		vocab: 248320, contextLen: 262144, experts: 256, used: 8, shared: 1, expertFFN: 512,
		attnGate: true, interval: 4, linear: linear(32)}
	coderNext := moeShape{name: "qwen3-coder-next", layers: 48, hidden: 2048, heads: 16, kvHeads: 2, head: 256,
		vocab: 151936, contextLen: 262144, experts: 512, used: 10, shared: 1, expertFFN: 512,
		attnGate: true, interval: 4, linear: linear(32)}
	coderNextFP8 := coderNext.geometry().WithWeightBits(8, 0)
	coderNextFP8.Name = "qwen3-coder-next-fp8"
	return []Geometry{dense27.geometry(), moe35.geometry(), coderNext.geometry(), coderNextFP8}
}
