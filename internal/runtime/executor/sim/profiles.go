// Package sim is a roofline cost model of an accelerator running a
// decoder-only model: dense (Llama) or a mixture of experts (Qwen3-MoE,
// gpt-oss, GLM), with full, sliding-window or latent (MLA) attention.
// Hybrid models (Qwen3.5/3.6, Qwen3-Next) have gated DeltaNet layers
// with a recurrent state per sequence beside their attending ones. It
// implements the engine's executor contract with deterministic synthetic
// tokens, so the real engine and block manager run at scale on machines
// without accelerators: in virtual time for simulations and benchmarks,
// or in real time (sleeping) for serving.
package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Accelerator is one device's peak rates and memory.
type Accelerator struct {
	Name string
	// PeakFLOPS is dense BF16 tensor throughput, FLOP/s.
	PeakFLOPS float64
	// MemBandwidth is HBM bandwidth, bytes/s.
	MemBandwidth float64
	// MemoryBytes is device memory.
	MemoryBytes int64
	// LinkBandwidth is the per-device interconnect bandwidth for
	// tensor-parallel all-reduces, bytes/s.
	LinkBandwidth float64
	// HostLinkBandwidth is the device's link to host memory, bytes/s in
	// each direction (PCIe is full duplex): what KV offload and restore
	// move over.
	HostLinkBandwidth float64
}

// PCIe x16 bandwidth per direction: 16 lanes × 32 GT/s (Gen5) or 16 GT/s
// (Gen4), 128b/130b encoded, ≈ 63 and 31.5 GB/s; rounded to the usual
// datasheet figures. H100-SXM and H200 hosts attach over PCIe Gen5 x16,
// A100 and L4 over Gen4 x16.
const (
	pcieGen5x16 = 64e9
	pcieGen4x16 = 32e9
)

// Published datasheet figures (dense BF16, no sparsity).
var accelerators = map[string]Accelerator{
	"H100-SXM":  {Name: "H100-SXM", PeakFLOPS: 989e12, MemBandwidth: 3.35e12, MemoryBytes: 80 << 30, LinkBandwidth: 450e9, HostLinkBandwidth: pcieGen5x16},
	"H200":      {Name: "H200", PeakFLOPS: 989e12, MemBandwidth: 4.8e12, MemoryBytes: 141 << 30, LinkBandwidth: 450e9, HostLinkBandwidth: pcieGen5x16},
	"A100-80GB": {Name: "A100-80GB", PeakFLOPS: 312e12, MemBandwidth: 2.039e12, MemoryBytes: 80 << 30, LinkBandwidth: 300e9, HostLinkBandwidth: pcieGen4x16},
	"L4":        {Name: "L4", PeakFLOPS: 121e12, MemBandwidth: 300e9, MemoryBytes: 24 << 30, LinkBandwidth: 32e9, HostLinkBandwidth: pcieGen4x16},
}

