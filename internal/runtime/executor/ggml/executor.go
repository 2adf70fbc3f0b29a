//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Options choose the libraries, the device and its threads.
type Options struct {
	// LibDir holds the ggml libraries ("" means $KVPILOT_GGML_LIB).
	LibDir string
	// Device is "cpu" or "cuda".
	Device string
	// Threads is the CPU backend's thread count; 0 means up to one per
	// physical core of the CPUs this process is given (defaultThreads),
	// each graph running on as many of them as measured fastest
	// (threadTuner); a count given here is used as it is.
	Threads int
	// Poll is the CPU thread pool's polling level between graphs, ggml's
	// 0-100: 0 (the default here) puts the workers to sleep until the next
	// graph, so that between iterations they leave the cores to the engine,
	// the HTTP server and whatever else shares them; ggml's own default is
	// 50. docs/benchmarks.md has the measurement.
	Poll int
	// PlainAttention uses the mul_mat/soft_max/mul_mat attention, the
	// path of non-CPU devices, on the CPU too (tests check it there).
	PlainAttention bool
	// FlashMaxSeqs runs flash attention per sequence (attn_seq.go) for
	// batches of at most this many sequences and the plain attention for
	// larger ones. 0 is every batch on the CPU (unless PlainAttention),
	// none on a GPU. On a GPU it needs a ggml built with the kernels for
	// the cache's type (hack/build-llama-server-cuda.sh builds them for
	// F16), which New checks: it fails without them, unless FlashFallback.
	// On an H200, 1 (lone sequences, so prefills alone) prefilled 8,192
	// tokens 2.97× as fast as none, and 8 made 8-stream decoding 0.54× as
	// fast (docs/benchmarks.md, "make bench-gpu").
	FlashMaxSeqs int
	// FlashFallback runs the plain attention when the backend has no
	// flash-attention kernel FlashMaxSeqs needs, instead of failing (the
	// runtime's default setting; Device says which runs).
	FlashFallback bool
	// CUDAGraphs leaves ggml's CUDA graphs on (cudaGraphsOffByDefault).
	CUDAGraphs bool
	// DeviceArgmax takes the largest logit of every row the engine wants
	// only that of (batch.Seq.ArgmaxOnly: greedy, nothing else read) on
	// the device, with ggml_argmax, and reads back its token instead of
	// the row (a 151,936-token row is 600 KB): on an H200 1.43× the
	// output tokens at 8 streams, 1.27–1.28× at 32 and 128, the same at 1
	// (the runtime's default; docs/benchmarks.md). Among exactly equal
	// largest logits ggml's kernel may pick another than the lowest id,
	// which the engine picks.
	DeviceArgmax bool
	// PlainWeights keeps every weight in the device's default buffer (on
	// the CPU the GGUF file's mapping) instead of the extra buffer types
	// ggml offers (see weights.go): for comparisons.
	PlainWeights bool
	// KVCacheDType is the KV cache's element type: f32, f16, bf16 or q8_0;
	// auto (the zero value) is the model's activation type (KVGeometry).
	KVCacheDType kvcache.DType
	// StateSlots is how many sequences' states (a hybrid model's recurrent
	// states, the window cache's rings) the executor keeps (StateSlots;
	// the engine runs at most as many sequences at once); 0 means
	// DefaultStateSlots. Models that keep no states keep none.
	StateSlots int
	// WindowCache keeps a sliding-window layer's keys and values in a
	// ring per sequence, of its window and WindowChunk cells
	// (window_ring.go), instead of in the paged cache: the paged cache
	// (WindowKVGeometry) then holds the full-attention layers only, the
	// rings are state slots. Off, every layer is paged and the window
	// only masks (attn_window.go).
	WindowCache bool
	// WindowChunk is the most tokens a sequence takes in one iteration
	// with the window cache (MaxSeqTokens); 0 means DefaultWindowChunk.
	WindowChunk int
}

// DefaultStateSlots is Options.StateSlots' default.
const DefaultStateSlots = 16

// StateSlotsFor is the state slots the runtime gives a model that keeps
// states (a hybrid model's recurrent states, the window cache's rings)
// to run maxSeqs sequences at once (--max-num-seqs): a running slot and a
// checkpoint slot each, the split the engine makes with prefix caching
// on, fewer when the KV budget cannot hold them.
func StateSlotsFor(maxSeqs int) int { return 2 * maxSeqs }

