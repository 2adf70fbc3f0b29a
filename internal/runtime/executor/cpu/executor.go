package cpu

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Options tune the executor.
type Options struct {
	// Threads is the number of goroutines a matrix multiply spreads over;
	// 0 means GOMAXPROCS.
	Threads int
	// KVCacheDType must be auto or f32: this executor's attention runs on
	// float32 keys and values (KVGeometry).
	KVCacheDType kvcache.DType
}

// Executor runs a model's forward pass over paged KV storage it allocates
// for numBlocks blocks of blockSize slots per layer.
type Executor struct {
	cfg                  model.Config
	numBlocks, blockSize int
	kvDim                int
	embed                *model.Tensor
	layers               []layer
	outNorm              []float32
	output               matrix
	invFreq              []float64

	// kCache and vCache hold, per layer, numBlocks*blockSize slots of kvDim;
	// hostK and hostV the host tier's hostBlocks blocks, laid out alike.
	kCache, vCache [][]float32
	hostK, hostV   [][]float32
	hostBlocks     int
	// copyDone carries the result of the copies StartCopyBlocks runs
	// beside an iteration while copying is set.
	copyDone chan error
	copying  bool

	pool *pool
	s    scratch
}

var _ batch.Executor = (*Executor)(nil)

type layer struct {
	attnNorm, ffnNorm   []float32
	q, k, v, o          matrix
	gate, up, down      matrix
	qBias, kBias, vBias []float32
}

// KVGeometry is the executor's KV cache for cfg: float32 keys and values,
// whatever the weights' type (the kernels widen F16 and BF16 rows to F32
// and keep activations in F32), so auto means f32 here; kvcache sizes it.
func KVGeometry(cfg model.Config) kvcache.Geometry {
	return kvcache.Geometry{Layers: cfg.Layers, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, DType: kvcache.DTypeF32}
}

// Runs reports whether the executor runs architecture name: it is the
// reference for llama and qwen2 (not qwen3) and the built-in model;
// the ggml executor runs every registered architecture.
func Runs(name string) bool { return name == model.ArchLlama || name == model.ArchQwen2 }

// runsRope refuses a RoPE the kernels do not implement: they rotate whole
// heads by unscaled angles (divided by Llama 3.1's rope_freqs.weight when
// the model has one), so partial rotary embeddings, any scaling (linear,
// YaRN, a model's attention factor) and the attention temperature are the
// ggml executor's.
func runsRope(c model.Config) error {
	p := c.RopeParams(arch.RopeNormal)
	if p.Dims != c.HeadDim {
		return fmt.Errorf("cpu executor: partial rotary embeddings (%d of %d dimensions) are unsupported; run this model with --executor ggml", p.Dims, c.HeadDim)
	}
	if p.FreqScale != 1 || p.ExtFactor != 0 || p.AttnFactor != 1 {
		s := c.RopeScaling
		typ := s.Type
		if typ == "" {
			typ = "linear"
		}
		return fmt.Errorf("cpu executor: rope scaling %q (factor %g, attention factor %g) is unsupported; run this model with --executor ggml", typ, s.Factor, p.AttnFactor)
	}
	if c.AttnTempScale != 0 {
		return fmt.Errorf("cpu executor: attention temperature scale %g is unsupported; run this model with --executor ggml", c.AttnTempScale)
	}
	return nil
}

