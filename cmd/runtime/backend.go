package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/codec"
	"github.com/kvpilot/kvpilot/internal/runtime/device"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/cpu"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/ggml"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// defaultCPUKVMemory is the KV cache of the cpu executor, and of ggml
// without --kv-cache-memory-fraction, when no size flag is given.
const defaultCPUKVMemory = 1 << 30

// backend is an executor with what the engine and the server need from it.
type backend struct {
	exec       batch.Executor
	codec      codec.Codec
	decoder    engine.TokenDecoder
	eos        []int32
	vocabSize  int
	contextLen int
	numBlocks  int
	// kvBytesPerBlock is one KV block's size (host-tier metrics in bytes)
	// and kvDType its element type, both kvcache's accounting of the
	// executor's KV geometry.
	kvBytesPerBlock int64
	kvDType         kvcache.DType
	servedName      string
	// architecture is the model file's general.architecture ("" for sim).
	architecture string
	// stateSlots are the recurrent-state slots of a hybrid model's
	// executor (0 for others); its host tier then keeps state
	// checkpoints beside blocks (main.go).
	stateSlots int
	// stateTokens is one sequence's recurrent state in tokens of KV
	// (wire.KVReport.StateTokens), stateBytes in bytes; 0 for other
	// models.
	stateTokens, stateBytes int64
	description             string
	close                   func()
}

func buildBackend(o *options, devs []device.Device, log *slog.Logger) (*backend, error) {
	if o.Executor == executorSim {
		return buildSim(o, devs, log)
	}
	return buildModel(o, devs, log)
}

// modelExecutor is what cpu and ggml executors share.
type modelExecutor interface {
	batch.Executor
	Close()
}

// buildModel loads the model and runs it with the cpu or the ggml executor.
func buildModel(o *options, devs []device.Device, log *slog.Logger) (*backend, error) {
	log.Info("loading model", "model", o.Model)
	start := time.Now()
	m, err := model.OpenWith(o.Model, loadProgress(log), model.LoadOptions{PreTokenizerFallback: o.TokenizerPreFallback})
	if err != nil {
		return nil, err
	}
	if m.PreTokenizerFallback != "" {
		log.Warn("TOKENIZER FALLBACK: prompts do not tokenize as the model was trained", "model", o.Model, "reason", m.PreTokenizerFallback, "flag", "--tokenizer-pre-fallback")
	}
	cfg := m.Config
	log.Info("model loaded", "model", o.Model, "arch", cfg.Arch, "params", cfg.NumParams(), "layers", cfg.Layers,
		"vocab", cfg.VocabSize, "context", cfg.ContextLen, "chat_template", m.ChatTemplate.Name(), "elapsed", time.Since(start).Round(time.Millisecond))
	kv, stateBytes := cpu.KVGeometry(cfg), cfg.StateBytes()
	if o.Executor == executorGGML {
		kv, stateBytes = ggmlCacheLayout(m, o)
	}
	if err := kv.Validate(); err != nil {
		_ = m.Close()
		return nil, fmt.Errorf("--kv-cache-dtype %s: %w", o.KVCacheDType, err)
	}
	perBlock := kv.BytesPerBlock(o.BlockSize)
	blocks := o.KVCacheBlocks
	// slots: a hybrid model's recurrent states, or the window cache's
	// rings, one per running sequence (--max-num-seqs) and as many
	// checkpoints, which prefix hits resume from (the engine splits them);
	// fewer when the KV budget cannot hold that many.
	slots := 0
	if stateBytes > 0 {
		slots = ggml.StateSlotsFor(o.MaxNumSeqs)
		if blocks > 0 {
			slots = min(slots, 2*ggml.DefaultStateSlots)
		}
	}
	// gpuOnly: the KV cache was sized from the GPU's memory, so ggml must
	// not fall back to the CPU with it.
	gpuOnly := false
	if blocks == 0 {
		budget := int64(o.KVCacheMemory)
		if budget == 0 && o.KVCacheMemoryFractionSet {
			// validate refused the fraction for the cpu executor and for
			// ggml on --device cpu.
			budget, err = ggmlKVMemoryForFraction(o, m, devs, log)
			if err != nil {
				_ = m.Close()
				return nil, err
			}
			gpuOnly = true
		}
		if budget == 0 {
			budget = defaultCPUKVMemory
		}
		// The states (a hybrid model's, the window cache's rings) come out
		// of the same budget: at most half of it (at least one), the rest
		// is the paged layers' KV.
		blocks, slots = kvcache.SplitStates(budget, perBlock, stateBytes, slots, 1)
		if blocks == 0 {
			_ = m.Close()
			return nil, fmt.Errorf("a KV cache of %d bytes holds no block of %d bytes (beside %d state slots of %d bytes)", budget, perBlock, slots, stateBytes)
		}
	}
	var exec modelExecutor
	name := "cpu executor"
	if o.Executor == executorGGML {
		g, err := newGGML(o, m, blocks, slots, devs, gpuOnly, log)
		if err != nil {
			_ = m.Close()
			return nil, err
		}
		if slots > 0 {
			log.Info("state slots (hybrid model's recurrent states, window cache's rings)", "slots", slots, "bytes_per_sequence", stateBytes,
				"total_mib", int64(slots)*stateBytes>>20, "recurrent_layers", cfg.RecurrentLayers(), "paged_kv_layers", kv.Layers, "window_chunk", g.MaxSeqTokens())
		}
		log.Info("ggml executor", "device", g.Device(), "weights", g.Weights(), "kv_cache_dtype", g.KV().DType)
		exec, name = g, "ggml executor on "+g.Device()
	} else {
		c, err := cpu.New(m, blocks, o.BlockSize, cpu.Options{Threads: o.CPUThreads, KVCacheDType: o.KVCacheDType})
		if err != nil {
			_ = m.Close()
			return nil, err
		}
		exec = c
	}
	return &backend{
		exec: exec, codec: codec.Model{Tokenizer: m.Tokenizer, Template: m.ChatTemplate}, decoder: m.Tokenizer,
		eos: cfg.EOS, vocabSize: cfg.VocabSize, contextLen: cfg.ContextLen, numBlocks: blocks, kvBytesPerBlock: perBlock, kvDType: kv.DType,
		servedName: nameFromModel(o.Model), architecture: cfg.Arch, stateSlots: slots, stateTokens: kvcache.StateTokens(stateBytes, perBlock, o.BlockSize), stateBytes: stateBytes,
		description: fmt.Sprintf("%s, %d KV blocks of %s (%d MiB)", name, blocks, kv.DType, int64(blocks)*perBlock>>20),
		close:       func() { exec.Close(); _ = m.Close() },
	}, nil
}