// Executor runs a model's forward pass with ggml's kernels, one compute graph
// per iteration, over a KV cache it keeps in device memory laid out by the
// engine's blocks.
type Executor struct {
	lib *Library
	a   *api
	be  *backend
	// m keeps the model's (possibly mapped) weights alive: they were copied
	// to device buffers, but Close of the caller's model must not race us.
	m *model.Model
	// computeHook, when set (by tests: graphdump_test.go's per-node
	// timing), computes the built graphs instead of compute.
	computeHook func(cGraph) error

	cfg                  model.Config
	numBlocks, blockSize int
	kvDim                int
	// kv is the cache's geometry and type; kvType the type as ggml numbers
	// it, kvRow one slot's key (or value) row in bytes.
	kv     kvcache.Geometry
	kvType int32
	kvRow  int
	// rawGather: attention per sequence gathers a cache of another type
	// than F32 in its own type, as I32 words (retype.go), on the CPU.
	rawGather bool

	wctx, kvctx cCtx
	wbuf, kvbuf cBuf
	// xctx and xbuf hold the weights placed in extra buffer types, one
	// context and buffer per type; placed says where every weight went.
	xctx   []cCtx
	xbuf   []cBuf
	placed placement
	// On the CPU, weights and KV live in host memory the executor maps
	// itself (see host.go); mappedBufs are the buffers over a model file's
	// mapping, one per tensor.
	wregion, kvregion *hostRegion
	mappedBufs        []cBuf
	weightBytes       uint64
	// fw is the architecture's forward pass over the weights, ops what
	// build gives it (a field, so that building allocates no Ops).
	fw  arch.Forward
	ops graphOps
	// sliding says per layer whether its attention is a sliding window's
	// over the paged cache (attn_window.go); nil when no layer's is, or
	// when the sliding layers keep rings (ring, window_ring.go).
	sliding []bool
	ring    *windowRing
	// kc[l] and vc[l] are [kvDim, slots]: one key (value) row per slot,
	// a block's rows contiguous. vc is all 0 for a cache of keys only
	// (kv.KeysOnly: an MLA model's latents).
	kc, vc []cTensor
	// convState[l] and deltaState[l] are recurrent layer l's states,
	// [ConvStateFloats, stateSlots] and [DeltaStateFloats, stateSlots]
	// (graph_recurrent.go); nil for a model without recurrent layers, 0
	// at the other layers.
	convState, deltaState []cTensor
	stateSlots            int
	// stateParts are a state slot's tensors (allocStates).
	stateParts []statePart
	// hostStates are ReserveHostStates' host slots, one state (every
	// recurrent layer's convolution row, then its DeltaNet row) after the
	// other; hostStateBuf their page-locked buffer on a GPU.
	hostStates     []byte
	hostStateSlots int
	hostStateBuf   cBuf
	// kvLayers are the layers with a KV cache, in order (all but the
	// recurrent ones): a block's rows, layer after layer, in block I/O
	// and host copies.
	kvLayers []int
	// where maps a block id to its index among the blocks the iteration's
	// batch reaches (-1: not reached); reset after each prepare.
	where []int32
	// flashMax: batches of at most this many sequences run attention as
	// ggml_flash_attn_ext per sequence (see attn_seq.go), the CPU's (every
	// batch there); larger ones, and every batch on a GPU by default
	// (build-ggml-cuda.sh builds ggml without flash attention, GGML_CUDA_FA
	// off), the plain mul_mat/soft_max/mul_mat chain over the batch's
	// gathered blocks, whose ops every backend has. The current batch's
	// choice is s.flash. flashNote says why FlashMaxSeqs fell back to
	// the plain chain (Options.FlashFallback), for Device.
	flashMax  int
	flashNote string

	// host is the host tier of ReserveHostBlocks: hostBlocks blocks of
	// hostBlockBytes, in the cache's type.
	host       []byte
	hostBlocks int
	hostBuf    cBuf // host's page-locked buffer on a GPU
	// copyDone carries the result of the copies StartCopyBlocks runs
	// beside an iteration while copying is set.
	copyDone chan error
	copying  bool
	// inlineCopies makes StartCopyBlocks copy before it returns (tests:
	// the engine's schedule of overlapped copies without the copy thread).
	inlineCopies bool
	// deviceArgmax: Options.DeviceArgmax; argmaxRows counts the rows
	// answered with their token.
	deviceArgmax bool
	argmaxRows   int
	// exactSpan leaves the plain attention's gathered blocks unpadded
	// (tests: the reference for the padding; see prepare).
	exactSpan bool

	galloc cAlloc
	// tuner picks each graph's CPU thread count when Options.Threads was
	// left to the executor (nil: the pool's size, always).
	tuner *threadTuner
	// graph is the last iteration's graph, sig the current batch's
	// signature (see graph); graphsBuilt and graphsReused count them.
	graph                     graph
	sig                       []int64
	graphsBuilt, graphsReused int

	s scratch
}

var _ batch.Executor = (*Executor)(nil)

