package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/scheduler/queue"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// TokenDecoder gives the raw bytes of one token; output text is the
// concatenation of its tokens' bytes.
type TokenDecoder interface {
	TokenBytes(id int32) []byte
}

// SpecialDecoder is a TokenDecoder whose TokenBytes leaves special
// (control) tokens out of the text, as vLLM's skip_special_tokens does by
// default. SpecialText is such a token's own text, nil for any other
// token; requests with Params.KeepSpecialTokens get it in their output.
type SpecialDecoder interface {
	TokenDecoder
	SpecialText(id int32) []byte
}

// Config configures an Engine. Zero values take the documented defaults.
type Config struct {
	// MaxNumSeqs bounds the sequences in one iteration (default 256).
	MaxNumSeqs int
	// MaxNumBatchedTokens bounds the tokens in one iteration; longer prompts
	// are prefilled in chunks (default 2048).
	MaxNumBatchedTokens int
	// LongPrefillTokenThreshold makes a sequence with more tokens than this
	// left to prefill a long prefill: it takes at most this many tokens of
	// an iteration's budget before the other running sequences and the
	// waiting requests have had theirs, then whatever they left, unless the
	// iteration gives another prompt its first token (so alone it still
	// fills the budget). A short request then joins and prefills beside a
	// long one instead of waiting for its whole prompt (vLLM's
	// long_prefill_token_threshold; see planLocked). 0: the default,
	// MaxNumBatchedTokens/4 (docs/benchmarks.md, "Short requests beside long
	// prefills"); negative: off, a prefill takes all the budget it can.
	LongPrefillTokenThreshold int
	// MaxNumPartialPrefills bounds the sequences in the middle of a prefill
	// at once: admitted, with tokens left to prefill after the iteration.
	// A request that would be one more is not admitted, unless its whole
	// prompt fits in what is left of the iteration's budget (vLLM's
	// max_num_partial_prefills; default 4).
	MaxNumPartialPrefills int
	// MaxLongPartialPrefills bounds how many of those are long prefills
	// (see LongPrefillTokenThreshold) that take tokens in one iteration;
	// the next long one is admitted but sits out until one of them is done,
	// so that long prompts do not share the budget (vLLM's
	// max_long_partial_prefills). Default MaxNumPartialPrefills, no bound
	// of its own: at the default threshold a 2k-token prompt is long too,
	// and holding it back behind a 30k-token one is what the threshold is
	// for (vLLM's default of 1 goes with a threshold of 4% of the context).
	MaxLongPartialPrefills int
	// MaxQueue bounds the waiting queue; Submit beyond it fails with
	// ErrQueueFull (default 4096).
	MaxQueue int
	// MaxModelLen is the model context in tokens (required).
	MaxModelLen int
	// VocabSize, when set, bounds prompt token ids.
	VocabSize int
	// KV sizes the paged KV cache (NumBlocks required).
	KV kvcache.Config
	// AgingRate is how many priority levels a waiting request gains per
	// second (default 0.1: a low request that waited 20 s ties a new high one).
	// Negative disables aging.
	AgingRate float64
	// WarmupIterations run through the executor in Start before serving.
	WarmupIterations int
	// IterationTimeout bounds one executor call (0 = none).
	IterationTimeout time.Duration
	// SamplingWorkers bounds the goroutines that draw an iteration's tokens
	// from the executor's logits (0: GOMAXPROCS; 1 or less: the engine's
	// loop alone).
	// Each sequence draws with its own generator, so the tokens do not
	// depend on it.
	SamplingWorkers int
	// EOS are the model's end-of-sequence token ids.
	EOS []int32
	// Decoder turns tokens into text (required).
	Decoder TokenDecoder
	// Clock is the time source (default: the wall clock).
	Clock clock.Clock
	// Observer, when set, receives per-iteration and per-request
	// statistics (see Observer for the contract).
	Observer Observer
	// Logger (default: slog.Default()).
	Logger *slog.Logger
	// HostStateSlots are host-memory slots for a hybrid model's recurrent
	// states (batch.HostStateKeeper): checkpoints the device evicts spill
	// there and are restored from there for later prefix hits; 0: none.
	HostStateSlots int
	// StateCheckpoints chooses which recurrent states an engine over a
	// hybrid model's executor (batch.StateKeeper) keeps for prefix hits
	// (state_slots.go); the zero value is CheckpointPrograms.
	StateCheckpoints CheckpointMode
	// SerialCopies runs every copy between the tiers before the iteration
	// even when the executor can overlap them with it
	// (batch.OverlappingCopier): for comparisons only.
	SerialCopies bool
}

