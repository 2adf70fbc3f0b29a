package sim

import "github.com/kvpilot/kvpilot/internal/runtime/arch"

// moeShape is a mixture-of-experts model's published configuration, from
// which its Geometry's parameter counts are computed (the profiles test
// checks them against the published totals).
type moeShape struct {
	name                                 string
	layers, hidden, heads, kvHeads, head int
	vocab, contextLen                    int
	// denseLayers lead with a dense FFN of denseFFN (first_k_dense_replace).
	denseLayers, denseFFN int
	// experts routed, used per token, shared; expertFFN is one expert's
	// intermediate size (moe_intermediate_size).
	experts, used, shared, expertFFN int
	// qLoRARank, kvLoRARank, ropeDim, nopeDim and vDim shape MLA
	// attention (kvLoRARank 0: grouped-query attention).
	qLoRARank, kvLoRARank, ropeDim, nopeDim, vDim int
	// slidingLayers attend over a window of window positions.
	slidingLayers, window int
	// expertBits is the routed experts' storage (0: BF16 as the rest).
	expertBits float64
	// attnBias, expertBias: gpt-oss and GLM carry biases (small, counted
	// for the totals to match).
	qkvBias, oBias, expertBias, sinks bool
	// attnGate: the attention's output is gated by a sigmoid of a second
	// query-sized projection (attn_output_gate: Qwen3.5/3.6, Qwen3-Next),
	// which doubles q_proj.
	attnGate bool
	// interval, when set, makes every interval-th layer attend and the
	// others gated DeltaNet layers shaped by linear
	// (full_attention_interval).
	interval int
	linear   linearShape
}

// linearShape is a gated DeltaNet layer's configuration: key and value
// heads and widths (linear_num_key_heads, linear_num_value_heads,
// linear_key_head_dim, linear_value_head_dim) and the short convolution's
// width (linear_conv_kernel_dim).
type linearShape struct {
	keyHeads, valueHeads, keyDim, valueDim, kernel int
}

// recurrentLayers is the number of gated DeltaNet layers.
func (s moeShape) recurrentLayers() int {
	if s.interval <= 0 {
		return 0
	}
	return s.layers - s.layers/s.interval
}

// deltaNetParams is one gated DeltaNet layer's parameters: the fused
// q/k/v/z projection, the β and α projections (one each per value head),
// the depthwise convolution over q, k and v, the decay's A and dt bias,
// the gated output norm and the output projection.
func (s moeShape) deltaNetParams() int64 {
	h, l := int64(s.hidden), s.linear
	keys, values := int64(l.keyHeads*l.keyDim), int64(l.valueHeads*l.valueDim)
	conv := 2*keys + values
	return h*(2*keys+2*values) + h*2*int64(l.valueHeads) + conv*int64(l.kernel) +
		2*int64(l.valueHeads) + int64(l.valueDim) + values*h
}

// attnParams is one layer's attention parameters.
func (s moeShape) attnParams() int64 {
	h := int64(s.hidden)
	if s.kvLoRARank > 0 {
		qk := int64(s.nopeDim + s.ropeDim)
		n := int64(s.heads)
		q := h*int64(s.qLoRARank) + int64(s.qLoRARank) + int64(s.qLoRARank)*n*qk // q_a, its norm, q_b
		kv := h*int64(s.kvLoRARank+s.ropeDim) + int64(s.kvLoRARank) +            // kv_a (latent and rotary key), its norm
			int64(s.kvLoRARank)*n*int64(s.nopeDim+s.vDim) // kv_b
		return q + kv + n*int64(s.vDim)*h // o
	}
	q, kv := int64(s.heads*s.head), int64(s.kvHeads*s.head)
	p := h*q + 2*h*kv + q*h
	if s.attnGate {
		p += h * q
	}
	if s.qkvBias {
		p += q + 2*kv
	}
	if s.oBias {
		p += h
	}
	if s.sinks {
		p += int64(s.heads)
	}
	return p
}

// ffnParams is a gated (SwiGLU) FFN of inter: gate, up and down.
func (s moeShape) ffnParams(inter int, bias bool) int64 {
	p := 3 * int64(s.hidden) * int64(inter)
	if bias {
		p += 2*int64(inter) + int64(s.hidden)
	}
	return p
}

