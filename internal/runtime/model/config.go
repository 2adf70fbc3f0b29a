package model

import "github.com/kvpilot/kvpilot/internal/runtime/arch"

// The llama family's architectures, as GGUF names them in
// general.architecture (architectures.go registers every one).
const (
	ArchLlama = "llama"
	ArchQwen2 = "qwen2"
	ArchQwen3 = "qwen3"
	// ArchQwen3MoE is qwen3 with mixture-of-experts MLPs.
	ArchQwen3MoE = "qwen3moe"
	// ArchGLM4MoE is GLM-4.5's (arch/glm4moe).
	ArchGLM4MoE = "glm4moe"
	// ArchGptOss is OpenAI's gpt-oss (arch/gptoss).
	ArchGptOss = "gpt-oss"
	// ArchDeepSeek2 is multi-head latent attention's (arch/deepseek2).
	ArchDeepSeek2 = "deepseek2"
)

// Config is a model's geometry and hyperparameters (see arch.Config).
type Config = arch.Config