// Geometry is a model's shape: what the cost model charges a step for and
// what sizes the KV cache.
//
// A mixture-of-experts model keeps its routed experts' parameters apart
// (RoutedParams): a token runs ExpertsUsed of Experts of them, so its
// FLOPs are those of ActiveParams, while a step reads the weights of the
// experts its tokens hit (see ExpectedExpertsTouched). Its layers' KV
// comes in groups (KVLayerGroups): full attention, sliding-window
// attention, multi-head latent attention.
type Geometry struct {
	Name string
	// Layers to FFN are the transformer's sizes. FFN is the dense FFN's
	// intermediate size (a mixture of experts': one routed expert's), for
	// reference only: Params counts the weights.
	Layers, Hidden, Heads, KVHeads, HeadDim, FFN int
	Vocab                                        int
	// Params is the parameter count, the routed experts included. The
	// input embedding and the output projection (untied) are Vocab×Hidden
	// each.
	Params int64
	// DTypeBytes is the weight element size (2 for BF16), and the KV's
	// when KVDType is auto.
	DTypeBytes int
	// KVDType is the KV cache's element type; kvcache.DTypeAuto (the zero
	// value) means the model's own, as vLLM's cache_dtype "auto": F32 for
	// 4-byte weights, else BF16.
	KVDType kvcache.DType
	// ContextLen is the model's maximum context.
	ContextLen int

	// Experts is the number of routed experts of a mixture-of-experts
	// layer (0: a dense model), ExpertsUsed how many of them each token
	// runs, SharedExperts how many every token runs besides (their
	// parameters are dense ones: they are read and run for every token).
	Experts, ExpertsUsed, SharedExperts int
	// MoELayers is the number of layers with routed experts; the others
	// (DeepSeek's and GLM's leading dense layers) have a dense FFN.
	MoELayers int
	// RoutedParams is the routed experts' parameters, all MoE layers
	// together (a part of Params).
	RoutedParams int64
	// WeightBits is the element size, in bits, of every weight but the
	// routed experts' (0: DTypeBytes×8); ExpertWeightBits is the routed
	// experts' (0: WeightBits). gpt-oss ships its experts in MXFP4: 4-bit
	// elements and an 8-bit scale per 32, 4.25 bits a weight.
	WeightBits, ExpertWeightBits float64

	// SlidingLayers of the Layers attend over the last SlidingWindow
	// positions only (gpt-oss: every other layer, 128 tokens); the others
	// attend over the whole context.
	SlidingLayers, SlidingWindow int
	// KVLoRARank and RopeHeadDim, when set, make every layer multi-head
	// latent attention (DeepSeek-V2's MLA, llama.cpp's deepseek2): the
	// cache holds one compressed latent per token and layer, KVLoRARank
	// wide plus RopeHeadDim of rotary key, shared by all heads. Attention
	// runs on it with the projections absorbed, as llama.cpp does: keys
	// KVLoRARank+RopeHeadDim wide, values KVLoRARank wide, per head.
	KVLoRARank, RopeHeadDim int
	// RecurrentLayers of the Layers are gated DeltaNet layers (hybrid
	// models: Qwen3.5/3.6, Qwen3-Next): no KV, a fixed-size state per
	// sequence shaped by Recurrent, kept in F32 as the runtime keeps it
	// (arch.Config.StateBytes). The other layers attend over the whole
	// context.
	RecurrentLayers int
	Recurrent       arch.RecurrentGeometry
	// WindowCache keeps the sliding-window layers as the ggml executor's
	// window cache does (--swa-cache window): per sequence, a ring of
	// SlidingWindow + WindowChunk cells in the sequence's state slot
	// (StateBytes), so the paged cache (KV) holds the full-attention
	// layers only. Off (--swa-cache full), every attending layer is paged
	// for the whole context. No effect on a model without sliding layers.
	WindowCache bool
}

// WindowChunk is the most tokens one sequence takes in one iteration with
// the window cache, which a ring holds beside its window: the ggml
// executor's DefaultWindowChunk (llama.cpp's default micro-batch).
const WindowChunk = 512

// WithWindowCache is the geometry with its sliding-window layers kept in
// per-sequence rings (on: --swa-cache window) or paged (off: full).
func (g Geometry) WithWindowCache(on bool) Geometry {
	g.WindowCache = on
	return g
}

// windowRings reports sliding-window layers kept in rings: WindowCache on
// a model with sliding layers (MLA models have none).
func (g Geometry) windowRings() bool { return g.WindowCache && g.SlidingLayers > 0 && !g.mla() }

// MXFP4Bits is the storage of an MXFP4 weight: a 4-bit element plus an
// 8-bit shared scale per block of 32.
const MXFP4Bits = 4 + 8.0/32

var geometries = map[string]Geometry{
	"llama-3.1-8b": {Name: "llama-3.1-8b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
		Vocab: 128256, Params: 8_030_261_248, DTypeBytes: 2, ContextLen: 131072},
	"llama-3.1-70b": {Name: "llama-3.1-70b", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, FFN: 28672,
		Vocab: 128256, Params: 70_553_706_496, DTypeBytes: 2, ContextLen: 131072},
}

