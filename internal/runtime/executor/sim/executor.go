package sim

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// Advancer is a virtual clock the executor moves forward by each step's
// modelled duration (clock.Virtual implements it).
type Advancer interface {
	Advance(d time.Duration)
}

// LengthDist draws a request's natural output length from its seed.
type LengthDist interface {
	Sample(seed uint64) int
}

// Options configure the cost model.
type Options struct {
	Accelerator Accelerator
	Geometry    Geometry
	// TensorParallel is the number of devices one replica spans (default 1).
	TensorParallel int
	// FLOPSEfficiency and BandwidthEfficiency are the achievable fractions of
	// the peaks (defaults 0.6 and 0.8, typical of well-tuned serving kernels).
	FLOPSEfficiency, BandwidthEfficiency float64
	// StepOverhead is the fixed per-iteration cost: scheduling, kernel
	// launches, sampling (default 1 ms).
	StepOverhead time.Duration
	// Virtual, when set, is advanced by every step (virtual time). Otherwise
	// Execute sleeps for the step time (real time).
	Virtual Advancer
	// OutputLen, when set, ends each request with EOS after a length drawn
	// from its seed; otherwise requests run to max_tokens.
	OutputLen LengthDist
	// HostLinks are the links to host memory this device shares with
	// others on its way there (its PCIe switch's uplink, its node's host
	// memory): copies between the KV tiers cross each of them after the
	// device's own link (see HostLink). None: the device's own link only.
	HostLinks []*HostLink
	// StateSlots is how many sequences' state slots the executor keeps
	// (batch.StateKeeper): a hybrid model's recurrent states, the window
	// cache's rings (Geometry.KeepsStates); required for such a geometry,
	// refused for any other. StateSlotsForDevice sizes it as the runtime
	// sizes the ggml executor's.
	StateSlots int
}

// Executor is the simulated accelerator.
type Executor struct {
	opts  Options
	vocab *Vocabulary
	tp    float64

	hostBlocks, blockSize int // host KV tier (ReserveHostBlocks)
	busy                  Busy
	async                 asyncCopy // started by StartCopyBlocks
	// slotPos is, per state slot (the device's, then ReserveHostStates'
	// host slots), the number of tokens its state has seen (-1: none
	// yet): Execute checks that every sequence resumes from a state at
	// its own position.
	slotPos []int
}

// Busy is the modelled time an executor has spent, by kind of work.
type Busy struct {
	// Compute is iterations (Execute); Copy is copies between the tiers,
	// wherever they ran; CopyStall is the part of Copy that nothing hid:
	// serial copies (CopyBlocks), and overlapping ones (StartCopyBlocks)
	// that outlasted the iteration they ran beside. StateCopy is the part
	// of Compute spent copying recurrent states between slots, the host's
	// included (batch.Batch.StateCopies and StateSaves).
	Compute, Copy, CopyStall, StateCopy time.Duration
}

// Busy reports the modelled time spent so far.
func (e *Executor) Busy() Busy { return e.busy }

var _ batch.Executor = (*Executor)(nil)