func (c *Config) setDefaults() {
	if c.MaxNumSeqs <= 0 {
		c.MaxNumSeqs = 256
	}
	if c.MaxNumBatchedTokens <= 0 {
		c.MaxNumBatchedTokens = 2048
	}
	switch {
	case c.LongPrefillTokenThreshold == 0:
		c.LongPrefillTokenThreshold = max(c.MaxNumBatchedTokens/4, 1)
	case c.LongPrefillTokenThreshold < 0:
		c.LongPrefillTokenThreshold = 0
	}
	if c.MaxNumPartialPrefills == 0 {
		c.MaxNumPartialPrefills = 4
	}
	if c.MaxLongPartialPrefills == 0 {
		c.MaxLongPartialPrefills = c.MaxNumPartialPrefills
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = 4096
	}
	if c.AgingRate == 0 {
		c.AgingRate = 0.1
	} else if c.AgingRate < 0 {
		c.AgingRate = 0
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

type seqState uint8

const (
	stateWaiting seqState = iota
	stateRunning
	stateFinished
)

// sequence is a request inside the engine. Fields are guarded by Engine.mu.
type sequence struct {
	id       uint64
	req      Request
	stream   *Stream
	priority Priority
	salt     kvcache.Salt // of its prefix-cache entries

	// tokens are prompt + output; the KV of tokens[:numComputed] is computed.
	tokens      []int32
	promptLen   int
	numComputed int
	outTokens   int
	// blocks is the KV block table (the block manager's slice, valid until
	// the engine next grows or frees the sequence); caching it here keeps
	// the decode path free of block-manager lookups.
	blocks []kvcache.BlockID

	// loadUntil: the sequence is out of the batch until the overlapping
	// copies numbered up to it have landed (see overlap).
	loadUntil uint64

	// slot is its recurrent-state slot while hasSlot (stateSlots); ckpt
	// the checkpoint it saves into (-1: none), hashed its tokens' key up
	// to its last save.
	slot    int
	hasSlot bool
	ckpt    int
	hashed  prefixHasher

	cachedTokens int  // prefix-cache hit on first admission
	admitted     bool // admitted at least once
	preemptions  int
	state        seqState
	entry        *queue.Entry[*sequence]

	det    completion.Detector
	detP   completion.Params
	sp     sampling.Params
	rng    sampling.RNG
	banned []int32                 // EOS and stop ids, masked while outTokens < MinTokens
	lps    []sampling.TokenLogprob // this step's logprobs (scratch)
	// constraint restricts the output (nil: unconstrained).
	constraint sampling.Constraint
	// lastSpecial: the previous output token was a special token whose
	// text was kept; special is the scratch for a spaced special token.
	lastSpecial bool
	special     []byte
	seed        uint64
	t           timing
}

// Engine is the continuous-batching scheduler of one model replica.
type Engine struct {
	cfg       Config
	exec      batch.Executor
	kv        *kvcache.Manager
	blockSize int
	clk       clock.Clock
	log       *slog.Logger
	obs       Observer
	// samplesTokens: the executor draws tokens itself (batch.TokenSampler).
	samplesTokens bool
	// seqChunk bounds the tokens one sequence takes in one iteration
	// (batch.ChunkLimiter; MaxInt: no bound).
	seqChunk int

	mu       sync.Mutex
	waiting  *queue.Queue[*sequence]
	running  []*sequence // ordered by (priority, arrival, id): preemption takes from the tail
	nextID   uint64
	phase    phase
	wake     chan struct{}
	abort    chan struct{}
	loopDone chan struct{}
	cancelFn context.CancelFunc

	// copier moves KV blocks between the device and the host tier; nil
	// when the KV cache has no host tier. overlap is set when it can run
	// copies while an iteration computes (see overlap.go).
	copier  batch.BlockCopier
	overlap *overlap
	// slots are the executor's recurrent-state slots (a hybrid model's),
	// nil when it keeps none.
	slots *stateSlots

	// Iteration scratch, owned by whoever holds stepMu.
	stepMu sync.Mutex
	xfer   []kvcache.Transfer // this iteration's copies between the tiers
	// stateBuf is a recurrent state on its way between slots (move.go).
	stateBuf []byte
	b        batch.Batch
	out      batch.Output
	sched    []*sequence
	// capped are the indexes in b.Seqs of long prefills held to
	// LongPrefillTokenThreshold, which get the budget left at the end.
	capped []int
	// samplers are the sampling goroutines' scratch, [0] the loop's own;
	// ahead holds the tokens they drew before processLocked (sampleAhead).
	samplers []sampling.Sampler
	ahead    []drawn
	rows     []int
	sampleWG sync.WaitGroup
	deadline *iterDeadline
	iter     uint64
	// Observer scratch: stats is filled by whoever holds stepMu and mu;
	// reqStats by whoever holds mu.
	stats    IterationStats
	reqStats RequestStats
}

type phase uint8

const (
	phaseNew phase = iota // accepting; stepped by hand (tests, simulations)
	phaseRunning
	phaseDraining
	phaseStopped
)

// New builds an engine over an executor.
func New(cfg Config, exec batch.Executor) (*Engine, error) {
	cfg.setDefaults()
	if exec == nil {
		return nil, errors.New("engine: nil executor")
	}
	if cfg.Decoder == nil {
		return nil, errors.New("engine: Config.Decoder is required")
	}
	if cfg.MaxModelLen <= 0 {
		return nil, fmt.Errorf("engine: MaxModelLen must be > 0, got %d", cfg.MaxModelLen)
	}
	if cfg.MaxNumPartialPrefills < 1 {
		return nil, fmt.Errorf("engine: MaxNumPartialPrefills must be >= 1, got %d", cfg.MaxNumPartialPrefills)
	}
	if cfg.MaxLongPartialPrefills < 1 || cfg.MaxLongPartialPrefills > cfg.MaxNumPartialPrefills {
		return nil, fmt.Errorf("engine: MaxLongPartialPrefills must be in [1, MaxNumPartialPrefills=%d], got %d",
			cfg.MaxNumPartialPrefills, cfg.MaxLongPartialPrefills)
	}
	var slots *stateSlots
	if sk, ok := exec.(batch.StateKeeper); ok && sk.StateSlots() > 0 {
		if n := cfg.HostStateSlots; n > 0 {
			hk, ok := exec.(batch.HostStateKeeper)
			if !ok {
				return nil, fmt.Errorf("engine: %d host state slots need an executor that keeps states on the host (batch.HostStateKeeper); %T does not", n, exec)
			}
			if err := hk.ReserveHostStates(n); err != nil {
				return nil, fmt.Errorf("engine: reserve %d host state slots: %w", n, err)
			}
		}
		slots, cfg.MaxNumSeqs = newStateSlots(sk.StateSlots(), cfg.HostStateSlots, cfg.MaxNumSeqs, cfg.KV.EnablePrefixCache, cfg.StateCheckpoints)
	} else if cfg.HostStateSlots > 0 {
		return nil, fmt.Errorf("engine: %d host state slots for an executor that keeps no recurrent states", cfg.HostStateSlots)
	}
	kv, err := kvcache.New(cfg.KV)
	if err != nil {
		return nil, fmt.Errorf("engine: KV cache: %w", err)
	}
	e := &Engine{
		cfg:       cfg,
		exec:      exec,
		kv:        kv,
		samplers:  make([]sampling.Sampler, 1),
		blockSize: kv.BlockSize(),
		clk:       cfg.Clock,
		log:       cfg.Logger,
		obs:       cfg.Observer,
		wake:      make(chan struct{}, 1),
		deadline:  newIterDeadline(),
	}
	e.waiting = queue.New[*sequence](queue.Config{
		Capacity:  cfg.MaxQueue,
		AgingRate: cfg.AgingRate,
		Epoch:     e.clk.Now(),
	})
	e.b.BlockSize = e.blockSize
	e.slots = slots
	if ts, ok := exec.(batch.TokenSampler); ok {
		e.samplesTokens = ts.SamplesTokens()
	}
	e.seqChunk = math.MaxInt
	if cl, ok := exec.(batch.ChunkLimiter); ok && cl.MaxSeqTokens() > 0 {
		e.seqChunk = cl.MaxSeqTokens()
	}
	if n := cfg.KV.HostBlocks; n > 0 {
		c, ok := exec.(batch.BlockCopier)
		if !ok {
			return nil, fmt.Errorf("engine: a host KV tier (%d blocks) needs an executor that copies blocks (batch.BlockCopier); %T does not", n, exec)
		}
		if err := c.ReserveHostBlocks(n, kv.BlockSize()); err != nil {
			return nil, fmt.Errorf("engine: reserve %d host KV blocks: %w", n, err)
		}
		e.copier = c
		if oc, ok := c.(batch.OverlappingCopier); ok && !cfg.SerialCopies {
			e.overlap = newOverlap(oc, kv.NumBlocks(), n)
		}
	}
	if e.obs != nil {
		e.obs.CacheConfig(e.blockSize, kv.NumBlocks())
	}
	return e, nil
}

// KV exposes the block manager for read-only inspection (stats, tests). It
// must not be mutated from outside.
func (e *Engine) KV() *kvcache.Manager { return e.kv }

// BlockSize is the KV block size in tokens.
func (e *Engine) BlockSize() int { return e.blockSize }

// Config returns the effective configuration (defaults applied).
func (e *Engine) Config() Config { return e.cfg }

// Submit queues a request. It fails fast with ErrQueueFull, ErrDraining,
// ErrNotRunning or an *InvalidRequestError. ctx bounds the request's life:
// when it is done the request is cancelled.
func (e *Engine) Submit(ctx context.Context, r *Request) (*Stream, error) {
	if err := e.validate(r); err != nil {
		return nil, err
	}
	s := &sequence{
		req:       *r,
		priority:  r.Priority,
		promptLen: len(r.Prompt),
		salt:      kvcache.SaltOf(r.CacheSalt),
		ckpt:      -1,
	}
	s.tokens = make([]int32, len(r.Prompt), len(r.Prompt)+min(r.Params.MaxTokens, 256))
	copy(s.tokens, r.Prompt)
	p := &r.Params
	s.detP = completion.Params{
		MaxTokens:        p.MaxTokens,
		MinTokens:        p.MinTokens,
		IgnoreEOS:        p.IgnoreEOS,
		EOSTokenIDs:      e.cfg.EOS,
		StopTokenIDs:     p.StopTokenIDs,
		StopStrings:      p.Stop,
		IncludeStopStr:   p.IncludeStopStr,
		MaxResponseChars: p.MaxResponseChars,
		MaxTotalTokens:   e.cfg.MaxModelLen,
		PromptTokens:     len(r.Prompt),
	}
	s.det.Reset(&s.detP)
	s.constraint = r.Constraint
	if p.MinTokens > 0 && s.constraint == nil {
		if !p.IgnoreEOS {
			s.banned = append(s.banned, e.cfg.EOS...)
		}
		s.banned = append(s.banned, p.StopTokenIDs...)
	}
	s.sp = e.samplingParams(p)
	st := &Stream{id: r.ID, engine: e, seq: s, ready: make(chan struct{}, 1), started: make(chan struct{})}
	s.stream = st

	e.mu.Lock()
	switch e.phase {
	case phaseDraining:
		e.mu.Unlock()
		return nil, ErrDraining
	case phaseStopped:
		e.mu.Unlock()
		return nil, ErrNotRunning
	}
	now := e.clk.Now()
	e.nextID++
	s.id = e.nextID
	s.seed = p.Seed
	if !p.HasSeed {
		s.seed = splitmix(uint64(now.UnixNano()) ^ s.id)
	}
	s.rng = sampling.NewRNG(s.seed)
	s.t.arrival = now
	ent, err := e.waiting.Push(s, int(r.Priority), now)
	if err != nil {
		e.mu.Unlock()
		if errors.Is(err, queue.ErrQueueFull) {
			return nil, fmt.Errorf("%w (%d waiting)", ErrQueueFull, e.cfg.MaxQueue)
		}
		return nil, err
	}
	s.entry = ent
	if ctx != nil && ctx.Done() != nil {
		// Under the lock: once queued, the loop may finish the request
		// (and unregister the hook, in Stream.finish) as soon as we let
		// go. A ctx already done runs Cancel in its own goroutine, which
		// waits for the lock.
		st.stopAfter = context.AfterFunc(ctx, st.Cancel)
	}
	e.mu.Unlock()
	e.signal()
	return st, nil
}

// cancel handles Stream.Cancel: a waiting request finishes at once; a
// running one is finished by the next iteration, which frees its blocks.
func (e *Engine) cancel(st *Stream) {
	e.mu.Lock()
	s := st.seq
	if s.state == stateWaiting && e.waiting.Remove(s.entry) {
		e.finishLocked(s, completion.Cancelled, nil, e.clk.Now())
	}
	e.mu.Unlock()
	e.signal()
}

// cancelQueued handles Stream.CancelQueued.
func (e *Engine) cancelQueued(st *Stream) bool {
	e.mu.Lock()
	s := st.seq
	done := s.state == stateWaiting && !s.admitted && e.waiting.Remove(s.entry)
	if done {
		e.finishLocked(s, completion.Cancelled, ErrDraining, e.clk.Now())
	}
	e.mu.Unlock()
	return done
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Start runs the warmup iterations and then the iteration loop in its own
// goroutine. It returns ErrAlreadyRunning on a started engine.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.phase != phaseNew {
		e.mu.Unlock()
		if e.phase == phaseStopped {
			return ErrNotRunning
		}
		return ErrAlreadyRunning
	}
	e.phase = phaseRunning
	e.abort = make(chan struct{})
	e.loopDone = make(chan struct{})
	e.mu.Unlock()

	if err := e.warmup(ctx); err != nil {
		e.mu.Lock()
		e.phase = phaseNew
		e.mu.Unlock()
		return err
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancelFn = cancel
	go e.loop(base)
	return nil
}

// Running reports whether the loop runs and accepts requests.
func (e *Engine) Running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.phase == phaseRunning
}

// Stop drains: new requests are refused with ErrDraining and in-flight ones
// run to completion. When ctx is done first, what is left is aborted
// (finish reason cancelled, Err ErrStopped) and ctx.Err() is returned.
// Stop on an engine that was never started finishes waiting work the same
// way and returns at once.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	switch e.phase {
	case phaseStopped:
		e.mu.Unlock()
		return nil
	case phaseNew:
		e.phase = phaseStopped
		e.abortAllLocked()
		e.mu.Unlock()
		return nil
	}
	e.phase = phaseDraining
	e.mu.Unlock()
	e.signal()

	var err error
	select {
	case <-e.loopDone:
	case <-ctx.Done():
		err = ctx.Err()
		close(e.abort)
		e.cancelFn()
		<-e.loopDone
	}
	e.mu.Lock()
	e.phase = phaseStopped
	e.abortAllLocked()
	e.mu.Unlock()
	e.cancelFn()
	return err
}