func init() {
	for _, g := range append(moeProfiles(), hybridProfiles()...) {
		geometries[g.Name] = g
	}
}

// LookupAccelerator finds a profile by name (case-insensitive).
func LookupAccelerator(name string) (Accelerator, error) {
	for k, v := range accelerators {
		if strings.EqualFold(k, name) {
			return v, nil
		}
	}
	return Accelerator{}, fmt.Errorf("unknown accelerator %q (known: %s)", name, strings.Join(names(accelerators), ", "))
}

// LookupGeometry finds a model geometry by name (case-insensitive).
func LookupGeometry(name string) (Geometry, error) {
	for k, v := range geometries {
		if strings.EqualFold(k, name) {
			return v, nil
		}
	}
	return Geometry{}, fmt.Errorf("unknown model geometry %q (known: %s)", name, strings.Join(names(geometries), ", "))
}

// GeometryNames lists the model geometries, sorted (for help texts).
func GeometryNames() []string { return names(geometries) }

func names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// mla reports multi-head latent attention.
func (g Geometry) mla() bool { return g.KVLoRARank > 0 }

// attnFLOPsPerPair is the FLOPs of one (query, key) pair in one layer: a
// key dot product and a value accumulation per head, 2 FLOPs an element.
// MLA runs them on the latent, keys KVLoRARank+RopeHeadDim wide, values
// KVLoRARank wide.
func (g Geometry) attnFLOPsPerPair() float64 {
	if g.mla() {
		return 2 * float64(g.Heads) * float64(2*g.KVLoRARank+g.RopeHeadDim)
	}
	return 4 * float64(g.Heads*g.HeadDim)
}

// KV is the KV cache geometry the block manager allocates: every paged
// layer alike (a hybrid model's recurrent layers keep no KV), each
// token's K and V rows in every such layer, its type resolved. That is
// the whole truth for a model of full-attention layers only. For the
// others it is what the pod really holds, not what the model needs
// (KVLayerGroups):
//
//   - sliding-window layers are paged for the whole context, though they
//     keep only their window, unless WindowCache keeps them in rings
//     (StateBytes): then the paged cache holds the full-attention layers
//     only;
//   - an MLA model's cache is one latent row per layer, KVLoRARank +
//     RopeHeadDim wide, and no value row (kvcache.Geometry.KeysOnly, as
//     the ggml executor keeps it and llama.cpp v0.5.0 stores the
//     deepseek2 cache: V is a view of the K row's first KVLoRARank
//     elements).
func (g Geometry) KV() kvcache.Geometry {
	kv := g.attentionKV()
	if g.windowRings() {
		kv.Layers -= g.SlidingLayers
	}
	return kv
}

// attentionKV is the KV geometry of every attending layer, the sliding
// ones included: what the paged cache holds without the window cache.
func (g Geometry) attentionKV() kvcache.Geometry {
	model := kvcache.DTypeBF16
	if g.DTypeBytes == 4 {
		model = kvcache.DTypeF32
	}
	kv := kvcache.Geometry{Layers: g.AttentionLayers(), KVHeads: g.KVHeads, HeadDim: g.HeadDim, DType: g.KVDType.ResolveAuto(model)}
	if g.mla() {
		kv.KVHeads, kv.HeadDim, kv.KeysOnly = 1, g.KVLoRARank+g.RopeHeadDim, true
	}
	return kv
}

// KVBytesPerToken is the KV cache footprint of one token as the pod
// pages it (kvcache's accounting of KV()).
func (g Geometry) KVBytesPerToken() int64 { return g.KV().BytesPerToken() }

