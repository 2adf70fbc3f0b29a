package ggml

import (
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// KVGeometry is the KV cache the executor keeps for m with cache type d
// (in the layers that attend: a hybrid model's recurrent layers keep
// states instead, Config.StateBytes a sequence):
// d itself, or for auto the model's activation type, as vLLM's "auto"
// takes the model's dtype. A GGUF file does not record the type its
// model was trained in, so auto reads it from the weights: f32 for an F32
// model, bf16 for BF16 weights, else (F16 and quantized weights) f16, which
// is llama.cpp's default cache type. kvcache sizes it. A multi-head latent
// attention model's (deepseek2) keeps its latents as keys and no values
// (graph_mla.go).
func KVGeometry(m *model.Model, d kvcache.DType) kvcache.Geometry {
	c := m.Config
	return kvcache.Geometry{Layers: c.KVLayers(), KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: d.ResolveAuto(autoKVType(m)),
		KeysOnly: c.MLA.KVRank > 0}
}

func autoKVType(m *model.Model) kvcache.DType {
	if ms := matrices(&m.Weights); len(ms) > 0 {
		switch ms[0].Type {
		case model.F32:
			return kvcache.DTypeF32
		case model.BF16:
			return kvcache.DTypeBF16
		}
	}
	return kvcache.DTypeF16
}