// scratch holds the host side of one iteration's inputs and outputs, grown to
// the largest batch seen and reused.
type scratch struct {
	ids, pos, outRows []int32
	// kIdx is every token's KV slot (block×blockSize + offset).
	kIdx []int64
	// blocks are the blocks attention gathers: with the plain chain the
	// batch's, in first-use order; per sequence, those of the sequences
	// whose blocks are not consecutive, sequence after sequence.
	blocks []int32
	// seqs are the sequences' shares of attention per sequence, rowIdx
	// every token's row (0 … n-1).
	seqs   []seqAttention
	rowIdx []int64
	mask   []float32
	mask16 []uint16 // the mask in F16, as flash attention takes it
	// maskSWA and maskSWA16 are the sliding layers' (attn_window.go).
	maskSWA   []float32
	maskSWA16 []uint16
	// ringIdx, ringRows, ringSeqs, ringMask and ringMask16 are the window
	// cache's (window_ring.go).
	ringIdx    []int64
	ringRows   []int32
	ringSeqs   []ringSeq
	ringMask   []float32
	ringMask16 []uint16
	tokens     []int32 // the sampled rows' argmax (deviceArgmax)
	// attnTemp are the tokens' attention temperatures (AttnTemperature).
	attnTemp []float32
	// flash: this batch's attention runs per sequence (flashMax).
	flash bool
	// groups, stateIdx and stateKeep are the recurrent layers' inputs
	// (graph_recurrent.go); slotSeen and slotStamp check the batch's
	// slots; pos4 are M-RoPE's positions.
	groups    []stateGroup
	stateIdx  []int32
	stateKeep []float32
	slotSeen  []uint64
	slotStamp uint64
	pos4      []int32
	// logits receives the sampled rows' logits, which the engine reads in
	// place (batch.ShareLogits). On a GPU it lies in the device's pinned
	// host buffer (logitsBuf), so the copy back runs at the host link's
	// speed instead of through a staging copy: 32 rows of a 152k vocabulary
	// are 19 MB a step.
	logits    []float32
	logitsBuf cBuf
}

// kvTypes are the cache types as ggml numbers them (ggml.h, enum ggml_type).
var kvTypes = map[kvcache.DType]int32{
	kvcache.DTypeF32: typeF32, kvcache.DTypeF16: typeF16, kvcache.DTypeBF16: typeBF16, kvcache.DTypeQ8_0: typeQ8_0,
}

// weightTypes are the GGUF tensor types the executor hands to ggml as stored.
var weightTypes = map[model.DType]bool{
	model.F32: true, model.F16: true, model.BF16: true, model.Q8_0: true,
	model.Q4_0: true, model.Q4_K: true, model.Q5_K: true, model.Q6_K: true,
	model.MXFP4: true,
}

// New loads the ggml libraries, initialises the device, copies m's weights
// into device buffers in their GGUF types and allocates the KV cache of
// numBlocks blocks of blockSize slots per layer.
func New(m *model.Model, numBlocks, blockSize int, opts Options) (*Executor, error) {
	e, err := newExecutor(m, numBlocks, blockSize, opts)
	if err != nil {
		return nil, fmt.Errorf("ggml executor: %w", err)
	}
	return e, nil
}