// KVBytesPerTokenPerDevice is one device's share of KVBytesPerToken in a
// tensor-parallel group of tp: KV heads are split across the group, but
// an MLA latent is shared by all heads, so every device holds all of it.
func (g Geometry) KVBytesPerTokenPerDevice(tp int) int64 {
	if tp <= 1 || g.mla() {
		return g.KVBytesPerToken()
	}
	return g.KVBytesPerToken() / int64(tp)
}

// Hybrid reports recurrent (gated DeltaNet) layers: the model keeps a
// state per sequence (StateBytes) that a prefix hit needs at its exact
// end.
func (g Geometry) Hybrid() bool { return g.RecurrentLayers > 0 }

// KeepsStates reports a state slot per sequence (StateBytes > 0): a
// hybrid model's recurrent states, the window cache's rings, or both.
// The executor is then a batch.StateKeeper and the engine resumes prefix
// hits from checkpoints, as the ggml executor's.
func (g Geometry) KeepsStates() bool { return g.Hybrid() || g.windowRings() }

// AttentionLayers is the layers that keep KV: all but the recurrent ones.
func (g Geometry) AttentionLayers() int { return g.Layers - g.RecurrentLayers }

// StateBytes is one sequence's state slot, as the ggml executor keeps
// it: the recurrent state (RecurrentStateBytes) and, with the window
// cache, the sliding layers' rings (RingBytes); 0 for a model that keeps
// neither.
func (g Geometry) StateBytes() int64 { return g.RecurrentStateBytes() + g.RingBytes() }

// RecurrentStateBytes is one sequence's recurrent state over every
// recurrent layer, in F32, as the runtime keeps it
// (arch.Config.StateBytes: the convolution's last ConvKernel-1 inputs
// and a StateSize² matrix per value head): 0 for a model without
// recurrent layers.
func (g Geometry) RecurrentStateBytes() int64 {
	if !g.Hybrid() {
		return 0
	}
	r := g.Recurrent
	return 4 * int64(g.RecurrentLayers) * int64(r.ConvStateFloats()+r.DeltaStateFloats())
}

// RingBytes is one sequence's rings with the window cache on (0 off):
// keys and values of every sliding layer for SlidingWindow + WindowChunk
// positions (ggml.WindowStateBytes).
func (g Geometry) RingBytes() int64 {
	if !g.windowRings() {
		return 0
	}
	return int64(g.SlidingLayers) * int64(g.SlidingWindow+WindowChunk) * g.attentionKV().BytesPerToken() / int64(g.AttentionLayers())
}

// recurrentFLOPsPerToken is what a token costs the recurrent layers
// beyond their projections (which ActiveParams counts): per layer, the
// depthwise convolution (ConvKernel multiply-adds a channel) and, per
// value head, the gated delta rule on its StateSize² state: the decay
// (one multiply an element), the key's read of the state, the rank-1
// update and the query's read (a multiply-add an element each), 7
// FLOPs an element.
func (g Geometry) recurrentFLOPsPerToken() float64 {
	if !g.Hybrid() {
		return 0
	}
	r := g.Recurrent
	perLayer := 2*float64(r.ConvKernel)*float64(r.ConvChannels()) + 7*float64(r.StateSize*r.StateSize)*float64(r.ValueHeads)
	return float64(g.RecurrentLayers) * perLayer
}

// KVLayerGroup is a set of layers whose KV is alike: how much each layer
// stores per token and how many positions it keeps.
type KVLayerGroup struct {
	// Kind is "full", "sliding" or "mla".
	Kind   string
	Layers int
	// Window is the positions a layer keeps and reads (0: all of them).
	Window int
	// BytesPerTokenPerLayer is one layer's KV of one token.
	BytesPerTokenPerLayer int64
}