// ggmlFlashAuto is --ggml-flash-max-seqs's default: on CUDA flash
// attention for lone sequences, where ggml has the kernels (on an H200 a
// lone 8,192-token prefill ran 2.97× as fast as with the plain chain and
// a lone decode the same; 8 sequences decoding together ran 0.54× as
// fast with flash attention each, so batches keep the plain chain); on
// the CPU every batch, as 0 is there.
const ggmlFlashAuto = -1

// newGGML starts the ggml executor on --device, or without it on the GPU
// when NVML found one and the CUDA backend loads, else on the CPU. gpuOnly
// (a KV cache sized from the GPU's memory) makes a failure on the GPU an
// error instead of a fallback to the CPU.
func newGGML(o *options, m *model.Model, blocks, stateSlots int, devs []device.Device, gpuOnly bool, log *slog.Logger) (*ggml.Executor, error) {
	opts := ggml.Options{LibDir: o.GGMLLib, Device: o.Device, Threads: o.CPUThreads, KVCacheDType: o.KVCacheDType, DeviceArgmax: o.GGMLDeviceArgmax,
		StateSlots: stateSlots, WindowCache: o.SWACache == swaCacheWindow, CUDAGraphs: o.GGMLCUDAGraphs}
	flash := func(opts ggml.Options) ggml.Options {
		opts.FlashMaxSeqs = o.GGMLFlashMaxSeqs
		if o.GGMLFlashMaxSeqs == ggmlFlashAuto {
			opts.FlashMaxSeqs = 0
			if opts.Device == ggml.DeviceCUDA {
				opts.FlashMaxSeqs, opts.FlashFallback = 1, true
			}
		}
		return opts
	}
	if o.Device != "" {
		return ggml.New(m, blocks, o.BlockSize, flash(opts))
	}
	if len(devs) > 0 {
		opts.Device = ggml.DeviceCUDA
		e, err := ggml.New(m, blocks, o.BlockSize, flash(opts))
		if err == nil {
			return e, nil
		}
		if gpuOnly {
			return nil, fmt.Errorf("--kv-cache-memory-fraction sized the KV cache from the GPU's memory, so the runtime does not fall back to ggml's CPU kernels (an image with ggml's CUDA build runs on the GPU; --kv-cache-memory sizes a cache for the CPU): %w", err)
		}
		log.Warn("NVML found a GPU but the ggml CUDA backend did not start; running on the CPU", "err", err)
	}
	opts.Device = ggml.DeviceCPU
	return ggml.New(m, blocks, o.BlockSize, flash(opts))
}

