package sim

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestHybridProfilesMatchPublished: each hybrid profile's parameters,
// computed from its config, are the publisher's total (text decoder only:
// the Qwen3.6 checkpoints' vision encoder and MTP layer are left out, so
// the 27B's 27.78B of safetensors count 26.9B here); its active count is
// published only as the "A3B" of its name. Its KV is that of its
// attending layers only, and its recurrent state per sequence is counted
// by hand from the config (F32: per DeltaNet layer, 3 inputs of the
// q/k/v convolution's channels and a 128×128 matrix per value head).
func TestHybridProfilesMatchPublished(t *testing.T) {
	for _, c := range []struct {
		name                string
		total, active       float64
		layers, attending   int
		kvPerToken          int64
		stateBytes          int64
		convChannels, heads int
	}{
		{"qwen3.6-27b", 27e9, 0, 64, 16, 16 * 2 * 4 * 256 * 2, 48 * 4 * (3*(2*16*128+48*128) + 48*128*128), 2*16*128 + 48*128, 48},
		{"qwen3.6-35b-a3b", 35e9, 3e9, 40, 10, 10 * 2 * 2 * 256 * 2, 30 * 4 * (3*(2*16*128+32*128) + 32*128*128), 2*16*128 + 32*128, 32},
		{"qwen3-coder-next", 80e9, 3e9, 48, 12, 12 * 2 * 2 * 256 * 2, 36 * 4 * (3*(2*16*128+32*128) + 32*128*128), 2*16*128 + 32*128, 32},
		{"qwen3-coder-next-fp8", 80e9, 3e9, 48, 12, 12 * 2 * 2 * 256 * 2, 36 * 4 * (3*(2*16*128+32*128) + 32*128*128), 2*16*128 + 32*128, 32},
	} {
		g, err := LookupGeometry(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(g.Params)-c.total) / c.total; d > 0.03 {
			t.Errorf("%s: %.2fB parameters, published %.0fB (%.1f%% off)", c.name, float64(g.Params)/1e9, c.total/1e9, 100*d)
		}
		if c.active > 0 {
			if d := math.Abs(float64(g.ActiveParams())-c.active) / c.active; d > 0.25 {
				t.Errorf("%s: %.2fB active, published as A%.0fB", c.name, float64(g.ActiveParams())/1e9, c.active/1e9)
			}
		} else if g.ActiveParams() != g.Params-int64(g.Vocab)*int64(g.Hidden) {
			t.Errorf("%s: a dense model runs all its parameters but the input embedding", c.name)
		}
		if g.Layers != c.layers || g.AttentionLayers() != c.attending || g.RecurrentLayers != c.layers-c.attending {
			t.Errorf("%s: %d layers, %d attending, %d recurrent; want %d, %d", c.name, g.Layers, g.AttentionLayers(), g.RecurrentLayers, c.layers, c.attending)
		}
		if got := g.KVBytesPerToken(); got != c.kvPerToken {
			t.Errorf("%s: %d KV bytes a token, want %d (attending layers only)", c.name, got, c.kvPerToken)
		}
		if got := g.StateBytes(); got != c.stateBytes {
			t.Errorf("%s: %d state bytes a sequence, want %d", c.name, got, c.stateBytes)
		}
		if g.Recurrent.ConvChannels() != c.convChannels || g.Recurrent.ValueHeads != c.heads {
			t.Errorf("%s: recurrent geometry %+v", c.name, g.Recurrent)
		}
		var layers int
		for _, gr := range g.KVLayerGroups() {
			layers += gr.Layers
		}
		if layers != c.attending {
			t.Errorf("%s: KV groups hold %d layers, want the %d attending ones", c.name, layers, c.attending)
		}
		if err := g.KV().Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	for _, name := range []string{"llama-3.1-8b", "qwen3-coder-30b-a3b"} {
		if g, _ := LookupGeometry(name); g.Hybrid() || g.StateBytes() != 0 || g.AttentionLayers() != g.Layers {
			t.Errorf("%s is not hybrid: %d recurrent layers, %d state bytes", name, g.RecurrentLayers, g.StateBytes())
		}
	}
}

func hybridExecutor(t *testing.T, name string, slots int) (*Executor, Geometry) {
	t.Helper()
	g, err := LookupGeometry(name)
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := LookupAccelerator("H200")
	x, err := New(Options{Accelerator: acc, Geometry: g, StateSlots: slots})
	if err != nil {
		t.Fatal(err)
	}
	return x, g
}

// TestHybridStepCost: a hybrid model's recurrent layers cost a step what
// its tokens cost them whatever the context (only the attending layers
// read it), and every sequence of a batch reads and writes its state;
// copies of states between slots cost their bytes at the memory
// bandwidth.
func TestHybridStepCost(t *testing.T) {
	x, g := hybridExecutor(t, "qwen3.6-35b-a3b", 8)
	chunk := func(pos, n int) *batch.Batch {
		return &batch.Batch{Seqs: []batch.Seq{{Tokens: make([]int32, n), Pos: pos}}, NumTokens: n, BlockSize: 16}
	}
	// A 2048-token chunk after 60k tokens: the hybrid's attention pairs
	// are those of its 10 attending layers; the same model with every
	// layer attending pays 4× the pairs.
	allAttend := g
	allAttend.RecurrentLayers = 0
	y, err := New(Options{Accelerator: x.opts.Accelerator, Geometry: allAttend})
	if err != nil {
		t.Fatal(err)
	}
	long := chunk(60000, 2048)
	if h, a := x.StepTime(long), y.StepTime(long); float64(h) > 0.5*float64(a) {
		t.Errorf("a long-context chunk takes %v on the hybrid, %v with every layer attending: want well under half", h, a)
	}
	// The recurrent layers' own cost does not grow with the context.
	rec := g.recurrentFLOPsPerToken()
	if rec <= 0 {
		t.Fatal("no recurrent FLOPs")
	}
	// Decode: 64 sequences read and write 64 states.
	decode := func(n int) *batch.Batch {
		b := &batch.Batch{BlockSize: 16}
		for i := range n {
			b.Seqs = append(b.Seqs, batch.Seq{Tokens: []int32{1}, Pos: 100, State: i})
		}
		b.NumTokens = n
		return b
	}
	bw := x.opts.Accelerator.MemBandwidth * x.opts.BandwidthEfficiency
	minExtra := time.Duration(63 * 2 * float64(g.StateBytes()) / bw * float64(time.Second))
	if d := x.StepTime(decode(64)) - x.StepTime(decode(1)); d < minExtra {
		t.Errorf("64 decoding sequences take %v more than 1, want at least their states' %v", d, minExtra)
	}
	want := time.Duration(2 * 3 * float64(g.StateBytes()) / bw * float64(time.Second))
	if got := x.StateCopyTime(3); got != want || x.StateCopyTime(0) != 0 {
		t.Errorf("3 state copies take %v, want %v", got, want)
	}
}

// TestSimStatesChecked: the executor keeps states only for a hybrid
// model, and refuses a sequence that resumes from a state of another
// position; copies move a state's position between slots.
func TestSimStatesChecked(t *testing.T) {
	acc, _ := LookupAccelerator("H200")
	hybrid, _ := LookupGeometry("qwen3.6-35b-a3b")
	dense, _ := LookupGeometry("llama-3.1-8b")
	if _, err := New(Options{Accelerator: acc, Geometry: hybrid}); err == nil || !strings.Contains(err.Error(), "state slots") {
		t.Errorf("a hybrid model without state slots: %v", err)
	}
	if _, err := New(Options{Accelerator: acc, Geometry: dense, StateSlots: 4}); err == nil {
		t.Error("a model without recurrent layers accepted state slots")
	}
	x, _ := hybridExecutor(t, "qwen3.6-35b-a3b", 4)
	out := &batch.Output{Tokens: make([]int32, 1), Sampled: make([]bool, 1)}
	run := func(b *batch.Batch) error {
		b.NumTokens = 0
		for _, s := range b.Seqs {
			b.NumTokens += len(s.Tokens)
		}
		return x.Execute(context.Background(), b, out)
	}
	seq := func(pos, n, slot int) batch.Seq { return batch.Seq{Tokens: make([]int32, n), Pos: pos, State: slot} }
	steps := []struct {
		b  batch.Batch
		ok bool
	}{
		{batch.Batch{Seqs: []batch.Seq{seq(0, 32, 0)}}, true},
		{batch.Batch{Seqs: []batch.Seq{seq(32, 1, 0)}, StateSaves: []batch.StateCopy{{From: 0, To: 3}}}, true},
		// Slot 3 holds the state after 33 tokens; slot 1 none.
		{batch.Batch{Seqs: []batch.Seq{seq(33, 5, 1)}, StateCopies: []batch.StateCopy{{From: 3, To: 1}}}, true},
		{batch.Batch{Seqs: []batch.Seq{seq(32, 1, 2)}}, false},
		{batch.Batch{Seqs: []batch.Seq{seq(38, 1, 3)}}, false},
		{batch.Batch{Seqs: []batch.Seq{seq(0, 1, 4)}}, false},
		{batch.Batch{Seqs: []batch.Seq{seq(0, 1, 0)}, StateCopies: []batch.StateCopy{{From: 5, To: 0}}}, false},
	}
	for i, s := range steps {
		if err := run(&s.b); (err == nil) != s.ok {
			t.Errorf("step %d: error %v, want ok %v", i, err, s.ok)
		}
	}
	if x.Busy().StateCopy != x.StateCopyTime(2) {
		t.Errorf("state copies charged %v, want %v", x.Busy().StateCopy, x.StateCopyTime(2))
	}
}

// TestStateSlotsForDevice: a hybrid model's states take at most half the
// cache, two a sequence, and the blocks the rest; other models get the
// blocks of KVBlocksForDevice and no slots.
func TestStateSlotsForDevice(t *testing.T) {
	acc, _ := LookupAccelerator("H200")
	for _, c := range []struct {
		name    string
		maxSeqs int
	}{{"qwen3.6-35b-a3b", 256}, {"qwen3.6-35b-a3b", 16}, {"qwen3.6-27b", 256}, {"qwen3-coder-next-fp8", 64}, {"llama-3.1-8b", 256}} {
		g, _ := LookupGeometry(c.name)
		all, err := KVBlocksForDevice(acc, g, 1, 0.9, 16)
		if err != nil {
			t.Fatal(err)
		}
		blocks, slots, err := StateSlotsForDevice(acc, g, 1, 0.9, 16, c.maxSeqs)
		if err != nil {
			t.Fatal(err)
		}
		perBlock := g.KVBytesPerToken() * 16
		budget := int64(all) * perBlock
		states := int64(slots) * g.StateBytes()
		switch {
		case !g.Hybrid() && (slots != 0 || blocks != all):
			t.Errorf("%s: %d blocks and %d slots, want %d and none", c.name, blocks, slots, all)
		case g.Hybrid() && (slots > 2*c.maxSeqs || states > budget/2 || slots < 2):
			t.Errorf("%s, %d seqs: %d slots of %d bytes from %d bytes", c.name, c.maxSeqs, slots, g.StateBytes(), budget)
		case int64(blocks)*perBlock+states > budget || budget-int64(blocks)*perBlock-states >= perBlock:
			t.Errorf("%s: %d blocks and %d bytes of states do not fill %d bytes", c.name, blocks, states, budget)
		}
		t.Logf("%s on H200, %d seqs: %d blocks (%d tokens), %d state slots of %.1f MiB", c.name, c.maxSeqs, blocks, blocks*16, slots, float64(g.StateBytes())/(1<<20))
	}
}

// TestEngineResumesProgramsOverSim: the real engine over the sim's
// states: a program's second turn (its first turn's tokens, output and a
// tool result) resumes from the state its first turn left within a
// block of its end (programs), from its first prompt's last boundary
// (prompts, recomputing the first turn's output), or from nothing
// (none); its time to first token grows in that order (the first turn's
// 2,500 output tokens take prompts a second prefill chunk: below a
// chunk, an A3B model's prefill is bound by reading its weights, not by
// its tokens), and the state copies are charged.
func TestEngineResumesProgramsOverSim(t *testing.T) {
	const bs = 16
	ttft := map[engine.CheckpointMode]time.Duration{}
	for _, mode := range []engine.CheckpointMode{engine.CheckpointPrograms, engine.CheckpointPrompts, engine.CheckpointNone} {
		g, _ := LookupGeometry("qwen3.6-35b-a3b")
		acc, _ := LookupAccelerator("H200")
		clk := clock.NewVirtual(time.Unix(0, 0))
		x, err := New(Options{Accelerator: acc, Geometry: g, Virtual: clk, StateSlots: 8})
		if err != nil {
			t.Fatal(err)
		}
		firsts := firstTokens{}
		e, err := engine.New(engine.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 2048, MaxModelLen: 65536, VocabSize: g.Vocab,
			KV:  kvcache.Config{NumBlocks: 4096, BlockSize: bs, EnablePrefixCache: true},
			EOS: []int32{x.EOS()}, Decoder: x.Vocabulary(), Clock: clk, StateCheckpoints: mode, Observer: firsts}, x)
		if err != nil {
			t.Fatal(err)
		}
		run := func(id string, prompt []int32, out int) ([]int32, engine.Usage, time.Duration) {
			toks, u := runAlone(t, e, id, prompt, out)
			return toks, u, firsts[id]
		}
		turn1 := make([]int32, 8000)
		for i := range turn1 {
			turn1[i] = int32(i % 1000)
		}
		out1, _, _ := run("turn1", turn1, 2500)
		turn2 := append(append(append([]int32(nil), turn1...), out1...), make([]int32, 600)...)
		_, u, first := run("turn2", turn2, 1)
		want := map[engine.CheckpointMode]int{
			engine.CheckpointPrograms: (8000 + 2500 - 1) / bs * bs, // the last sampled token was not computed
			engine.CheckpointPrompts:  8000 / bs * bs,
			engine.CheckpointNone:     0,
		}[mode]
		if u.CachedTokens != want {
			t.Errorf("%s: the second turn resumed from %d tokens, want %d", mode, u.CachedTokens, want)
		}
		if mode != engine.CheckpointNone && x.Busy().StateCopy == 0 {
			t.Errorf("%s: no state copy charged", mode)
		}
		ttft[mode] = first
	}
	if !(ttft[engine.CheckpointPrograms] < ttft[engine.CheckpointPrompts] && ttft[engine.CheckpointPrompts] < ttft[engine.CheckpointNone]) {
		t.Errorf("second turn's time to first token: programs %v, prompts %v, none %v: want increasing", ttft[engine.CheckpointPrograms], ttft[engine.CheckpointPrompts], ttft[engine.CheckpointNone])
	}
	t.Logf("second turn's time to first token on H200: programs %v, prompts %v, none %v", ttft[engine.CheckpointPrograms], ttft[engine.CheckpointPrompts], ttft[engine.CheckpointNone])
}