func (e *Engine) loop(ctx context.Context) {
	defer close(e.loopDone)
	for {
		select {
		case <-e.abort:
			return
		default:
		}
		if r := e.step(ctx); r.progressed() {
			continue
		}
		e.mu.Lock()
		idle := len(e.running) == 0 && e.waiting.Len() == 0
		draining := e.phase == phaseDraining
		e.mu.Unlock()
		if idle && draining {
			return
		}
		select {
		case <-e.wake:
		case <-e.abort:
			return
		}
	}
}

// StepResult describes one iteration.
type StepResult struct {
	Scheduled int // sequences in the batch
	Tokens    int // tokens processed
	Sampled   int // tokens generated
	Finished  int // requests finished (incl. cancelled)
	Preempted int
	// Loading are sequences left out of the batch while their KV comes
	// back from the host tier beside it (an overlapping executor's).
	Loading int
	Err     error // executor error, if any
}

func (r StepResult) progressed() bool {
	return r.Scheduled > 0 || r.Finished > 0 || r.Preempted > 0 || r.Loading > 0
}

// Step runs one iteration by hand (tests and simulations drive the engine
// this way instead of Start). It must not be used while the loop runs.
func (e *Engine) Step(ctx context.Context) StepResult {
	return e.step(ctx)
}