// ggmlKVMemoryForFraction sizes ggml's KV cache on the GPU from
// --kv-cache-memory-fraction (kvMemoryForFraction), and logs the numbers it
// used: this path runs only on a GPU, so the log is how to check it.
func ggmlKVMemoryForFraction(o *options, m *model.Model, devs []device.Device, log *slog.Logger) (int64, error) {
	if len(devs) == 0 {
		return 0, fmt.Errorf("--kv-cache-memory-fraction sizes the KV cache from a GPU's memory, and NVML found no GPU (ggml would run on the CPU): size it with --kv-cache-memory or --kv-cache-blocks")
	}
	// ggml runs on its CUDA backend's first device. NVML need not number
	// the devices as CUDA does, so with several the smallest one sizes the
	// cache.
	gpu := devs[0]
	for _, d := range devs[1:] {
		if d.MemoryBytes < gpu.MemoryBytes {
			gpu = d
		}
	}
	weights := modelWeightBytes(m)
	kv, err := kvMemoryForFraction(gpu.MemoryBytes, o.KVCacheMemoryFraction, weights, sim.ActivationReserve)
	if err != nil {
		return 0, fmt.Errorf("GPU %d (%s): %w", gpu.Index, gpu.Name, err)
	}
	log.Info("KV cache sized from the GPU's memory", "gpu", gpu.Index, "gpu_name", gpu.Name,
		"gpu_memory_mib", gpu.MemoryBytes>>20, "fraction", o.KVCacheMemoryFraction, "weights_mib", weights>>20,
		"compute_reserve_mib", int64(sim.ActivationReserve)>>20, "kv_cache_mib", kv>>20)
	return kv, nil
}

// kvMemoryForFraction is the KV cache's share of a GPU of deviceBytes when
// the runtime may use fraction of it (vLLM's gpu_memory_utilization):
// fraction × deviceBytes, less the weights and the compute reserve.
func kvMemoryForFraction(deviceBytes uint64, fraction float64, weightBytes, reserve int64) (int64, error) {
	usable := int64(float64(deviceBytes) * fraction)
	if kv := usable - weightBytes - reserve; kv > 0 {
		return kv, nil
	}
	return 0, fmt.Errorf("--kv-cache-memory-fraction %g of %d MiB is %d MiB, which the weights (%d MiB) and the compute reserve (%d MiB) fill: "+
		"raise the fraction, use a smaller quantization or a GPU with more memory", fraction, deviceBytes>>20, usable>>20, weightBytes>>20, reserve>>20)
}

// modelWeightBytes is the size of m's weights as stored, which is what the
// ggml executor copies to the device.
func modelWeightBytes(m *model.Model) int64 {
	var n int64
	for _, t := range m.Weights.Tensors() {
		n += int64(len(t.Data))
	}
	return n
}

// loadProgress logs loading at most every 10 %.
func loadProgress(log *slog.Logger) func(done, total int64) {
	next := int64(0)
	return func(done, total int64) {
		if total <= 0 {
			return
		}
		pct := done * 100 / total
		if pct < next && done < total {
			return
		}
		next = pct/10*10 + 10
		log.Info("loading weights", "percent", pct, "bytes", done, "total", total)
	}
}

// nameFromModel derives the served name: builtin:tiny is "tiny", a GGUF
// path its file name without the extension.
func nameFromModel(spec string) string {
	if name, ok := strings.CutPrefix(spec, model.BuiltinPrefix); ok {
		return name
	}
	return strings.TrimSuffix(filepath.Base(spec), filepath.Ext(spec))
}

