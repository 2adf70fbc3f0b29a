package chatformat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
)

// TestDetectTemplates reads every template of llama.cpp's models/templates
// and checks the formats detected against the markup each template
// renders for a call and for reasoning. "" is a format this package does
// not read (yet): such a template must not be taken for another one.
func TestDetectTemplates(t *testing.T) {
	dir := filepath.Join(llamacpp.Source(t), "models", "templates")
	want := map[string][2]string{
		"Apertus-8B-Instruct.jinja":                           {"", ""},
		"Apriel-1.6-15b-Thinker-fixed.jinja":                  {"", ""}, // <tool_calls>[…]
		"Bielik-11B-v3.0-Instruct.jinja":                      {"hermes", "think"},
		"ByteDance-Seed-OSS.jinja":                            {"", ""}, // <seed:tool_call>, <seed:think>
		"Cohere2MoE.jinja":                                    {"", ""},
		"CohereForAI-c4ai-command-r-plus-tool_use.jinja":      {"", ""},
		"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": {"", ""},
		"GLM-4.6.jinja":                                       {"glm45", "think"},
		"GLM-4.7-Flash.jinja":                                 {"glm45", "think"},
		"GigaChat3-10B-A1.8B.jinja":                           {"", ""},
		"GigaChat3.1-10B-A1.8B.jinja":                         {"", ""},
		"HuggingFaceTB-SmolLM3-3B.jinja":                      {"", "think"},
		"Kimi-K2-Instruct.jinja":                              {"kimi_k2", ""},
		"Kimi-K2-Thinking.jinja":                              {"kimi_k2", "think"},
		"Kimi-K3.jinja":                                       {"", ""},
		"LFM2-8B-A1B.jinja":                                   {"lfm2", ""},
		"LFM2.5-8B-A1B.jinja":                                 {"lfm2", "think"},
		"LFM2.5-Instruct.jinja":                               {"lfm2", ""},
		"MiMo-VL.jinja":                                       {"hermes", ""},
		"MiniMax-M1.jinja":                                    {"", ""},
		"MiniMax-M2.jinja":                                    {"minimax_m2", "think"},
		"MiniMax-M3.jinja":                                    {"", ""},
		"Mistral-Small-3.2-24B-Instruct-2506.jinja":           {"mistral_args", ""},
		"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja":           {"qwen3_coder", "think"},
		"NVIDIA-Nemotron-Nano-v2.jinja":                       {"", "think"},
		"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": {"hermes", ""},
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja":   {"hermes", ""},
		"Qwen-QwQ-32B.jinja":                                  {"hermes", "think"},
		"Qwen-Qwen2.5-7B-Instruct.jinja":                      {"hermes", ""},
		"Qwen-Qwen3-0.6B.jinja":                               {"hermes", "think"},
		"Qwen3-Coder.jinja":                                   {"qwen3_coder", ""},
		"Qwen3.5-4B.jinja":                                    {"qwen3_coder", "think"},
		"Reka-Edge.jinja":                                     {"hermes", "think"},
		"Spark2.5.jinja":                                      {"glm45", "think"},
		"StepFun3.5-Flash.jinja":                              {"qwen3_coder", "think"},
		"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja":      {"deepseek_r1", "think"},
		"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja":      {"deepseek_r1", "think"},
		"deepseek-ai-DeepSeek-V3.1.jinja":                     {"deepseek_v31", "think"},
		"deepseek-ai-DeepSeek-V3.2.jinja":                     {"", "think"},
		"deepseek-ai-DeepSeek-V4-Flash-0731.jinja":            {"", "think"},
		"deepseek-ai-DeepSeek-V4.jinja":                       {"", "think"},
		"fireworks-ai-llama-3-firefunction-v2.jinja":          {"", ""}, // functools[…]
		"google-gemma-2-2b-it.jinja":                          {"", ""},
		"google-gemma-4-31B-it-interleaved.jinja":             {"", ""},
		"google-gemma-4-31B-it.jinja":                         {"", ""},
		"ibm-granite-granite-3.3-2B-Instruct.jinja":           {"", "think"},
		"ibm-granite-granite-4.0.jinja":                       {"hermes", ""},
		"ibm-granite-granite-4.1.jinja":                       {"hermes", ""},
		"inclusionai-ling-3.0-flash.jinja":                    {"glm45", "think"},
		"llama-cpp-deepseek-r1.jinja":                         {"deepseek_r1", "think"},
		"llama-cpp-rwkv-world.jinja":                          {"", "think"},
		"meetkai-functionary-medium-v3.1.jinja":               {"", ""}, // <function=NAME>{…}</function>
		"meetkai-functionary-medium-v3.2.jinja":               {"", ""}, // >>>NAME\n{…}
		"meta-llama-Llama-3.1-8B-Instruct.jinja":              {"llama3_json", ""},
		"meta-llama-Llama-3.2-3B-Instruct.jinja":              {"llama3_json", ""},
		"meta-llama-Llama-3.3-70B-Instruct.jinja":             {"llama3_json", ""},
		"microsoft-Phi-3.5-mini-instruct.jinja":               {"", ""},
		"mistralai-Ministral-3-14B-Reasoning-2512.jinja":      {"mistral_args", ""}, // [THINK] not read
		"mistralai-Mistral-Nemo-Instruct-2407.jinja":          {"mistral", ""},
		"moonshotai-Kimi-K2.jinja":                            {"kimi_k2", ""},
		"muse-glimmer.jinja":                                  {"", ""},
		"openai-gpt-oss-120b.jinja":                           {"harmony", "harmony"},
		"openbmb-MiniCPM5-1B.jinja":                           {"", "think"},
		"poolside-Laguna-S-2.1.jinja":                         {"glm45", "think"},
		"poolside-Laguna-XS-2.1.jinja":                        {"glm45", "think"},
		"poolside-Laguna-XS.2.jinja":                          {"glm45", "think"},
		"tencent-Hy3.jinja":                                   {"", ""},
		"unsloth-Apriel-1.5.jinja":                            {"", ""}, // <tool_calls>[…]
		"unsloth-mistral-Devstral-Small-2507.jinja":           {"mistral_args", ""},
		"upstage-Solar-Open-100B.jinja":                       {"", ""},
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates in %s: %v", dir, err)
	}
	seen := 0
	for _, f := range files {
		name := filepath.Base(f)
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expected format listed (add it)", name)
			continue
		}
		seen++
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := Detect(string(src))
		if got.ToolsName() != w[0] || got.Reasoning != w[1] {
			t.Errorf("%s: detected tools %q, reasoning %q; want %q, %q", name, got.ToolsName(), got.Reasoning, w[0], w[1])
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d listed templates found in %s", seen, len(want), dir)
	}
}