// Pending reports the running and waiting request counts.
func (e *Engine) Pending() (running, waiting int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running), e.waiting.Len()
}

func (e *Engine) step(ctx context.Context) StepResult {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()

	var r StepResult
	e.stats.TimeToFirstToken = e.stats.TimeToFirstToken[:0]
	e.stats.InterTokenLatency = e.stats.InterTokenLatency[:0]
	e.stats.PromptTokens = 0
	e.stats.CopiedBefore, e.stats.CopiedBeside = 0, 0
	e.mu.Lock()
	now := e.clk.Now()
	if e.overlap != nil {
		e.overlap.begin(len(e.kv.Transfers()))
	}
	r.Preempted, r.Finished = e.planLocked(now)
	r.Scheduled, r.Tokens = len(e.b.Seqs), e.b.NumTokens
	// Copies between the tiers decided since the last iteration (offloads,
	// restores, host-tier prefix hits of the sequences just admitted) run
	// first: a block copied out may be in this batch, one copied in is read
	// by it. With an overlapping copier, those the batch does not touch run
	// while it computes instead (overlap.split).
	if xf := e.kv.Transfers(); len(xf) > 0 {
		e.xfer = append(e.xfer[:0], xf...)
		e.kv.ClearTransfers()
	}
	if e.overlap != nil {
		r.Loading = e.overlap.loading
		if len(e.xfer) > 0 || len(e.overlap.backlog) > 0 {
			e.xfer = e.overlap.split(e.xfer, r.Scheduled == 0)
		}
	}
	if r.Scheduled == 0 && len(e.xfer) == 0 {
		e.keepStateCopiesLocked()
		e.publishLocked(now, r)
		e.mu.Unlock()
		return r
	}
	e.mu.Unlock()

	var err error
	if n := len(e.xfer); n > 0 {
		if err = e.copyBlocks(ctx); err == nil {
			e.stats.CopiedBefore = n
		}
	}
	if e.overlap != nil {
		if err != nil {
			e.mu.Lock()
			r.Finished += e.abandonCopiesLocked(err, e.clk.Now())
			e.mu.Unlock()
		} else {
			e.overlap.landedFlushed()
		}
	}
	if r.Scheduled == 0 {
		r.Err = err
		e.mu.Lock()
		e.keepStateCopiesLocked()
		e.publishLocked(e.clk.Now(), r)
		e.mu.Unlock()
		return r
	}
	var copyErr error
	if err == nil {
		async := e.overlap != nil && e.overlap.start(ctx, &e.b)
		err = e.execute(ctx, r.Scheduled)
		if async {
			if copyErr = e.waitCopies(ctx); copyErr == nil {
				e.stats.CopiedBeside = len(e.overlap.async)
			}
		}
	}
	r.Err = cmp.Or(err, copyErr)

	e.mu.Lock()
	done := e.clk.Now()
	if copyErr != nil {
		r.Finished += e.abandonCopiesLocked(copyErr, done)
	}
	sampled, finished := e.processLocked(done, err)
	if e.slots != nil {
		e.slots.saved += int64(e.slots.ck.commit(err == nil))
		if err != nil {
			e.slots.ck.failCopies(e.b.StateCopies)
		}
	}
	r.Sampled, r.Finished = sampled, r.Finished+finished
	e.publishLocked(done, r)
	e.mu.Unlock()
	e.iter++
	return r
}