// New builds a simulated executor.
func New(opts Options) (*Executor, error) {
	if opts.Accelerator.PeakFLOPS <= 0 || opts.Accelerator.MemBandwidth <= 0 {
		return nil, fmt.Errorf("sim: accelerator %q has no peak rates", opts.Accelerator.Name)
	}
	if opts.Geometry.Layers <= 0 || opts.Geometry.Vocab <= 2 {
		return nil, fmt.Errorf("sim: invalid model geometry %q", opts.Geometry.Name)
	}
	if opts.TensorParallel <= 0 {
		opts.TensorParallel = 1
	}
	if opts.FLOPSEfficiency <= 0 {
		opts.FLOPSEfficiency = 0.6
	}
	if opts.BandwidthEfficiency <= 0 {
		opts.BandwidthEfficiency = 0.8
	}
	if opts.StepOverhead == 0 {
		opts.StepOverhead = time.Millisecond
	}
	switch g := &opts.Geometry; {
	case g.KeepsStates() && opts.StateSlots <= 0:
		return nil, fmt.Errorf("sim: %s keeps %d bytes of state a sequence (recurrent layers, window rings): it needs state slots (Options.StateSlots), got %d", g.Name, g.StateBytes(), opts.StateSlots)
	case !g.KeepsStates() && opts.StateSlots != 0:
		return nil, fmt.Errorf("sim: %s has no recurrent layers or window rings to keep %d state slots for", g.Name, opts.StateSlots)
	case g.Hybrid():
		if err := g.Recurrent.Validate(); err != nil {
			return nil, fmt.Errorf("sim: %s: %w", g.Name, err)
		}
	}
	e := &Executor{opts: opts, vocab: NewVocabulary(opts.Geometry.Vocab), tp: float64(opts.TensorParallel)}
	e.slotPos = make([]int, opts.StateSlots)
	for i := range e.slotPos {
		e.slotPos[i] = -1
	}
	return e, nil
}

// StateSlots implements batch.StateKeeper: the state slots of a model
// that keeps states (0 for others).
func (e *Executor) StateSlots() int { return e.opts.StateSlots }

// MaxSeqTokens implements batch.ChunkLimiter: with window rings, a ring
// holds the window and one chunk, so a sequence takes at most
// WindowChunk tokens an iteration, as on the ggml executor; else no
// bound.
func (e *Executor) MaxSeqTokens() int {
	if e.opts.Geometry.RingBytes() == 0 {
		return 0
	}
	return WindowChunk
}

var _ batch.ChunkLimiter = (*Executor)(nil)

var _ batch.StateKeeper = (*Executor)(nil)

var _ batch.HostStateKeeper = (*Executor)(nil)

// ReserveHostStates adds n host slots (batch.HostStateKeeper), numbered
// after the device's, replacing those reserved before.
func (e *Executor) ReserveHostStates(n int) error {
	if !e.opts.Geometry.KeepsStates() {
		return fmt.Errorf("sim: %s keeps no states", e.opts.Geometry.Name)
	}
	if n < 0 {
		return fmt.Errorf("sim: %d host state slots", n)
	}
	if n > 0 && e.opts.Accelerator.HostLinkBandwidth <= 0 {
		return fmt.Errorf("sim: accelerator %q has no host link bandwidth for host state slots", e.opts.Accelerator.Name)
	}
	e.slotPos = e.slotPos[:e.opts.StateSlots]
	for range n {
		e.slotPos = append(e.slotPos, -1)
	}
	return nil
}

// StateCopyTime is the modelled duration of n copies of a sequence's
// state slot (recurrent state, rings) between slots in device memory: each device reads and
// writes its shard of the state at BandwidthEfficiency of its memory
// bandwidth.
func (e *Executor) StateCopyTime(n int) time.Duration {
	if n == 0 {
		return 0
	}
	bytes := 2 * float64(n) * float64(e.opts.Geometry.StateBytes()) / e.tp
	return time.Duration(bytes / (e.opts.Accelerator.MemBandwidth * e.opts.BandwidthEfficiency) * float64(time.Second))
}

// StateHostCopyTime is the modelled duration of moving out states to host
// slots and in states back: each device moves its shard of every state
// over its own host link, both directions at once, at
// BandwidthEfficiency of the link's peak (as TransferTime moves blocks;
// the links it shares with other devices are not charged for states).
func (e *Executor) StateHostCopyTime(out, in int) time.Duration {
	if out == 0 && in == 0 {
		return 0
	}
	bytes := float64(max(out, in)) * float64(e.opts.Geometry.StateBytes()) / e.tp
	sec := bytes / (e.opts.Accelerator.HostLinkBandwidth * e.opts.BandwidthEfficiency)
	return time.Duration(math.Ceil(sec*float64(time.Second))) + transferLatency
}