func buildSim(o *options, devs []device.Device, log *slog.Logger) (*backend, error) {
	acc, err := sim.LookupAccelerator(o.SimAccelerator)
	if err != nil {
		return nil, err
	}
	geom, err := sim.LookupGeometry(o.SimModel)
	if err != nil {
		return nil, err
	}
	if o.SimWeightBits > 0 {
		geom = geom.WithWeightBits(o.SimWeightBits, 0)
	}
	geom.KVDType = o.KVCacheDType
	// --swa-cache as on the ggml executor: window keeps the sliding
	// layers in per-sequence rings (state slots), full pages them.
	geom = geom.WithWindowCache(o.SWACache == swaCacheWindow)
	if err := geom.KV().Validate(); err != nil {
		return nil, fmt.Errorf("--kv-cache-dtype %s: %w", o.KVCacheDType, err)
	}
	sizedFrom := "profile " + acc.Name
	if len(devs) > 0 {
		// A real device's memory sizes the cache; the profile keeps the
		// peak rates of the cost model.
		acc.MemoryBytes = int64(devs[0].MemoryBytes)
		sizedFrom = fmt.Sprintf("device %d (%s)", devs[0].Index, devs[0].Name)
	}
	blocks := o.KVCacheBlocks
	// slots: a hybrid model's recurrent states, the window cache's rings,
	// two a sequence (running and checkpoint); sized with the KV when that
	// is sized from a budget, as buildModel sizes the ggml executor's.
	slots := 0
	if geom.KeepsStates() {
		slots = ggml.StateSlotsFor(o.MaxNumSeqs)
	}
	switch {
	case blocks > 0:
		sizedFrom = "--kv-cache-blocks"
	case o.KVCacheMemory > 0:
		perBlock := geom.KVBytesPerTokenPerDevice(o.TensorParallel) * int64(o.BlockSize)
		blocks, slots = kvcache.SplitStates(int64(o.KVCacheMemory), perBlock, geom.StateBytes()/int64(o.TensorParallel), slots, 1)
		sizedFrom = "--kv-cache-memory"
		if blocks == 0 {
			return nil, fmt.Errorf("--kv-cache-memory %d holds no block of %d bytes (beside %d state slots of %d bytes)", o.KVCacheMemory, perBlock, slots, geom.StateBytes())
		}
	default:
		blocks, slots, err = sim.StateSlotsForDevice(acc, geom, o.TensorParallel, o.KVCacheMemoryFraction, o.BlockSize, o.MaxNumSeqs)
		if err != nil {
			return nil, err
		}
	}
	exec, err := sim.New(sim.Options{Accelerator: acc, Geometry: geom, TensorParallel: o.TensorParallel, StateSlots: slots})
	if err != nil {
		return nil, err
	}
	vocab := exec.Vocabulary()
	log.Info("sim executor", "accelerator", acc.Name, "model", geom.Name, "weight_bytes", geom.WeightBytes(), "tensor_parallel", o.TensorParallel,
		"kv_blocks", blocks, "kv_cache_dtype", geom.KV().DType, "kv_sized_from", sizedFrom, "state_slots", slots)
	return &backend{
		exec: exec, codec: codec.Sim{Vocab: vocab}, decoder: vocab, eos: []int32{exec.EOS()},
		vocabSize: vocab.Size(), contextLen: geom.ContextLen, numBlocks: blocks, servedName: geom.Name,
		kvBytesPerBlock: geom.KV().BytesPerBlock(o.BlockSize), kvDType: geom.KV().DType, // all devices: what the replica moves
		stateSlots: slots, stateBytes: geom.StateBytes(),
		stateTokens: kvcache.StateTokens(geom.StateBytes(), geom.KV().BytesPerBlock(o.BlockSize), o.BlockSize),
		description: fmt.Sprintf("sim executor (%s on %d× %s), %d KV blocks", geom.Name, o.TensorParallel, acc.Name, blocks),
		close:       func() {},
	}, nil
}

// ggmlCacheLayout is the ggml executor's paged KV geometry for m and its
// state slot's bytes (0: it keeps no states): a hybrid model's recurrent
// states; with --swa-cache window, the sliding-window layers' rings
// (ggml.WindowStateBytes), which leave the paged cache.
func ggmlCacheLayout(m *model.Model, o *options) (kvcache.Geometry, int64) {
	stateBytes := m.Config.StateBytes()
	if o.SWACache != swaCacheWindow {
		return ggml.KVGeometry(m, o.KVCacheDType), stateBytes
	}
	return ggml.WindowKVGeometry(m, o.KVCacheDType), stateBytes + ggml.WindowStateBytes(m, o.KVCacheDType, 0)
}