// keepStateCopiesLocked gives the planned state copies of an iteration
// that does not execute back to those pending, ahead of any decided since.
func (e *Engine) keepStateCopiesLocked() {
	if e.slots != nil && len(e.b.StateCopies) > 0 {
		e.slots.pending = append(slices.Clone(e.b.StateCopies), e.slots.pending...)
		e.b.StateCopies = e.b.StateCopies[:0]
	}
}

// execute runs the executor over the planned batch.
func (e *Engine) execute(ctx context.Context, scheduled int) error {
	e.prepareOutput()
	ectx := ctx
	if e.cfg.IterationTimeout > 0 {
		ectx = e.deadline.arm(ctx, e.cfg.IterationTimeout)
	}
	err := e.exec.Execute(ectx, &e.b, &e.out)
	if e.cfg.IterationTimeout > 0 {
		// An executor that finished despite the deadline produced valid
		// results: only its error fails the batch.
		if derr := e.deadline.disarm(); derr != nil && err == nil {
			e.log.Warn("iteration overran its timeout but completed", "iteration", e.iter, "timeout", e.cfg.IterationTimeout)
		}
	}
	if err != nil {
		err = fmt.Errorf("iteration %d: executor: %w", e.iter, err)
		if e.aborting() {
			// Stop's deadline cut the iteration short: an expected end of
			// a drain, reported by Stop's caller; not an executor failure.
			e.log.Info("drain deadline passed during an iteration; aborting its requests", "iteration", e.iter, "sequences", scheduled)
		} else {
			e.log.Error("executor failed; failing the batch", "iteration", e.iter, "sequences", scheduled, "err", err)
		}
	}
	return err
}

// copyBlocks carries out e.xfer. When the executor fails, the contents the
// copies moved are dropped from the cache, and the error fails the batch
// (some of its sequences may hold a block that was to be copied in).
func (e *Engine) copyBlocks(ctx context.Context) error {
	err := e.copier.CopyBlocks(ctx, e.xfer)
	if err != nil {
		e.mu.Lock()
		e.kv.FailTransfers(e.xfer)
		e.mu.Unlock()
		err = fmt.Errorf("iteration %d: copy %d KV blocks between device and host: %w", e.iter, len(e.xfer), err)
		if e.aborting() {
			e.log.Info("drain deadline passed during a KV block transfer; aborting the batch", "iteration", e.iter, "transfers", len(e.xfer))
		} else {
			e.log.Error("KV block transfer failed; dropping the blocks and failing the batch", "iteration", e.iter, "transfers", len(e.xfer), "err", err)
		}
	}
	e.xfer = e.xfer[:0]
	return err
}

// prepareOutput sizes the output slices for the batch, reusing capacity.
func (e *Engine) prepareOutput() {
	n := len(e.b.Seqs)
	if cap(e.out.Tokens) < n {
		e.out.Tokens = make([]int32, n, 2*n)
		e.out.Sampled = make([]bool, n, 2*n)
		e.out.Logits = make([][]float32, n, 2*n)
	}
	e.out.Tokens = e.out.Tokens[:n]
	e.out.Sampled = e.out.Sampled[:n]
	e.out.Logits = e.out.Logits[:n]
	clear(e.out.Sampled)
	clear(e.out.Logits)
}