// stateCopiesTime charges the batch's state copies: between device
// slots at the memory bandwidth, to and from host slots over the host
// link.
func (e *Executor) stateCopiesTime(b *batch.Batch) time.Duration {
	dev, out, in := 0, 0, 0
	for _, cps := range [2][]batch.StateCopy{b.StateCopies, b.StateSaves} {
		for _, c := range cps {
			switch fromHost, toHost := c.From >= e.opts.StateSlots, c.To >= e.opts.StateSlots; {
			case toHost && !fromHost:
				out++
			case fromHost && !toHost:
				in++
			case !fromHost && !toHost:
				dev++
			default:
				in, out = in+1, out+1 // host to host: through the device
			}
		}
	}
	return e.StateCopyTime(dev) + e.StateHostCopyTime(out, in)
}

// Geometry is the model the executor simulates.
func (e *Executor) Geometry() Geometry { return e.opts.Geometry }

// Vocabulary is the synthetic token vocabulary (the engine's decoder).
func (e *Executor) Vocabulary() *Vocabulary { return e.vocab }

// EOS is the synthetic end-of-sequence token.
func (e *Executor) EOS() int32 { return e.vocab.EOS() }

// StepTime is the modelled duration of one iteration:
// max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth) per device,
// plus tensor-parallel all-reduces and the fixed overhead.
//
// FLOPs are the active parameters' (a mixture of experts runs ExpertsUsed
// of its routed experts a token) and attention's. Bytes are the weights
// the step reads, once per iteration whatever the batch size (why
// batching pays): all of a dense model's; a mixture of experts' dense
// weights and, per MoE layer, the routed experts its tokens touch
// (Geometry.WeightBytesRead, uniform routing assumed). Plus the KV the
// batch reads, each layer group its own positions: a sliding-window layer
// only the last SlidingWindow, whatever the context.
//
// A hybrid model's recurrent layers attend over nothing: each token costs
// its projections (in the active parameters) and the DeltaNet update of
// every value head's state (recurrentFLOPsPerToken), linear in the tokens
// whatever the context; each sequence of the batch reads its state once
// and writes it back (RecurrentStateBytes twice), a prefill chunk as a
// decode step. The window cache's rings cost what the paged sliding
// layers do: the step reads the window's cells only, as above. Copies of
// states between slots are charged apart (StateCopyTime).
func (e *Executor) StepTime(b *batch.Batch) time.Duration {
	g := &e.opts.Geometry
	a := &e.opts.Accelerator
	embed := int64(g.Vocab) * int64(g.Hidden)
	// Active linear parameters: the output projection runs for sampled
	// tokens only (below), the input embedding is a lookup.
	linearParams := float64(g.ActiveParams() - embed)
	groups := g.KVLayerGroups()
	pair := g.attnFLOPsPerPair()
	var flops, kvBytes float64
	sampled := 0
	for i := range b.Seqs {
		s := &b.Seqs[i]
		n, p := len(s.Tokens), s.Pos
		for _, gr := range groups {
			// Each new token attends to the earlier positions its layer
			// keeps and to itself.
			flops += pair * float64(gr.Layers) * attendedPairs(p, n, gr.Window)
			kvBytes += float64(gr.Layers) * float64(gr.BytesPerTokenPerLayer) * float64(positionsRead(p, n, gr.Window))
		}
		if s.Sample {
			sampled++
		}
	}
	tokens := float64(b.NumTokens)
	flops += 2*linearParams*tokens + 2*float64(embed)*float64(sampled)
	flops += g.recurrentFLOPsPerToken() * tokens
	kvBytes += 2 * float64(g.RecurrentStateBytes()) * float64(len(b.Seqs))
	kvSplit := e.tp
	if g.mla() {
		kvSplit = 1 // every device holds and reads the whole latent
	}
	bytes := g.WeightBytesRead(b.NumTokens)/e.tp + kvBytes/kvSplit
	compute := flops / e.tp / (a.PeakFLOPS * e.opts.FLOPSEfficiency)
	memory := bytes / (a.MemBandwidth * e.opts.BandwidthEfficiency)
	sec := math.Max(compute, memory)
	if e.opts.TensorParallel > 1 && a.LinkBandwidth > 0 {
		// Two ring all-reduces of the activations per layer.
		const launch = 5e-6
		msg := tokens * float64(g.Hidden) * float64(g.DTypeBytes)
		sec += 2 * float64(g.Layers) * (launch + 2*(e.tp-1)/e.tp*msg/a.LinkBandwidth)
	}
	return time.Duration(sec*float64(time.Second)) + e.opts.StepOverhead
}