func newExecutor(m *model.Model, numBlocks, blockSize int, opts Options) (*Executor, error) {
	c := m.Config
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if numBlocks <= 0 || blockSize <= 0 {
		return nil, fmt.Errorf("%d blocks of %d slots: both must be positive", numBlocks, blockSize)
	}
	w := &m.Weights
	if w.TokenEmbedding == nil || w.OutputNorm == nil || len(w.Layers) != c.Layers {
		return nil, fmt.Errorf("model weights are incomplete")
	}
	var weightBytes int64
	for _, t := range w.Tensors() {
		if !weightTypes[t.Type] {
			return nil, fmt.Errorf("tensor %s has type %s, which this executor does not run (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4)", t.Name, t.Type)
		}
		if len(t.Shape) < 1 || len(t.Shape) > 3 {
			return nil, fmt.Errorf("tensor %s has shape %v; want 1 to 3 dimensions (3: a mixture of experts' stacked matrices)", t.Name, t.Shape)
		}
		weightBytes += int64(len(t.Data))
	}
	device := opts.Device
	if device == "" {
		device = DeviceCPU
	}
	lib, err := Open(opts.LibDir)
	if err != nil {
		return nil, err
	}
	threads := opts.Threads
	if threads <= 0 && device == DeviceCPU {
		threads = defaultThreads()
	}
	if opts.Poll < 0 || opts.Poll > 100 {
		return nil, fmt.Errorf("thread pool polling level %d: want 0-100", opts.Poll)
	}
	be, err := lib.newBackend(device, threads, opts.Poll, opts.CUDAGraphs)
	if err != nil {
		return nil, err
	}
	e := &Executor{lib: lib, a: &lib.api, be: be, m: m, cfg: c, numBlocks: numBlocks, blockSize: blockSize, kvDim: c.KVHeads * c.HeadDim,
		kv: KVGeometry(m, opts.KVCacheDType), sliding: slidingLayers(c)}
	if opts.WindowCache && e.sliding != nil {
		e.ring = newWindowRing(e.sliding, c.SlidingWindow, opts.WindowChunk)
		e.sliding, e.kv = nil, WindowKVGeometry(m, opts.KVCacheDType)
	}
	if c.RecurrentLayers() > 0 || e.ring != nil {
		e.stateSlots = opts.StateSlots
		if e.stateSlots <= 0 {
			e.stateSlots = DefaultStateSlots
		}
	}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	if err := e.kv.Validate(); err != nil {
		return nil, err
	}
	e.kvType, e.kvRow = kvTypes[e.kv.DType], int(e.kv.RowBytes())
	e.rawGather = e.onCPU() && e.kvType != typeF32 && e.kvRow%4 == 0 && int(e.a.rowSize(e.kvType, int64(c.HeadDim)))%4 == 0 && e.a.retypeWorks()
	kvBytes := e.kv.BytesPerBlock(blockSize)*int64(numBlocks) + e.stateBytes()*int64(e.stateSlots)
	if free, total := be.memory(); total > 0 {
		// Weights and KV up front, plus a margin for the compute graph. On
		// the CPU the weights may be in the page cache already and the KV
		// is paged in as used, so the bound is the machine's memory.
		need := uint64(weightBytes) + uint64(kvBytes) + 64<<20
		if device == DeviceCPU {
			free = total
		}
		if need > free {
			return nil, fmt.Errorf("the model needs %d MiB of %s memory (weights %d MiB, KV cache %d MiB for %d blocks) and the device has %d MiB free of %d MiB: use a smaller quantization or a smaller KV cache (--kv-cache-memory, --kv-cache-blocks)",
				need>>20, device, weightBytes>>20, kvBytes>>20, numBlocks, free>>20, total>>20)
		}
	}
	if e.onCPU() && opts.Threads <= 0 && be.Threads > 1 {
		e.tuner = newThreadTuner(be.Threads)
	}
	e.deviceArgmax = opts.DeviceArgmax
	switch {
	case opts.FlashMaxSeqs > 0:
		e.flashMax = opts.FlashMaxSeqs
		if err := e.checkFlash(); err != nil {
			if !opts.FlashFallback || !errors.Is(err, ErrNoFlashAttention) {
				return nil, err
			}
			e.flashMax, e.flashNote = 0, "plain attention: no flash-attention kernel for this cache"
		}
	case e.onCPU() && !opts.PlainAttention:
		e.flashMax = math.MaxInt
	}
	if err := e.loadWeights(opts.PlainWeights); err != nil {
		return nil, err
	}
	if err := e.allocKV(); err != nil {
		return nil, err
	}
	e.galloc = e.a.gallocrNew(e.a.defaultBuft(be.h))
	if e.galloc == 0 {
		return nil, fmt.Errorf("ggml_gallocr_new failed")
	}
	if !e.onCPU() {
		// A GPU kernel build that cannot run on this GPU fails at its first
		// launch, and ggml aborts the process there: let that be now, at
		// start, rather than at the first request. (On an H100 with the 580
		// driver, node-llama-cpp's prebuilt CUDA library aborts so with "the
		// provided PTX was compiled with an unsupported toolchain";
		// hack/build-ggml-cuda.sh builds one that runs.)
		if err := e.probe(); err != nil {
			return nil, fmt.Errorf("first forward pass on %s: %w", be.Name, err)
		}
		e.graphsBuilt = 0 // count the graphs of the batches after start
	}
	ok = true
	return e, nil
}

// ErrNoFlashAttention: the backend has no flash-attention kernel for the
// cache's type (New with Options.FlashMaxSeqs).
var ErrNoFlashAttention = errors.New("no flash attention")

// checkFlash reports whether the backend runs flash attention as
// seqAttention builds it: F32 queries over a view of the cache's keys and
// values, an F16 mask. A ggml built without its flash-attention kernels
// (CUDA's GGML_CUDA_FA off), or without them for the cache's type, says no.
func (e *Executor) checkFlash() error {
	a, c := e.a, e.cfg
	hd, heads, kvHeads, bs := int64(c.HeadDim), int64(c.Heads), int64(c.KVHeads), int64(e.blockSize)
	size := 16 * a.tensorOverhead()
	ctx := a.initCtx(initParams{MemSize: size, NoAlloc: true})
	if ctx == 0 {
		return fmt.Errorf("ggml_init of %d bytes failed", size)
	}
	defer a.freeCtx(ctx)
	q := a.permute(ctx, a.reshape3d(ctx, a.newTensor2d(ctx, typeF32, hd*heads, 1), hd, heads, 1), 0, 2, 1, 3)
	kv := func() cTensor {
		return a.permute(ctx, a.reshape3d(ctx, a.newTensor2d(ctx, e.kvType, int64(e.kvDim), bs), hd, kvHeads, bs), 0, 2, 1, 3)
	}
	k, v := kv(), kv()
	if r := int64(c.MLA.KVRank); r > 0 {
		// MLA's values are the first KVRank elements of each key row
		// (seqAttentionMLA), which the backend may run for some widths only.
		row := a.rowSize(e.kvType, hd)
		v = a.permute(ctx, a.view3d(ctx, a.newTensor2d(ctx, e.kvType, hd, bs), r, 1, bs, row, row, 0), 0, 2, 1, 3)
	}
	mask := a.newTensor2d(ctx, typeF16, bs, 1)
	if fa := a.flashAttnExt(ctx, q, k, v, mask, 1, 0, 0); !a.devSupportsOp(e.be.dev, fa) {
		return fmt.Errorf("%w (FlashMaxSeqs, --ggml-flash-max-seqs): ggml's %s backend cannot run it over a %s KV cache with heads of %d; build ggml with its flash-attention kernels for that type (hack/build-llama-server-cuda.sh builds them for f16) or leave it off", ErrNoFlashAttention, e.be.Name, e.kv.DType, hd)
	}
	return nil
}