// processLocked applies an iteration's results.
func (e *Engine) processLocked(now time.Time, execErr error) (sampled, finished int) {
	if execErr == nil {
		e.sampleAhead() // the loop below reads e.ahead only then
	}
	for i, s := range e.sched {
		sq := &e.b.Seqs[i]
		if execErr != nil {
			if e.aborting() {
				// Stop's deadline passed and cut the iteration short: an
				// abort, not an executor failure.
				e.finishLocked(s, completion.Cancelled, ErrStopped, now)
			} else {
				e.finishLocked(s, completion.Error, execErr, now)
			}
			finished++
			continue
		}
		before := s.numComputed
		s.numComputed += len(sq.Tokens)
		if s.numComputed/e.blockSize > before/e.blockSize {
			e.kv.Commit(s.id, s.tokens, s.numComputed) // a block became full
		}
		if !sq.Sample {
			if s.stream.cancelled.Load() {
				e.finishLocked(s, completion.Cancelled, nil, now)
				finished++
			}
			continue
		}
		var tok int32
		var lps []sampling.TokenLogprob
		switch {
		case e.ahead[i].ok:
			tok, lps = e.ahead[i].tok, e.ahead[i].lps
		case e.out.Logits[i] != nil:
			tok, lps = e.sample(&e.samplers[0], s, e.out.Logits[i])
		case e.out.Sampled[i] && s.req.Params.Logprobs:
			e.finishLocked(s, completion.Error, fmt.Errorf("executor sampled sequence %d itself: no logits for its logprobs", s.id), now)
			finished++
			continue
		case e.out.Sampled[i]:
			tok = e.out.Tokens[i]
			if s.constraint != nil {
				tok = e.constrainSampled(s, tok)
			}
		default:
			e.finishLocked(s, completion.Error, fmt.Errorf("executor produced no token for sequence %d", s.id), now)
			finished++
			continue
		}
		if s.constraint != nil && !s.constraint.Advance(tok) {
			e.finishLocked(s, completion.Error, constraintError(s.constraint, tok), now)
			finished++
			continue
		}
		sampled++
		s.tokens = append(s.tokens, tok)
		s.outTokens++
		e.observeToken(s, now)
		delta, reason := s.det.Add(tok, e.tokenText(s, tok), s.stream.cancelled.Load())
		if reason == completion.None && s.constraint != nil && s.constraint.Done() {
			// The output is complete: nothing may follow, not even EOS.
			s.stream.push(tok, true, delta, lps)
			e.finishLocked(s, completion.Stop, nil, now)
			finished++
			continue
		}
		if reason != completion.None {
			s.stream.push(tok, true, nil, lps)
			e.finishWithTextLocked(s, reason, nil, delta, now)
			finished++
			continue
		}
		s.stream.push(tok, true, delta, lps)
	}
	if finished > 0 {
		e.compactRunningLocked()
	}
	return sampled, finished
}

// tokenText is the text tok adds to s's output: the decoder's bytes, or a
// special token's own text when the request keeps them (a space before it
// when the previous token was special too and the request asks for that).
func (e *Engine) tokenText(s *sequence, tok int32) []byte {
	p := &s.req.Params
	if p.KeepSpecialTokens {
		if sd, ok := e.cfg.Decoder.(SpecialDecoder); ok {
			if t := sd.SpecialText(tok); t != nil {
				spaced := s.lastSpecial && p.SpecialTokenSpaces
				s.lastSpecial = true
				if spaced {
					s.special = append(append(s.special[:0], ' '), t...)
					return s.special
				}
				return t
			}
			s.lastSpecial = false
		}
	}
	return e.cfg.Decoder.TokenBytes(tok)
}

// sample picks s's next token from the executor's logits, the one
// per-token pipeline: log-probabilities of the model's own distribution
// (when asked for), then the logit processors (penalties, logit bias, bad
// words, the min_tokens bans), then the draw (temperature, top-k, min-p,
// top-p). The logits are restored before it returns. The returned
// logprobs (chosen token first, then the top alternatives) are s's
// scratch, valid until its next step.
func (e *Engine) sample(sm *sampling.Sampler, s *sequence, logits []float32) (int32, []sampling.TokenLogprob) {
	p := &s.req.Params
	var lse float64
	lps := s.lps[:0]
	if p.Logprobs {
		lse, lps = sm.Logprobs(logits, p.TopLogprobs, append(lps, sampling.TokenLogprob{}))
	}
	h := sampling.History{Prompt: s.tokens[:s.promptLen], Output: s.tokens[s.promptLen:], Banned: s.bannedNow()}
	sm.Process(logits, &s.sp, &h)
	// The token mask (constrained decoding): after the processors, before
	// the draw.
	if s.constraint != nil {
		sampling.ApplyMask(logits, s.constraint.Mask(e.remaining(s)))
	}
	tok := sm.Fallback(sm.Draw(logits, &s.sp, &s.rng), logits)
	sm.Restore(logits)
	if p.Logprobs {
		lps[0] = sampling.TokenLogprob{ID: tok, Logprob: float32(float64(logits[tok]) - lse)}
	}
	s.lps = lps
	return tok, lps
}

// drawn is a token sampleAhead drew for processLocked.
type drawn struct {
	tok int32
	lps []sampling.TokenLogprob
	ok  bool
}