// advanceStates follows the batch's states (recurrent, rings) as the ggml
// executor moves them: StateCopies, then every sequence's state over its
// tokens, then StateSaves. It refuses a sequence that does not resume
// from a state at its own position (an engine bug the tokens would not
// show: the sim's tokens do not depend on the state).
func (e *Executor) advanceStates(b *batch.Batch) error {
	if len(e.slotPos) == 0 {
		return nil
	}
	copyAll := func(cps []batch.StateCopy) error {
		for _, c := range cps {
			if c.From < 0 || c.From >= len(e.slotPos) || c.To < 0 || c.To >= len(e.slotPos) {
				return fmt.Errorf("sim: state copy %d → %d outside %d slots", c.From, c.To, len(e.slotPos))
			}
			e.slotPos[c.To] = e.slotPos[c.From]
		}
		return nil
	}
	if err := copyAll(b.StateCopies); err != nil {
		return err
	}
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if s.State < 0 || s.State >= e.opts.StateSlots {
			return fmt.Errorf("sim: sequence %d: state slot %d outside the device's %d", s.SeqID, s.State, e.opts.StateSlots)
		}
		if s.Pos > 0 && e.slotPos[s.State] != s.Pos {
			return fmt.Errorf("sim: sequence %d resumes at position %d from state slot %d, which holds the state after %d tokens",
				s.SeqID, s.Pos, s.State, e.slotPos[s.State])
		}
		e.slotPos[s.State] = s.Pos + len(s.Tokens)
	}
	return copyAll(b.StateSaves)
}

// attendedPairs is the (query, key) pairs of n new tokens after p earlier
// ones, each attending to itself and the earlier positions within window
// (0: all): the sum over positions j = p+1 … p+n of min(j, window).
func attendedPairs(p, n, window int) float64 {
	lo, hi := float64(p+1), float64(p+n)
	if window <= 0 || p+n <= window {
		return float64(n) * (lo + hi) / 2
	}
	w := float64(window)
	if p+1 > window {
		return float64(n) * w
	}
	return (lo+w)*(w-lo+1)/2 + (hi-w)*w
}

// positionsRead is the KV positions n new tokens after p earlier ones
// read: all p+n, or within a window only the last window-1 earlier ones
// and the new ones.
func positionsRead(p, n, window int) int {
	if window <= 0 {
		return p + n
	}
	return min(p, window-1) + n
}

// SamplesTokens implements batch.TokenSampler: the sim emits synthetic
// tokens, never logits.
func (e *Executor) SamplesTokens() bool { return true }

var _ batch.TokenSampler = (*Executor)(nil)

// Execute models one iteration and emits synthetic tokens: token k of a
// request is a function of its seed and position only, so a request yields
// the same tokens alone, batched, or recomputed after preemption.
func (e *Executor) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	if err := e.advanceStates(b); err != nil {
		return err
	}
	copies := e.stateCopiesTime(b)
	d := e.StepTime(b) + copies
	e.busy.Compute += d
	e.busy.StateCopy += copies
	if e.async.pending {
		e.async.overlapped += d
	}
	if e.opts.Virtual != nil {
		e.opts.Virtual.Advance(d)
	} else if err := sleep(ctx, d); err != nil {
		return err
	}
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if !s.Sample {
			continue
		}
		pos := s.Pos + len(s.Tokens) // position of the token to produce
		out.Tokens[i] = e.token(s.Seed, pos, pos-s.PromptLen)
		out.Sampled[i] = true
	}
	return nil
}