// probe runs one token through the model in block 0 (whose slot it writes
// is written again before any sequence reads it).
func (e *Executor) probe() error {
	b := &batch.Batch{Seqs: []batch.Seq{{Tokens: []int32{0}, Blocks: []kvcache.BlockID{0}, Sample: true}}, NumTokens: 1, BlockSize: e.blockSize}
	return e.Execute(context.Background(), b, &batch.Output{Logits: make([][]float32, 1)})
}

// Device is a description of where the executor runs, for logs.
func (e *Executor) Device() string {
	if e.onCPU() {
		threads := fmt.Sprintf("%d threads", e.be.Threads)
		if e.tuner != nil {
			threads = fmt.Sprintf("up to %d threads, measured per graph", e.be.Threads)
		}
		return fmt.Sprintf("%s (%s, %s, %s, polling %d; ggml %s %s)", e.be.Name, e.be.Description, e.be.Variant, threads, e.be.Poll, e.lib.Version, e.lib.Commit)
	}
	attn := "plain attention"
	switch {
	case e.flashNote != "":
		attn = e.flashNote
	case e.flashMax > 0:
		attn = fmt.Sprintf("flash attention for batches of at most %d sequences", e.flashMax)
	}
	graphs := "on"
	if _, off := os.LookupEnv(EnvCUDADisableGraphs); off {
		graphs = "off"
	}
	return fmt.Sprintf("%s (%s, %s, %s; %s=%s, CUDA graphs %s; ggml %s %s)", e.be.Name, e.be.Description, e.be.Variant, attn, EnvCUDAPDL, os.Getenv(EnvCUDAPDL), graphs, e.lib.Version, e.lib.Commit)
}

// Weights says in which buffer types the weights lie (see weights.go), for
// the start-up log.
func (e *Executor) Weights() string { return e.placed.String() }

// KV is the executor's KV cache geometry, its type resolved.
func (e *Executor) KV() kvcache.Geometry { return e.kv }

// BufferBytes reports the bytes of the executor's ggml buffers: weights, KV
// cache and the compute graph's (which grows to the largest batch seen).
func (e *Executor) BufferBytes() (weights, kv, compute uint64) {
	weights = e.weightBytes
	if e.kvbuf != 0 {
		kv = uint64(e.a.bufferSize(e.kvbuf))
	}
	if e.galloc != 0 {
		compute = uint64(e.a.gallocrBufSize(e.galloc, 0))
	}
	return weights, kv, compute
}

// Close frees the executor's device memory. It does not close the model.
func (e *Executor) Close() {
	if e.a != nil {
		e.freeGraph()
	}
	if e.galloc != 0 {
		e.a.gallocrFree(e.galloc)
		e.galloc = 0
	}
	for _, b := range []*cBuf{&e.wbuf, &e.kvbuf, &e.s.logitsBuf, &e.hostBuf, &e.hostStateBuf} {
		if *b != 0 {
			e.a.bufferFree(*b)
			*b = 0
		}
	}
	for _, b := range append(e.mappedBufs, e.xbuf...) {
		e.a.bufferFree(b)
	}
	e.mappedBufs, e.xbuf = nil, nil
	e.s.logits, e.host, e.hostStates = nil, nil, nil // they may have been in logitsBuf, hostBuf, hostStateBuf
	e.wregion.free()
	e.kvregion.free()
	e.wregion, e.kvregion = nil, nil
	for _, c := range []*cCtx{&e.wctx, &e.kvctx} {
		if *c != 0 {
			e.a.freeCtx(*c)
			*c = 0
		}
	}
	for _, c := range e.xctx {
		e.a.freeCtx(c)
	}
	e.xctx = nil
	if e.be != nil {
		e.be.free()
	}
}

// newMetaCtx makes a context that holds tensor descriptions only; their
// data lives in backend buffers.
func (e *Executor) newMetaCtx(tensors int) (cCtx, error) {
	ctx := e.a.initCtx(initParams{MemSize: e.a.tensorOverhead() * uintptr(tensors), NoAlloc: true})
	if ctx == 0 {
		return 0, fmt.Errorf("ggml_init failed")
	}
	return ctx, nil
}