// sampleAhead draws, before processLocked's loop and on up to
// SamplingWorkers goroutines, the next token of every sequence the executor
// returned logits for and that has no output constraint (a constraint's
// mask is computed in the loop). A draw reads and changes only its own
// sequence's state (generator, logprob scratch, history) and row of
// logits, so the tokens are those the loop would draw one by one. At 128
// sequences over a 151,936-token vocabulary a step's draws took 7 ms
// greedy and ~115 ms with temperature or logprobs on one core here
// (BenchmarkSampledStep).
func (e *Engine) sampleAhead() {
	n := len(e.sched)
	if cap(e.ahead) < n {
		e.ahead = make([]drawn, n, 2*n)
	}
	e.ahead = e.ahead[:n]
	clear(e.ahead)
	e.rows = e.rows[:0]
	for i, s := range e.sched {
		if e.b.Seqs[i].Sample && e.out.Logits[i] != nil && s.constraint == nil {
			e.rows = append(e.rows, i)
		}
	}
	w := cmp.Or(e.cfg.SamplingWorkers, runtime.GOMAXPROCS(0))
	w = min(w, len(e.rows)/2) // at least two draws a goroutine
	if w < 2 {
		return // the loop draws them
	}
	for len(e.samplers) < w {
		e.samplers = append(e.samplers, sampling.Sampler{})
	}
	part := func(k int) []int { return e.rows[k*len(e.rows)/w : (k+1)*len(e.rows)/w] }
	jobs := samplePool()
	e.sampleWG.Add(w - 1)
	for k := 1; k < w; k++ {
		jobs <- sampleJob{e: e, sm: &e.samplers[k], rows: part(k)}
	}
	e.sampleRows(&e.samplers[0], part(0))
	e.sampleWG.Wait()
}

// sampleRows draws the tokens of the batch rows rows into e.ahead.
func (e *Engine) sampleRows(sm *sampling.Sampler, rows []int) {
	for _, i := range rows {
		tok, lps := e.sample(sm, e.sched[i], e.out.Logits[i])
		e.ahead[i] = drawn{tok: tok, lps: lps, ok: true}
	}
}

// sampleJob is a share of an engine's draws for the sampling goroutines.
type sampleJob struct {
	e    *Engine
	sm   *sampling.Sampler
	rows []int
}

var samplingPool struct {
	once sync.Once
	jobs chan sampleJob
}

// samplePool returns the queue of the process's sampling goroutines,
// started on first use, one per CPU, and shared by every
// engine (a step hands them its shares and waits for them; they never
// wait on anything, so engines never wait on each other for long).
// Handing a share over allocates nothing, as a goroutine started per share
// would.
func samplePool() chan<- sampleJob {
	samplingPool.once.Do(func() {
		n := max(runtime.GOMAXPROCS(0), runtime.NumCPU())
		samplingPool.jobs = make(chan sampleJob, n)
		for range n {
			go func() {
				for j := range samplingPool.jobs {
					j.e.sampleRows(j.sm, j.rows)
					j.e.sampleWG.Done()
				}
			}()
		}
	})
	return samplingPool.jobs
}

// bannedNow is what s may not generate next: its banned ids until it has
// MinTokens tokens, then nothing.
func (s *sequence) bannedNow() []int32 {
	if s.outTokens < s.req.Params.MinTokens {
		return s.banned
	}
	return nil
}

// remaining is how many tokens s may still generate, the next included.
func (e *Engine) remaining(s *sequence) int {
	return min(s.req.Params.MaxTokens-s.outTokens, e.cfg.MaxModelLen-len(s.tokens))
}

// constraintError is why constraint c refused tok: its own failure, or
// a token nothing else was allowed against.
func constraintError(c sampling.Constraint, tok int32) error {
	if fc, ok := c.(FailingConstraint); ok {
		if err := fc.Err(); err != nil {
			return fmt.Errorf("output constraint: %w", err)
		}
	}
	return fmt.Errorf("sampled token %d violates the output constraint (nothing else was allowed)", tok)
}

// constrainSampled keeps a token an executor sampled by itself (it never
// saw the mask) when the constraint allows it, and otherwise draws one of
// the allowed tokens uniformly with the request's generator.
func (e *Engine) constrainSampled(s *sequence, tok int32) int32 {
	mask := s.constraint.Mask(e.remaining(s))
	if sampling.Allowed(mask, tok) {
		return tok
	}
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	if n == 0 {
		return tok
	}
	k := int(s.rng.Float64() * float64(n))
	for wi, w := range mask {
		if c := bits.OnesCount64(w); k >= c {
			k -= c
			continue
		}
		for ; k > 0; k-- {
			w &= w - 1
		}
		return int32(wi*64 + bits.TrailingZeros64(w))
	}
	return tok
}

// observeToken records a sampled token's latency for the iteration's stats
// (the step owns e.stats while it holds stepMu).
func (e *Engine) observeToken(s *sequence, now time.Time) {
	if s.t.firstTok.IsZero() {
		s.t.firstTok = now
		if e.obs != nil {
			e.stats.TimeToFirstToken = append(e.stats.TimeToFirstToken, now.Sub(s.t.arrival))
			e.stats.PromptTokens += s.promptLen
		}
	} else if e.obs != nil {
		e.stats.InterTokenLatency = append(e.stats.InterTokenLatency, now.Sub(s.t.lastTok))
	}
	s.t.lastTok = now
}

// finishLocked ends a sequence, releasing held-back text.
func (e *Engine) finishLocked(s *sequence, reason completion.Reason, err error, now time.Time) {
	e.finishWithTextLocked(s, reason, err, s.det.Finish(reason), now)
}

