// Package sim is a roofline cost model of an accelerator running a
// Llama-family model. It implements the engine's executor contract with
// deterministic synthetic tokens, so the real engine and block manager run
// at scale on machines without accelerators: in virtual time for
// simulations and benchmarks, or in real time (sleeping) for serving.
package sim

import (
	"fmt"
	"sort"
	"strings"

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

// Geometry is a model's shape.
type Geometry struct {
	Name                                         string
	Layers, Hidden, Heads, KVHeads, HeadDim, FFN int
	Vocab                                        int
	// Params is the parameter count.
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
}

var geometries = map[string]Geometry{
	"llama-3.1-8b": {Name: "llama-3.1-8b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
		Vocab: 128256, Params: 8_030_261_248, DTypeBytes: 2, ContextLen: 131072},
	"llama-3.1-70b": {Name: "llama-3.1-70b", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, FFN: 28672,
		Vocab: 128256, Params: 70_553_706_496, DTypeBytes: 2, ContextLen: 131072},
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

func names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// KV is the model's KV cache geometry, its type resolved.
func (g Geometry) KV() kvcache.Geometry {
	model := kvcache.DTypeBF16
	if g.DTypeBytes == 4 {
		model = kvcache.DTypeF32
	}
	return kvcache.Geometry{Layers: g.Layers, KVHeads: g.KVHeads, HeadDim: g.HeadDim, DType: g.KVDType.ResolveAuto(model)}
}

// KVBytesPerToken is the KV cache footprint of one token (kvcache's
// accounting of the KV geometry).
func (g Geometry) KVBytesPerToken() int64 { return g.KV().BytesPerToken() }

// WeightBytes is the size of the weights.
func (g Geometry) WeightBytes() int64 { return g.Params * int64(g.DTypeBytes) }

// ActivationReserve is the device memory a KV cache sized from a fraction
// of it leaves for what is neither weights nor KV: the CUDA context, the
// BLAS workspace and the compute graph's buffers. The runtime's ggml
// executor on a GPU reads --kv-cache-memory-fraction with it too.
const ActivationReserve = 2 << 30

// KVBlocksForDevice sizes the KV cache of one tensor-parallel group: the
// fraction memFraction of each device's memory, less its shard of the
// weights and ActivationReserve, divided by the KV bytes per block (KV
// heads are split across the group too).
func KVBlocksForDevice(a Accelerator, g Geometry, tp int, memFraction float64, blockSize int) (int, error) {
	if tp < 1 {
		tp = 1
	}
	budget := int64(float64(a.MemoryBytes)*memFraction) - g.WeightBytes()/int64(tp) - ActivationReserve
	perBlock := g.KVBytesPerToken() / int64(tp) * int64(blockSize)
	if budget <= 0 || perBlock <= 0 {
		return 0, fmt.Errorf("%s does not fit on %d× %s at memory fraction %.2f", g.Name, tp, a.Name, memFraction)
	}
	return int(budget / perBlock), nil
}