func (e *Executor) loadWeights(plain bool) error {
	w := &e.m.Weights
	ts := w.Tensors()
	newTensor := func(ctx cCtx, t *model.Tensor, name string) cTensor {
		var h cTensor
		switch len(t.Shape) {
		case 1:
			h = e.a.newTensor1d(ctx, int32(t.Type), int64(t.Shape[0]))
		case 2:
			h = e.a.newTensor2d(ctx, int32(t.Type), int64(t.Shape[0]), int64(t.Shape[1]))
		default:
			h = e.a.newTensor3d(ctx, int32(t.Type), int64(t.Shape[0]), int64(t.Shape[1]), int64(t.Shape[2]))
		}
		e.a.setName(h, name)
		return h
	}
	// Which matrices go to an extra buffer type (see weights.go): the
	// question is asked once per type and shape.
	var bufts []cBuft
	if e.onCPU() && !plain {
		bufts = e.extraBufts()
	}
	for _, b := range bufts {
		e.placed.bufts = append(e.placed.bufts, e.a.buftName(b))
	}
	type shape struct {
		typ           int32
		ne0, ne1, ne2 int64
	}
	asked := map[shape]cBuft{}
	bestBuft := func(t *model.Tensor) cBuft {
		if len(bufts) == 0 || t == nil || len(t.Shape) < 2 {
			return 0
		}
		k := shape{int32(t.Type), int64(t.Shape[0]), int64(t.Shape[1]), 1}
		if len(t.Shape) == 3 {
			k.ne2 = int64(t.Shape[2])
		}
		b, ok := asked[k]
		if !ok {
			if len(t.Shape) == 3 {
				b = e.mulMatIDBuft(bufts, k.typ, k.ne0, k.ne1)
			} else {
				b = e.mulMatBuft(bufts, k.typ, k.ne0, k.ne1)
			}
			asked[k] = b
		}
		return b
	}
	extra := map[*model.Tensor]cBuft{}
	for _, t := range matrices(w) {
		if b := bestBuft(t); b != 0 {
			extra[t] = b
		}
	}
	tied := e.cfg.TiedEmbeddings || w.Output == nil
	var headBuft cBuft // a tied head's copy, when an extra type runs it
	if tied {
		headBuft = bestBuft(w.TokenEmbedding)
	}

	ctx, err := e.newMetaCtx(len(ts) + 1)
	if err != nil {
		return err
	}
	e.wctx = ctx
	made := make(map[*model.Tensor]cTensor, len(ts))
	var rest []*model.Tensor // the tensors of the default buffer type
	for _, t := range ts {
		if extra[t] == 0 {
			made[t] = newTensor(ctx, t, t.Name)
			rest = append(rest, t)
		}
	}
	// The extra buffer types' tensors, one context and buffer each; ggml
	// repacks them as they are set.
	type copyTo struct {
		h cTensor
		t *model.Tensor
	}
	var sets []copyTo
	var head cTensor
	for _, b := range bufts {
		var mine []*model.Tensor
		for _, t := range matrices(w) {
			if t != nil && extra[t] == b {
				mine = append(mine, t)
			}
		}
		dupHead := tied && headBuft == b
		if len(mine) == 0 && !dupHead {
			continue
		}
		xctx, err := e.newMetaCtx(len(mine) + 1)
		if err != nil {
			return err
		}
		e.xctx = append(e.xctx, xctx)
		for _, t := range mine {
			made[t] = newTensor(xctx, t, t.Name)
			sets = append(sets, copyTo{made[t], t})
		}
		if dupHead {
			head = newTensor(xctx, w.TokenEmbedding, "output.weight")
			sets = append(sets, copyTo{head, w.TokenEmbedding})
		}
		buf := e.a.allocCtxFromBuft(xctx, b)
		if buf == 0 {
			return fmt.Errorf("could not allocate the %s weights", e.a.buftName(b))
		}
		e.xbuf = append(e.xbuf, buf)
		e.a.bufferSetUsage(buf, 1) // GGML_BACKEND_BUFFER_USAGE_WEIGHTS
		for _, t := range mine {
			e.placed.add(e.a.buftName(b), len(t.Data))
		}
		if dupHead {
			e.placed.add(e.a.buftName(b)+" (tied head's copy)", len(w.TokenEmbedding.Data))
		}
	}
	switch {
	case e.onCPU() && e.m.Mapped():
		if err := e.mapWeightsInPlace(rest, made); err != nil {
			return err
		}
		for _, t := range rest {
			e.placed.add("CPU (file mapping)", len(t.Data))
		}
	case e.onCPU():
		hs, sizes := make([]cTensor, len(rest)), make([]int, len(rest))
		for i, t := range rest {
			hs[i], sizes[i] = made[t], len(t.Data)
			e.placed.add("CPU", len(t.Data))
		}
		if e.wbuf, e.wregion, err = e.placeHost(hs, sizes); err != nil {
			return fmt.Errorf("weights: %w", err)
		}
	default:
		e.wbuf = e.a.allocCtxTensors(ctx, e.be.h)
		if e.wbuf == 0 {
			return fmt.Errorf("could not allocate %s memory for the weights", e.be.Name)
		}
		for _, t := range rest {
			e.placed.add(e.be.Name, len(t.Data))
		}
	}
	if e.wbuf != 0 {
		e.a.bufferSetUsage(e.wbuf, 1) // GGML_BACKEND_BUFFER_USAGE_WEIGHTS
		for _, t := range rest {
			sets = append(sets, copyTo{made[t], t})
		}
	}
	for _, c := range sets {
		if len(c.t.Data) > 0 {
			e.a.tensorSet(c.h, unsafe.Pointer(unsafe.SliceData(c.t.Data)), 0, uintptr(len(c.t.Data)))
		}
		e.weightBytes += uint64(len(c.t.Data))
	}
	if e.wbuf == 0 {
		for _, t := range rest {
			e.weightBytes += uint64(len(t.Data))
		}
	}
	// The architecture's weights by name; output.weight is the head,
	// for a tied model the embedding or its copy in an extra buffer type.
	byName := make(map[string]cTensor, len(made)+1)
	for t, h := range made {
		byName[t.Name] = h
	}
	if tied {
		byName["output.weight"] = byName[w.TokenEmbedding.Name]
		if head != 0 {
			byName["output.weight"] = head
		}
	}
	a, err := arch.Lookup(e.cfg.Arch)
	if err != nil {
		return err
	}
	e.fw, err = a.Bind(e.cfg, func(name string) arch.Tensor { return arch.Tensor(byName[name]) })
	return err
}