// KVLayerGroups is the model's layers grouped by their KV: what a
// per-group allocation (issue 31, item 3) would size, and what a step
// reads (StepTime charges every group its own positions).
func (g Geometry) KVLayerGroups() []KVLayerGroup {
	perLayer := g.attentionKV().BytesPerToken() / int64(g.AttentionLayers())
	if g.mla() {
		return []KVLayerGroup{{Kind: "mla", Layers: g.Layers, BytesPerTokenPerLayer: perLayer}}
	}
	var out []KVLayerGroup
	if full := g.AttentionLayers() - g.SlidingLayers; full > 0 {
		out = append(out, KVLayerGroup{Kind: "full", Layers: full, BytesPerTokenPerLayer: perLayer})
	}
	if g.SlidingLayers > 0 {
		out = append(out, KVLayerGroup{Kind: "sliding", Layers: g.SlidingLayers, Window: g.SlidingWindow, BytesPerTokenPerLayer: perLayer})
	}
	return out
}

// KVGroupBytes is the KV a sequence of ctxLen tokens needs when every
// layer group keeps only what it reads: a sliding-window layer at most its
// window (block rounding left out). With every attending layer paged
// (WindowCache off), KVBytesPerToken()×ctxLen is what the pod allocates.
func (g Geometry) KVGroupBytes(ctxLen int) int64 {
	var n int64
	for _, gr := range g.KVLayerGroups() {
		kept := ctxLen
		if gr.Window > 0 {
			kept = min(ctxLen, gr.Window)
		}
		n += int64(gr.Layers) * int64(kept) * gr.BytesPerTokenPerLayer
	}
	return n
}

// KVGroupRatio is KVGroupBytes(ctxLen) over what paging every attending
// layer allocates for ctxLen tokens (WindowCache off): 1 for a model of
// full-attention layers (and for MLA, whose latent the pod already
// sizes), about ½ for gpt-oss at long contexts. A per-group cache (the
// window cache) holds up to 1/ratio as many tokens.
func (g Geometry) KVGroupRatio(ctxLen int) float64 {
	if ctxLen <= 0 {
		return 1
	}
	return float64(g.KVGroupBytes(ctxLen)) / (float64(g.attentionKV().BytesPerToken()) * float64(ctxLen))
}

// weightBits is the dense weights' element size in bits.
func (g Geometry) weightBits() float64 {
	if g.WeightBits > 0 {
		return g.WeightBits
	}
	return float64(8 * g.DTypeBytes)
}

// expertBits is the routed experts' element size in bits.
func (g Geometry) expertBits() float64 {
	if g.ExpertWeightBits > 0 {
		return g.ExpertWeightBits
	}
	return g.weightBits()
}

// WithWeightBits is the geometry with its weights stored at dense bits an
// element and its routed experts at expert bits (0: as the dense ones): a
// quantized checkpoint (FP8: 8, 0; GGUF Q4_K_M: about 4.9, 0; gpt-oss's
// own: 16, MXFP4Bits). The KV type is unchanged (KVDType).
func (g Geometry) WithWeightBits(dense, expert float64) Geometry {
	g.WeightBits, g.ExpertWeightBits = dense, expert
	return g
}

// DenseParams is every parameter but the routed experts'.
func (g Geometry) DenseParams() int64 { return g.Params - g.RoutedParams }

// ActiveParams is the parameters one token runs: the dense ones (the
// output projection included, the input embedding left out: a lookup) and
// ExpertsUsed/Experts of the routed ones.
func (g Geometry) ActiveParams() int64 {
	embed := int64(g.Vocab) * int64(g.Hidden)
	active := g.DenseParams() - embed
	if g.Experts > 0 {
		active += g.RoutedParams * int64(g.ExpertsUsed) / int64(g.Experts)
	}
	return active
}

// WeightBytes is the size of the weights.
func (g Geometry) WeightBytes() int64 {
	return int64(math.Round(float64(g.DenseParams())*g.weightBits()/8 + float64(g.RoutedParams)*g.expertBits()/8))
}

// ExpertBytes is one routed expert of one layer.
func (g Geometry) ExpertBytes() float64 {
	if g.Experts == 0 || g.MoELayers == 0 {
		return 0
	}
	return float64(g.RoutedParams) / float64(g.MoELayers*g.Experts) * g.expertBits() / 8
}