// geometry computes the parameter counts from the shape.
func (s moeShape) geometry() Geometry {
	h := int64(s.hidden)
	moeLayers := s.layers - s.denseLayers
	expert := s.ffnParams(s.expertFFN, s.expertBias)
	router := h * int64(s.experts)
	if s.expertBias {
		router += int64(s.experts)
	}
	norms := 2 * h
	perMoE := s.attnParams() + norms + router + int64(s.shared)*s.ffnParams(s.expertFFN, false)
	perDense := s.attnParams() + norms + s.ffnParams(s.denseFFN, false)
	routed := int64(moeLayers) * int64(s.experts) * expert
	embed := int64(s.vocab) * h
	total := routed + int64(moeLayers)*perMoE + int64(s.denseLayers)*perDense + 2*embed + h // final norm
	// Recurrent layers have a DeltaNet where the others attend.
	rec := s.recurrentLayers()
	total += int64(rec) * (s.deltaNetParams() - s.attnParams())
	ffn := s.expertFFN
	if s.experts == 0 {
		ffn = s.denseFFN
	}
	kvHeads, head := s.kvHeads, s.head
	if s.kvLoRARank > 0 {
		// As llama.cpp's GGUF says (head_count_kv 1, key_length 576);
		// KV() and the attention FLOPs read the MLA fields instead.
		kvHeads, head = 1, s.kvLoRARank+s.ropeDim
	}
	return Geometry{Name: s.name, Layers: s.layers, Hidden: s.hidden, Heads: s.heads, KVHeads: kvHeads, HeadDim: head,
		FFN: ffn, Vocab: s.vocab, Params: total, DTypeBytes: 2, ContextLen: s.contextLen,
		Experts: s.experts, ExpertsUsed: s.used, SharedExperts: s.shared, MoELayers: moeLayers, RoutedParams: routed,
		ExpertWeightBits: s.expertBits, SlidingLayers: s.slidingLayers, SlidingWindow: s.window,
		KVLoRARank: s.kvLoRARank, RopeHeadDim: s.ropeDim, RecurrentLayers: rec, Recurrent: s.linear.geometry()}
}

// geometry is the DeltaNet layers' state shape as the runtime reads it
// from a GGUF (arch.RecurrentGeometry: one head width for keys and
// values, as every Qwen hybrid has).
func (l linearShape) geometry() arch.RecurrentGeometry {
	if l.valueHeads == 0 {
		return arch.RecurrentGeometry{}
	}
	return arch.RecurrentGeometry{ConvKernel: l.kernel, StateSize: l.valueDim, KeyHeads: l.keyHeads, ValueHeads: l.valueHeads,
		Inner: l.valueHeads * l.valueDim}
}

// moeProfiles are the mixture-of-experts models agents run, from their
// published Hugging Face configs (config.json), in BF16 but for gpt-oss's
// MXFP4 experts, as their checkpoints ship. GLM-4.5-Air in BF16 needs two
// 80 GB devices; glm-4.5-air-fp8 is Z.ai's FP8 checkpoint.
func moeProfiles() []Geometry {
	qwen := moeShape{name: "qwen3-coder-30b-a3b", layers: 48, hidden: 2048, heads: 32, kvHeads: 4, head: 128,
		vocab: 151936, contextLen: 262144, experts: 128, used: 8, expertFFN: 768}
	gptOSS := func(name string, layers, experts int) moeShape {
		// Alternating sliding (window 128) and full attention; attention
		// sinks, biases on attention and experts.
		return moeShape{name: name, layers: layers, hidden: 2880, heads: 64, kvHeads: 8, head: 64,
			vocab: 201088, contextLen: 131072, experts: experts, used: 4, expertFFN: 2880,
			slidingLayers: layers / 2, window: 128, expertBits: MXFP4Bits,
			qkvBias: true, oBias: true, expertBias: true, sinks: true}
	}
	glmAir := moeShape{name: "glm-4.5-air", layers: 46, hidden: 4096, heads: 96, kvHeads: 8, head: 128,
		vocab: 151552, contextLen: 131072, denseLayers: 1, denseFFN: 10944,
		experts: 128, used: 8, shared: 1, expertFFN: 1408, qkvBias: true}
	glmFlash := moeShape{name: "glm-4.7-flash", layers: 47, hidden: 2048, heads: 20,
		vocab: 154880, contextLen: 202752, denseLayers: 1, denseFFN: 10240,
		experts: 64, used: 4, shared: 1, expertFFN: 1536,
		qLoRARank: 768, kvLoRARank: 512, ropeDim: 64, nopeDim: 192, vDim: 256}
	airFP8 := glmAir.geometry().WithWeightBits(8, 0)
	airFP8.Name = "glm-4.5-air-fp8"
	return []Geometry{qwen.geometry(), gptOSS("gpt-oss-20b", 24, 32).geometry(), gptOSS("gpt-oss-120b", 36, 128).geometry(),
		glmAir.geometry(), airFP8, glmFlash.geometry()}
}