// allocKV allocates the KV cache of the layers that attend (a hybrid
// model's recurrent layers keep none: kc[l] and vc[l] are 0 there; a
// cache of keys only has no vc) and the recurrent layers' states.
func (e *Executor) allocKV() error {
	ctx, err := e.newMetaCtx(4*e.cfg.Layers + 1)
	if err != nil {
		return err
	}
	e.kvctx = ctx
	slots := int64(e.numBlocks * e.blockSize)
	e.kc, e.vc = make([]cTensor, e.cfg.Layers), make([]cTensor, e.cfg.Layers)
	var ts []cTensor
	var sizes []int
	for l := range e.cfg.Layers {
		if e.recurrent(l) || (e.ring != nil && e.ring.layer[l]) {
			continue
		}
		e.kc[l] = e.a.newTensor2d(ctx, e.kvType, int64(e.kvDim), slots)
		if !e.kv.KeysOnly {
			e.vc[l] = e.a.newTensor2d(ctx, e.kvType, int64(e.kvDim), slots)
		}
		e.kvLayers = append(e.kvLayers, l)
		for _, r := range e.layerRows(l) {
			ts, sizes = append(ts, r), append(sizes, int(slots)*e.kvRow)
		}
	}
	st, stSizes := e.allocStates(ctx)
	ts, sizes = append(ts, st...), append(sizes, stSizes...)
	if e.onCPU() {
		// Fresh anonymous memory is zero and paged in as blocks are used.
		if e.kvbuf, e.kvregion, err = e.placeHost(ts, sizes); err != nil {
			return fmt.Errorf("KV cache: %w", err)
		}
		return nil
	}
	e.kvbuf = e.a.allocCtxTensors(ctx, e.be.h)
	if e.kvbuf == 0 {
		return fmt.Errorf("could not allocate %d MiB of %s memory for the KV cache", e.kv.BytesPerBlock(e.blockSize)*int64(e.numBlocks)>>20, e.be.Name)
	}
	// Slots never written are read under a zero softmax weight: they must
	// hold finite numbers, not whatever the allocator left.
	e.a.bufferClear(e.kvbuf, 0)
	return nil
}

// layerRows are layer l's cache tensors in block I/O's order: its keys,
// then its values unless the cache keeps keys only.
func (e *Executor) layerRows(l int) []cTensor {
	rows := [2]cTensor{e.kc[l], e.vc[l]}
	return rows[:e.kv.RowsPerLayer()]
}

func (e *Executor) onCPU() bool { return e.be.Threads > 0 }

// Execute runs one iteration: see batch.Executor.
func (e *Executor) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n, err := e.check(b, out)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	e.copyStates(b.StateCopies)
	if err := e.run(b, out, n); err != nil {
		return fmt.Errorf("ggml executor: %w", err)
	}
	e.copyStates(b.StateSaves)
	return nil
}

// check validates the batch (batch.Validate) and returns its token count.
func (e *Executor) check(b *batch.Batch, out *batch.Output) (int, error) {
	n, err := batch.Validate(b, out, batch.Limits{BlockSize: e.blockSize, NumBlocks: e.numBlocks, ContextLen: e.cfg.ContextLen, VocabSize: e.cfg.VocabSize})
	if err != nil {
		return 0, fmt.Errorf("ggml executor: %w", err)
	}
	if err := e.checkRing(b); err != nil {
		return 0, fmt.Errorf("ggml executor: %w", err)
	}
	if err := e.checkStates(b); err != nil {
		return 0, fmt.Errorf("ggml executor: %w", err)
	}
	return n, nil
}