func (e *Engine) finishWithTextLocked(s *sequence, reason completion.Reason, err error, text []byte, now time.Time) {
	if s.state == stateFinished {
		return
	}
	shared := 0
	if s.state == stateRunning || e.kv.Has(s.id) {
		shared = e.kv.SharedShare(s.id)
		e.kv.Free(s.id, false)
	}
	e.slots.give(s)
	s.blocks = nil
	s.state = stateFinished
	u := Usage{PromptTokens: s.promptLen, CompletionTokens: s.outTokens, CachedTokens: s.cachedTokens,
		Preemptions: s.preemptions, SharedTokens: shared}
	s.stream.finish(text, Chunk{Done: true, FinishReason: reason, StopMatched: s.det.StopMatched(), Usage: u, Err: err})
	if e.obs != nil {
		e.reqStats = RequestStats{
			ID: s.req.ID, ProgramID: s.req.ProgramID, FinishReason: reason,
			PromptTokens: s.promptLen, GenerationTokens: s.outTokens, CachedTokens: s.cachedTokens,
			Preemptions: s.preemptions, MaxTokens: s.req.Params.MaxTokens,
			Arrival: s.t.arrival, Scheduled: s.t.scheduled, FirstToken: s.t.firstTok, LastToken: s.t.lastTok, Finished: now,
		}
		e.obs.RequestFinished(&e.reqStats)
	}
}

// compactRunningLocked drops finished sequences, keeping the order.
func (e *Engine) compactRunningLocked() {
	j := 0
	for _, s := range e.running {
		if s.state == stateRunning {
			e.running[j] = s
			j++
		}
	}
	clear(e.running[j:])
	e.running = e.running[:j]
}

// abortAllLocked ends everything still queued or running.
func (e *Engine) abortAllLocked() {
	now := e.clk.Now()
	for _, s := range e.running {
		e.finishLocked(s, completion.Cancelled, ErrStopped, now)
	}
	e.compactRunningLocked()
	for {
		ent, ok := e.waiting.Pop()
		if !ok {
			break
		}
		e.finishLocked(ent.Value, completion.Cancelled, ErrStopped, now)
	}
}

// publishLocked hands the observer the iteration's stats; it runs under the
// lock the step already holds, so the numbers are one consistent snapshot.
func (e *Engine) publishLocked(now time.Time, r StepResult) {
	if e.obs == nil {
		return
	}
	st := &e.stats
	st.Time = now
	st.Running, st.Waiting, st.KV = len(e.running), e.waiting.Len(), e.kv.Stats()
	st.States = e.slots.stats()
	st.Scheduled, st.Tokens, st.Sampled, st.Preempted, st.Finished = r.Scheduled, r.Tokens, r.Sampled, r.Preempted, r.Finished
	st.Loading = r.Loading
	e.obs.Iteration(st)
}

// splitmix scrambles a seed (SplitMix64 finaliser).
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// iterations is the number of executed iterations (tests).
func (e *Engine) iterations() uint64 {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	return e.iter
}

// DeprioritizePrefix makes the free cached KV blocks holding tokens' prefix
// the first to be evicted: a paused program's cache goes before the caches
// of programs that will run next.
func (e *Engine) DeprioritizePrefix(tokens []int32) {
	e.mu.Lock()
	e.kv.Deprioritize(tokens)
	e.mu.Unlock()
}

// OffloadPrefix moves the free cached KV blocks of tokens' prefix to the host
// tier (kvcache.Manager.Offload): a paused program's cache leaves the device
// for the programs that run, and comes back without recompute when the
// program resumes. Without a host tier it is DeprioritizePrefix. The copies
// run at the start of the next iteration; it returns the blocks moved.
func (e *Engine) OffloadPrefix(tokens []int32) int { return e.OffloadSaltedPrefix("", tokens) }

// OffloadSaltedPrefix is OffloadPrefix for the context of requests with
// this cache salt (Request.CacheSalt).
func (e *Engine) OffloadSaltedPrefix(cacheSalt string, tokens []int32) int {
	salt := kvcache.SaltOf(cacheSalt)
	e.mu.Lock()
	n := e.kv.OffloadSalted(salt, tokens)
	if e.slots != nil {
		// A hybrid model's program keeps its state beside its blocks: the
		// copy runs before the next iteration.
		if cp, ok := e.slots.ck.offload(salt, tokens, e.blockSize); ok {
			e.slots.pending = append(e.slots.pending, cp)
			e.slots.spilled++
		}
	}
	e.mu.Unlock()
	if n > 0 {
		e.signal() // an idle loop still carries out the copies
	}
	return n
}

// RestorePrefix brings the host-tier blocks of tokens' prefix back to the
// device ahead of the program's next request (kvcache.Manager.Restore), so
// the copies overlap with whatever runs before that request arrives. It
// returns the blocks moved; a request whose blocks are still on the host
// restores them itself when admitted.
func (e *Engine) RestorePrefix(tokens []int32) int { return e.RestoreSaltedPrefix("", tokens) }

// RestoreSaltedPrefix is RestorePrefix for the context of requests with
// this cache salt (Request.CacheSalt).
func (e *Engine) RestoreSaltedPrefix(cacheSalt string, tokens []int32) int {
	salt := kvcache.SaltOf(cacheSalt)
	e.mu.Lock()
	n := e.kv.RestoreSalted(salt, tokens)
	e.mu.Unlock()
	if n > 0 {
		e.signal()
	}
	return n
}

// KVStats returns the block manager's statistics.
func (e *Engine) KVStats() kvcache.Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kv.Stats()
}

// aborting reports whether Stop is aborting the loop (its deadline passed).
func (e *Engine) aborting() bool {
	if e.abort == nil {
		return false
	}
	select {
	case <-e.abort:
		return true
	default:
		return false
	}
}