// token is output token k (0-based) at sequence position pos.
func (e *Executor) token(seed uint64, pos, k int) int32 {
	if e.opts.OutputLen != nil {
		if n := max(1, e.opts.OutputLen.Sample(seed)); k == n-1 {
			return e.vocab.EOS()
		}
	}
	return e.vocab.Word(mix(seed, uint64(pos)))
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func mix(a, b uint64) uint64 {
	x := a ^ (b * 0x9e3779b97f4a7c15)
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Vocabulary maps synthetic token ids to short words; the last id is EOS.
type Vocabulary struct {
	size int
	text []byte
	off  []int32
}

var words = []string{"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "on", "this", "by",
	"model", "token", "cache", "agent", "tool", "call", "step", "file", "test", "patch", "error", "value",
	"return", "func", "if", "else", "loop", "data", "read", "write", "plan", "next", "then", "check", "run", "fix"}

// NewVocabulary builds a vocabulary of size ids.
func NewVocabulary(size int) *Vocabulary {
	v := &Vocabulary{size: size, off: make([]int32, size+1)}
	for id := range size {
		v.off[id] = int32(len(v.text))
		switch {
		case id == size-1: // EOS has no text
		case id < len(words):
			v.text = append(v.text, ' ')
			v.text = append(v.text, words[id]...)
		default:
			v.text = append(v.text, ' ')
			v.text = append(v.text, words[id%len(words)]...)
			v.text = strconv.AppendInt(v.text, int64(id/len(words)), 10)
		}
	}
	v.off[size] = int32(len(v.text))
	return v
}

// Size is the vocabulary size.
func (v *Vocabulary) Size() int { return v.size }

// EOS is the end-of-sequence id.
func (v *Vocabulary) EOS() int32 { return int32(v.size - 1) }

// Word picks a non-EOS token from a hash.
func (v *Vocabulary) Word(h uint64) int32 {
	// Favour the common words, as text does: half the draws come from them.
	if h&1 == 0 {
		return int32((h >> 1) % uint64(len(words)))
	}
	return int32((h >> 1) % uint64(v.size-1))
}

// TokenBytes is the text of a token.
func (v *Vocabulary) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= v.size {
		return nil
	}
	return v.text[v.off[id]:v.off[id+1]]
}

// Encode maps text to tokens word by word (for serving the sim executor
// over HTTP: prompt length is what the cost model needs). Words of the
// vocabulary map to their ids; others hash to an id.
func (v *Vocabulary) Encode(text string) []int32 {
	var out []int32
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := text[start:end]
		id := int32(-1)
		for i, cw := range words {
			if cw == w {
				id = int32(i)
				break
			}
		}
		if id < 0 {
			var h uint64 = 14695981039346656037
			for j := 0; j < len(w); j++ {
				h = (h ^ uint64(w[j])) * 1099511628211
			}
			id = int32(h % uint64(v.size-1))
		}
		out = append(out, id)
		start = -1
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
		}
	}
	flush(len(text))
	if len(out) == 0 {
		out = append(out, 0)
	}
	return out
}

// LogNormal is a log-normal length distribution with the given mean and
// shape, clamped to [Min, Max].
type LogNormal struct {
	Mean, Sigma float64
	Min, Max    int
}

// Sample draws a length deterministically from seed.
func (l LogNormal) Sample(seed uint64) int {
	u1 := (float64(mix(seed, 1)>>11) + 0.5) / (1 << 53)
	u2 := (float64(mix(seed, 2)>>11) + 0.5) / (1 << 53)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	mu := math.Log(l.Mean) - l.Sigma*l.Sigma/2
	n := int(math.Round(math.Exp(mu + l.Sigma*z)))
	if l.Min > 0 && n < l.Min {
		n = l.Min
	}
	if l.Max > 0 && n > l.Max {
		n = l.Max
	}
	return n
}