// prepare fills the host inputs for n tokens: ids, positions, KV slots,
// the rows whose logits are wanted, and what attention reads.
//
// With flash attention (the CPU's, flashMax) attention runs per sequence
// (preparePerSeq), and span is 0. Otherwise (the plain chain, other
// devices) it is the unified-cache rule: token t of sequence s may attend
// slot j only when j holds one of s's positions ≤ t's position. Shared
// prefix blocks appear in several sequences' tables and are visible to each
// of them; other sequences' slots are masked out. Only the blocks some
// sequence of the batch reaches are attended, gathered into one run, so a
// step's attention costs what the batch's contexts hold, not what the cache
// holds: with the whole cache (hundreds of thousands of slots on a GPU) the
// mask alone would be n × slots. span is then the number of gathered
// slots (blocks × block size).
func (e *Executor) prepare(b *batch.Batch, n int) (span int) {
	s, bs := &e.s, e.blockSize
	s.ids, s.pos = grow(s.ids, n), grow(s.pos, n)
	s.kIdx = grow(s.kIdx, n)
	s.outRows = s.outRows[:0]
	t := 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		for j, id := range sq.Tokens {
			p := sq.Pos + j
			s.ids[t], s.pos[t] = id, int32(p)
			s.kIdx[t] = int64(int(sq.Blocks[p/bs])*bs + p%bs)
			t++
		}
		if sq.Sample {
			s.outRows = append(s.outRows, int32(t-1))
		}
	}
	if e.convState != nil {
		e.prepareStates(b)
	}
	s.flash = len(b.Seqs) <= e.flashMax
	if e.ring != nil {
		e.prepareRing(b, n)
	}
	if s.flash {
		e.preparePerSeq(b, n)
		if e.sliding != nil {
			e.windowMaskPerSeq(b)
		}
		return 0
	}
	if e.where == nil {
		e.where = make([]int32, e.numBlocks)
		for i := range e.where {
			e.where[i] = -1
		}
	}
	s.blocks = s.blocks[:0]
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		for _, id := range sq.Blocks[:(sq.Pos+len(sq.Tokens)+bs-1)/bs] {
			if e.where[id] < 0 {
				e.where[id] = int32(len(s.blocks))
				s.blocks = append(s.blocks, int32(id))
			}
		}
	}
	// The gathered run is padded to a bucket of blocks (a repeat of its
	// first block, masked out for every token): the graph's shapes then
	// stay the same from step to step while the sequences' contexts grow,
	// so that it is reused (and replayed as a CUDA graph) until the batch
	// outgrows the bucket, instead of being built anew whenever some
	// sequence enters a new block.
	if !e.exactSpan {
		for pad := paddedBlocks(len(s.blocks)); len(s.blocks) < pad; {
			s.blocks = append(s.blocks, s.blocks[0])
		}
	}
	span = len(s.blocks) * bs
	// The mask in F32: 0 visible, -inf hidden.
	inf := float32(math.Inf(-1))
	s.mask = grow(s.mask, span*n)
	for i := range s.mask {
		s.mask[i] = inf
	}
	t = 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		for j := range sq.Tokens {
			for p := 0; p <= sq.Pos+j; p++ {
				s.mask[t*span+int(e.where[sq.Blocks[p/bs]])*bs+p%bs] = 0
			}
			t++
		}
	}
	if e.sliding != nil {
		e.windowMask(b, span)
	}
	for _, id := range s.blocks {
		e.where[id] = -1
	}
	return span
}

// paddedBlocks is the bucket n gathered blocks are padded to: n rounded
// up to a multiple of an eighth of the largest power of two not above it
// (at least 4), so that the padding adds at most an eighth to the
// attention's span beyond 32 blocks, and a batch whose contexts grow by a
// block or two a step keeps its shape for several steps.
func paddedBlocks(n int) int {
	step := 4
	if n >= 64 {
		step = 1 << (bits.Len(uint(n)) - 1) / 8
	}
	return (n + step - 1) / step * step
}

// logitsBuffer returns room for n logits: Go memory on the CPU, else the
// device's page-locked host memory where it has some, grown by doubling.
func (e *Executor) logitsBuffer(n int) ([]float32, error) {
	s := &e.s
	if cap(s.logits) >= n {
		return s.logits[:n], nil
	}
	buf, b, err := e.hostBytes(4 * 2 * n)
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	if s.logitsBuf != 0 {
		e.a.bufferFree(s.logitsBuf)
	}
	s.logitsBuf, s.logits = buf, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), 2*n)
	return s.logits[:n], nil
}

// hostBytes allocates n bytes of host memory, 8-byte aligned, for copies to
// and from the device: on a GPU, of the device's page-locked host buffer
// type where ggml offers one (CUDA: cudaMallocHost), so that they run at
// the host link's speed rather than through the driver's staging buffer
// (buf is then that buffer, for bufferFree); otherwise Go memory (buf 0).
func (e *Executor) hostBytes(n int) (buf cBuf, b []byte, err error) {
	var buft cBuft
	if !e.onCPU() && n > 0 {
		buft = e.a.devHostBuft(e.be.dev)
	}
	if buft == 0 {
		words := make([]uint64, (n+7)/8)
		return 0, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n), nil
	}
	buf = e.a.buftAlloc(buft, uintptr(n))
	if buf == 0 {
		return 0, nil, fmt.Errorf("could not allocate %d MiB of page-locked host memory", n>>20)
	}
	return buf, unsafe.Slice((*byte)(e.a.bufferBase(buf)), n), nil
}

// grow returns s with length n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