// firstTokens records each finished request's time to first token by ID.
type firstTokens map[string]time.Duration

func (firstTokens) CacheConfig(int, int)             {}
func (firstTokens) Iteration(*engine.IterationStats) {}
func (f firstTokens) RequestFinished(st *engine.RequestStats) {
	f[st.ID] = st.FirstToken.Sub(st.Arrival)
}

// TestSimHostStates: host slots (batch.HostStateKeeper) follow the
// device's; a state saved there and brought back keeps its position, the
// copies cross the host link (not the memory bandwidth), and no
// sequence runs from a host slot.
func TestSimHostStates(t *testing.T) {
	x, g := hybridExecutor(t, "qwen3.6-35b-a3b", 2)
	if err := x.ReserveHostStates(-1); err == nil {
		t.Error("-1 host slots accepted")
	}
	if err := x.ReserveHostStates(3); err != nil {
		t.Fatal(err)
	}
	dense, _ := newExecutorOf(t, "llama-3.1-8b")
	if err := dense.ReserveHostStates(1); err == nil {
		t.Error("a model without recurrent layers reserved host state slots")
	}
	out := &batch.Output{Tokens: make([]int32, 1), Sampled: make([]bool, 1)}
	run := func(b batch.Batch) error {
		for _, s := range b.Seqs {
			b.NumTokens += len(s.Tokens)
		}
		return x.Execute(context.Background(), &b, out)
	}
	// Slots 0-1 device, 2-4 host.
	if err := run(batch.Batch{Seqs: []batch.Seq{{Tokens: make([]int32, 48), State: 0}}, StateSaves: []batch.StateCopy{{From: 0, To: 4}}}); err != nil {
		t.Fatal(err)
	}
	before := x.Busy().StateCopy
	if err := run(batch.Batch{Seqs: []batch.Seq{{Tokens: make([]int32, 2), Pos: 48, State: 1}}, StateCopies: []batch.StateCopy{{From: 4, To: 1}}}); err != nil {
		t.Fatalf("resume from the host slot: %v", err)
	}
	if got, want := x.Busy().StateCopy-before, x.StateHostCopyTime(0, 1); got != want || want <= x.StateCopyTime(1) {
		t.Errorf("a state brought back from the host took %v, want %v (over the host link, slower than %v in device memory)", got, want, x.StateCopyTime(1))
	}
	if err := run(batch.Batch{Seqs: []batch.Seq{{Tokens: make([]int32, 1), Pos: 48, State: 4}}}); err == nil {
		t.Error("a sequence ran from a host slot")
	}
	bw := x.opts.Accelerator.HostLinkBandwidth * x.opts.BandwidthEfficiency
	if got, want := x.StateHostCopyTime(2, 1).Seconds(), 2*float64(g.StateBytes())/bw; math.Abs(got-want) > 1e-4 {
		t.Errorf("2 states out and 1 in: %.6f s, want %.6f (both directions at once)", got, want)
	}
}

func newExecutorOf(t *testing.T, name string) (*Executor, Geometry) {
	t.Helper()
	g, _ := LookupGeometry(name)
	acc, _ := LookupAccelerator("H200")
	x, err := New(Options{Accelerator: acc, Geometry: g})
	if err != nil {
		t.Fatal(err)
	}
	return x, g
}
