package model

import (
	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/deepseek2"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/glm4moe"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/gptoss"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/llama"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/qwen35"
)

// The registry of architectures this build loads, one line per
// architecture (see docs/architectures.md). Every user of a model imports
// this package, so the registry is complete before the first Load.
func init() {
	arch.Register(
		llama.Llama,
		llama.Qwen2,
		llama.Qwen3,
		llama.Qwen3MoE,
		glm4moe.GLM4MoE,
		llama.Mistral3,
		gptoss.GptOss,
		qwen35.Qwen35,
		qwen35.Qwen35MoE,
		deepseek2.DeepSeek2,
		qwen35.Qwen3Next,
	)
}