// ExpectedExpertsTouched is the expected number of distinct routed experts
// a MoE layer runs for a batch of tokens tokens, each choosing ExpertsUsed
// of Experts: E·(1 − (1 − k/E)^T). It assumes uniform, independent
// routing: real routers are skewed and a sequence's tokens pick alike, so
// real batches touch fewer experts and this errs towards more weight
// bytes read.
func (g Geometry) ExpectedExpertsTouched(tokens int) float64 {
	if g.Experts == 0 || tokens <= 0 {
		return 0
	}
	e := float64(g.Experts)
	return e * (1 - math.Pow(1-float64(g.ExpertsUsed)/e, float64(tokens)))
}

// WeightBytesRead is the weights a step of tokens tokens reads: the dense
// ones and, in every MoE layer, the routed experts its tokens touch
// (ExpectedExpertsTouched). A dense model reads all its weights.
func (g Geometry) WeightBytesRead(tokens int) float64 {
	if g.Experts == 0 {
		return float64(g.WeightBytes())
	}
	dense := float64(g.DenseParams()) * g.weightBits() / 8
	return dense + float64(g.MoELayers)*g.ExpectedExpertsTouched(tokens)*g.ExpertBytes()
}

// ActivationReserve is the device memory a KV cache sized from a fraction
// of it leaves for what is neither weights nor KV: the CUDA context, the
// BLAS workspace and the compute graph's buffers. The runtime's ggml
// executor on a GPU reads --kv-cache-memory-fraction with it too.
const ActivationReserve = 2 << 30

// StateSlotsForDevice sizes the cache of a model that keeps states
// (KeepsStates: recurrent states, window rings) on one tensor-parallel
// group as cmd/runtime sizes the ggml executor's: two state slots a
// sequence (one running, one checkpoint) for maxSeqs sequences, taking
// at most half of what KVBlocksForDevice would give the paged KV
// (kvcache.SplitStates), and KV blocks from the rest. A model without
// states gets KVBlocksForDevice's blocks and no slots.
func StateSlotsForDevice(a Accelerator, g Geometry, tp int, memFraction float64, blockSize, maxSeqs int) (blocks, slots int, err error) {
	blocks, err = KVBlocksForDevice(a, g, tp, memFraction, blockSize)
	if err != nil || !g.KeepsStates() {
		return blocks, 0, err
	}
	if tp < 1 {
		tp = 1
	}
	perBlock := g.KVBytesPerTokenPerDevice(tp) * int64(blockSize)
	perSlot := g.StateBytes() / int64(tp)
	budget := int64(blocks) * perBlock
	blocks, slots = kvcache.SplitStates(budget, perBlock, perSlot, 2*maxSeqs, 0)
	if slots < 2 {
		return 0, 0, fmt.Errorf("%s: %d bytes of cache on %s hold no two state slots of %d bytes", g.Name, budget, a.Name, perSlot)
	}
	return blocks, slots, nil
}

// KVBlocksForDevice sizes the KV cache of one tensor-parallel group: the
// fraction memFraction of each device's memory, less its shard of the
// weights and ActivationReserve, divided by the KV bytes per block each
// device holds (KVBytesPerTokenPerDevice: the paged layers, for the whole
// context).
func KVBlocksForDevice(a Accelerator, g Geometry, tp int, memFraction float64, blockSize int) (int, error) {
	if tp < 1 {
		tp = 1
	}
	budget := int64(float64(a.MemoryBytes)*memFraction) - g.WeightBytes()/int64(tp) - ActivationReserve
	perBlock := g.KVBytesPerTokenPerDevice(tp) * int64(blockSize)
	if budget <= 0 || perBlock <= 0 {
		return 0, fmt.Errorf("%s (%.1f GB of weights) does not fit on %d× %s at memory fraction %.2f",
			g.Name, float64(g.WeightBytes())/1e9, tp, a.Name, memFraction)
	}
	return int(budget / perBlock), nil
}
