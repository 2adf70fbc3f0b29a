// Package arch is the seam between the runtime and model architectures (GGUF
// general.architecture): an Architecture reads its hyperparameters from the
// file's metadata, lists the tensors it needs, and describes its forward pass
// once over the tensor operations an executor offers (Ops), paged attention
// included. Each family is a package below this one (llama: llama, qwen2,
// qwen3 and qwen3moe; glm4moe; gptoss: gpt-oss; deepseek2); the registry maps names
// to them. A
// mixture-of-experts MLP is described once, here (MoE, over MoEOps); multi-head latent
// attention's operations are MLAOps. See
// docs/architectures.md.
package arch
