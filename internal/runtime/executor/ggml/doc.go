// Package ggml is an executor that runs GGUF models of every registered
// architecture (internal/runtime/arch: llama, qwen2, qwen3, mistral3, and
// the mixtures of experts qwen3moe, glm4moe, gpt-oss and deepseek2, the
// last with multi-head latent attention) with ggml's
// kernels (CPU and
// CUDA), loaded at run time from ggml's shared libraries with
// purego: no cgo, and a binary that starts without them.
//
// Go builds the model's compute graph each iteration, for every scheduled
// sequence's prefill chunk and decode token together: the architecture's
// forward pass (arch.Forward) over graphOps, ggml's operations and the
// executor's paged attention. The executor owns the KV cache:
// per layer, a key tensor of one row per slot and a value tensor stored
// transposed, laid out by the engine's blocks (slot = block×blockSize +
// offset). New keys and values are written into their slots with
// ggml_set_rows; attention reads the cache in place over the slot range the
// batch's blocks reach, with a mask that lets each token see exactly its own
// sequence's earlier slots. Blocks shared through the prefix cache are
// therefore read by every sequence that holds them, without a copy.
//
// Weights keep their GGUF type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K, MXFP4) in device buffers. The libraries come from hack/setup-ggml.sh.
package ggml