// New prepares m's weights for the kernels (F32 and Q8_0 are used as
// stored, F16 and BF16 are widened to F32) and allocates the KV storage.
// The model must stay open while the executor is used.
func New(m *model.Model, numBlocks, blockSize int, opts Options) (*Executor, error) {
	c := m.Config
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("cpu executor: %w", err)
	}
	if !Runs(c.Arch) {
		return nil, fmt.Errorf("cpu executor: architecture %q: the pure-Go executor is the reference for %s and %s only; run this model with --executor ggml", c.Arch, model.ArchLlama, model.ArchQwen2)
	}
	if err := runsRope(c); err != nil {
		return nil, err
	}
	if numBlocks <= 0 || blockSize <= 0 {
		return nil, fmt.Errorf("cpu executor: %d blocks of %d slots: both must be positive", numBlocks, blockSize)
	}
	if d := opts.KVCacheDType.ResolveAuto(kvcache.DTypeF32); d != kvcache.DTypeF32 {
		return nil, fmt.Errorf("cpu executor: KV cache dtype %s: this executor keeps keys and values in f32 (use auto or f32; the ggml executor runs f16, bf16 and q8_0 caches)", d)
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	e := &Executor{cfg: c, numBlocks: numBlocks, blockSize: blockSize, kvDim: c.KVHeads * c.HeadDim}
	w := &m.Weights
	if w.TokenEmbedding == nil || w.OutputNorm == nil || len(w.Layers) != c.Layers {
		return nil, fmt.Errorf("cpu executor: model weights are incomplete")
	}
	for _, t := range w.Tensors() {
		if !t.Type.Decodable() {
			return nil, fmt.Errorf("cpu executor: tensor %s has type %s, which the cpu executor does not run (it runs F32, F16, BF16, Q8_0; --executor ggml runs %s)", t.Name, t.Type, t.Type)
		}
	}
	e.embed = w.TokenEmbedding
	e.outNorm = w.OutputNorm.Float32()
	var err error
	head := w.Output
	if c.TiedEmbeddings || head == nil {
		head = w.TokenEmbedding
	}
	if e.output, err = newMatrix(head); err != nil {
		return nil, fmt.Errorf("cpu executor: %w", err)
	}
	e.layers = make([]layer, c.Layers)
	for i, lw := range w.Layers {
		l := &e.layers[i]
		for _, p := range []struct {
			dst *matrix
			t   *model.Tensor
		}{{&l.q, lw.Q}, {&l.k, lw.K}, {&l.v, lw.V}, {&l.o, lw.O}, {&l.gate, lw.Gate}, {&l.up, lw.Up}, {&l.down, lw.Down}} {
			if *p.dst, err = newMatrix(p.t); err != nil {
				return nil, fmt.Errorf("cpu executor: layer %d: %w", i, err)
			}
		}
		l.attnNorm, l.ffnNorm = lw.AttnNorm.Float32(), lw.FFNNorm.Float32()
		if c.QKVBias {
			l.qBias, l.kBias, l.vBias = lw.QBias.Float32(), lw.KBias.Float32(), lw.VBias.Float32()
		}
	}
	e.invFreq = make([]float64, c.HeadDim/2)
	for i := range e.invFreq {
		e.invFreq[i] = math.Pow(float64(c.RopeTheta), -2*float64(i)/float64(c.HeadDim))
	}
	if c.RopeFreqFactors {
		// Llama 3.1's rope_freqs.weight divides each pair's frequency.
		var ff *model.Tensor
		for _, t := range w.Extra {
			if t.Name == "rope_freqs.weight" {
				ff = t
			}
		}
		if ff == nil || ff.Rows()*ff.Cols() != len(e.invFreq) {
			return nil, fmt.Errorf("cpu executor: the model has no rope_freqs.weight of %d factors", len(e.invFreq))
		}
		for i, f := range ff.Float32() {
			e.invFreq[i] /= float64(f)
		}
	}
	slots := numBlocks * blockSize * e.kvDim
	e.kCache, e.vCache = make([][]float32, c.Layers), make([][]float32, c.Layers)
	for i := range c.Layers {
		e.kCache[i], e.vCache[i] = make([]float32, slots), make([]float32, slots)
	}
	e.pool = newPool(threads)
	// The workers reference only the pool, so an unreachable executor can
	// stop them; Close does so at once.
	runtime.AddCleanup(e, func(p *pool) { p.close() }, e.pool)
	e.s.attnJob.scores = make([][]float32, e.pool.maxChunks())
	return e, nil
}

// Close stops the executor's worker goroutines. It does not close the model.
func (e *Executor) Close() { e.pool.close() }

// scratch is the per-iteration working memory, grown to the largest batch
// seen and reused.
type scratch struct {
	ids                  []int32
	pos, seqOf, slot     []int
	x, xn, q, k, v, attn []float32
	gate, up             []float32
	cos, sin             []float32
	samples              []int // token index of each sampled sequence
	headIn, logits       []float32
	mm                   matmulJob
	attnJob              attentionJob
	swiglu               swigluJob
}

// grow returns s with length n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

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
	c := e.cfg
	s := &e.s
	e.prepare(b, n)
	for t, id := range s.ids {
		e.embed.Row(int(id), s.x[t*c.Dim:(t+1)*c.Dim])
	}
	for li := range e.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.layer(li, b, n)
	}
	// Logits only for the last token of each sequence that samples.
	s.samples = s.samples[:0]
	start := 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		if sq.Sample {
			s.samples = append(s.samples, start+len(sq.Tokens)-1)
		}
		start += len(sq.Tokens)
	}
	if len(s.samples) == 0 {
		return nil
	}
	ns := len(s.samples)
	s.headIn = grow(s.headIn, ns*c.Dim)
	for i, t := range s.samples {
		rmsNorm(s.headIn[i*c.Dim:(i+1)*c.Dim], s.x[t*c.Dim:(t+1)*c.Dim], e.outNorm, c.NormEps)
	}
	s.logits = grow(s.logits, ns*c.VocabSize)
	e.matmul(&e.output, s.headIn, s.logits, nil, ns)
	batch.ShareLogits(b, out, s.logits, c.VocabSize)
	return nil
}

// check validates the batch (batch.Validate) and returns its token count.
func (e *Executor) check(b *batch.Batch, out *batch.Output) (int, error) {
	n, err := batch.Validate(b, out, batch.Limits{BlockSize: e.blockSize, NumBlocks: e.numBlocks, ContextLen: e.cfg.ContextLen, VocabSize: e.cfg.VocabSize})
	if err != nil {
		return 0, fmt.Errorf("cpu executor: %w", err)
	}
	return n, nil
}
