package sim

import (
	"context"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestWindowCacheGeometry: with the window cache, gpt-oss pages its full
// layers only and keeps a ring slot of its sliding layers' window and a
// chunk (the ggml executor's WindowStateBytes: layers × KV heads × head
// dim × K and V × 2 bytes × (128 + 512)); without it every layer is paged
// and no state kept. Models without sliding layers are unchanged.
func TestWindowCacheGeometry(t *testing.T) {
	for _, c := range []struct {
		name                 string
		layers, sliding      int
		wantRing, wantPerTok int64
	}{
		{"gpt-oss-20b", 24, 12, 12 * 8 * 64 * 2 * 2 * (128 + 512), 12 * 8 * 64 * 2 * 2},
		{"gpt-oss-120b", 36, 18, 18 * 8 * 64 * 2 * 2 * (128 + 512), 18 * 8 * 64 * 2 * 2},
	} {
		g, _ := LookupGeometry(c.name)
		full, window := g.WithWindowCache(false), g.WithWindowCache(true)
		if full.KV().Layers != c.layers || full.StateBytes() != 0 || full.KeepsStates() {
			t.Errorf("%s full: %d paged layers, %d state bytes; want %d and none", c.name, full.KV().Layers, full.StateBytes(), c.layers)
		}
		if window.KV().Layers != c.layers-c.sliding || window.KVBytesPerToken() != c.wantPerTok || !window.KeepsStates() {
			t.Errorf("%s window: %d paged layers, %d bytes a token; want %d and %d", c.name, window.KV().Layers, window.KVBytesPerToken(), c.layers-c.sliding, c.wantPerTok)
		}
		if window.StateBytes() != c.wantRing || window.RingBytes() != c.wantRing || window.RecurrentStateBytes() != 0 {
			t.Errorf("%s window: a slot of %d bytes (rings %d), want %d", c.name, window.StateBytes(), window.RingBytes(), c.wantRing)
		}
		// What the model needs does not depend on how the pod keeps it.
		if r, w := full.KVGroupRatio(32768), window.KVGroupRatio(32768); r != w || r > 0.51 {
			t.Errorf("%s: KV group ratio at 32k %.3f full, %.3f window", c.name, r, w)
		}
	}
	for _, name := range []string{"llama-3.1-8b", "qwen3.6-35b-a3b", "glm-4.7-flash", "qwen3-coder-30b-a3b"} {
		g, _ := LookupGeometry(name)
		if w := g.WithWindowCache(true); w.KV() != g.KV() || w.StateBytes() != g.StateBytes() || w.KeepsStates() != g.Hybrid() {
			t.Errorf("%s: the window cache changes a model without sliding layers", name)
		}
	}
}

// TestWindowCacheDensity: a gpt-oss-20b pod sized from the device's
// memory holds 1.7 to 2 times the tokens with the window cache (the full
// layers paged, two ring slots a sequence out of the same budget) as
// with every layer paged; on a fixed 64 GiB budget at 256 sequences the
// sizing is kvcache.SplitStates', the ggml executor's (cmd/runtime's
// TestSWACacheDensity: 1.766×).
func TestWindowCacheDensity(t *testing.T) {
	g, _ := LookupGeometry("gpt-oss-20b")
	full, window := g.WithWindowCache(false), g.WithWindowCache(true)
	for _, accel := range []string{"H100-SXM", "H200"} {
		acc, _ := LookupAccelerator(accel)
		for _, seqs := range []int{256, 64} {
			fb, fs, err := StateSlotsForDevice(acc, full, 1, 0.9, 16, seqs)
			if err != nil {
				t.Fatal(err)
			}
			wb, ws, err := StateSlotsForDevice(acc, window, 1, 0.9, 16, seqs)
			if err != nil {
				t.Fatal(err)
			}
			ratio := float64(wb) / float64(fb)
			t.Logf("%s, %d seqs: window %d tokens (%d ring slots), full %d tokens: %.3f×", accel, seqs, wb*16, ws, fb*16, ratio)
			if fs != 0 || ws != 2*seqs || ratio < 1.7 || ratio >= 2 {
				t.Errorf("%s, %d seqs: %d/%d slots, %.3f× the tokens; want 0/%d and 1.7× to 2×", accel, seqs, fs, ws, ratio, 2*seqs)
			}
		}
	}
	const budget = 64 << 30
	fb, _ := kvcache.SplitStates(budget, full.KV().BytesPerBlock(16), full.StateBytes(), 0, 1)
	wb, _ := kvcache.SplitStates(budget, window.KV().BytesPerBlock(16), window.StateBytes(), 512, 1)
	if ratio := float64(wb) / float64(fb); ratio < 1.765 || ratio > 1.767 {
		t.Errorf("64 GiB, 256 seqs: %.4f× the tokens, want the ggml executor's 1.766×", ratio)
	}
}

// TestWindowCacheExecutor: with the window cache the sim is a
// StateKeeper bounding a sequence's chunk to WindowChunk, a step costs
// what it costs with every layer paged (a ring's step reads its window
// only), and the real engine over it resumes a second turn from the
// first turn's checkpoint.
func TestWindowCacheExecutor(t *testing.T) {
	g, _ := LookupGeometry("gpt-oss-20b")
	acc, _ := LookupAccelerator("H200")
	window := g.WithWindowCache(true)
	if _, err := New(Options{Accelerator: acc, Geometry: window}); err == nil {
		t.Error("a window cache without state slots: no error")
	}
	full, err := New(Options{Accelerator: acc, Geometry: g})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewVirtual(time.Unix(0, 0))
	x, err := New(Options{Accelerator: acc, Geometry: window, Virtual: clk, StateSlots: 8})
	if err != nil {
		t.Fatal(err)
	}
	if full.MaxSeqTokens() != 0 || x.MaxSeqTokens() != WindowChunk || x.StateSlots() != 8 || x.StateBytes() != simStateBytes {
		t.Errorf("chunk bound %d full, %d window; %d slots, %d state bytes", full.MaxSeqTokens(), x.MaxSeqTokens(), x.StateSlots(), x.StateBytes())
	}
	// A prefill chunk beside a decode (compute-bound), and 64 decodes
	// (bound by the bytes read).
	mixed := &batch.Batch{Seqs: []batch.Seq{{Tokens: make([]int32, 512), Pos: 30000}, {Tokens: []int32{1}, Pos: 5000, Sample: true}}, NumTokens: 513}
	decode := &batch.Batch{NumTokens: 64}
	for i := range 64 {
		decode.Seqs = append(decode.Seqs, batch.Seq{Tokens: []int32{1}, Pos: 5000, State: i % 8, Sample: true})
	}
	for _, b := range []*batch.Batch{mixed, decode} {
		if w, f := x.StepTime(b), full.StepTime(b); w != f {
			t.Errorf("%d sequences: a step takes %v with the window cache, %v with every layer paged", len(b.Seqs), w, f)
		}
	}

	const bs = 16
	obs := &chunkObserver{}
	e, err := engine.New(engine.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 2048, MaxModelLen: 32768, VocabSize: g.Vocab,
		KV:  kvcache.Config{NumBlocks: 2048, BlockSize: bs, EnablePrefixCache: true},
		EOS: []int32{x.EOS()}, Decoder: x.Vocabulary(), Clock: clk, Observer: obs}, x)
	if err != nil {
		t.Fatal(err)
	}
	turn1 := make([]int32, 3000)
	for i := range turn1 {
		turn1[i] = int32(i % 1000)
	}
	out1, _ := runAlone(t, e, "turn1", turn1, 200)
	turn2 := append(append(append([]int32(nil), turn1...), out1...), make([]int32, 300)...)
	_, u := runAlone(t, e, "turn2", turn2, 1)
	if want := (3000 + 200 - 1) / bs * bs; u.CachedTokens != want {
		t.Errorf("the second turn resumed from %d tokens, want %d (the first turn's checkpoint)", u.CachedTokens, want)
	}
	if x.Busy().StateCopy == 0 {
		t.Error("no ring copy charged")
	}
	if obs.maxTokens < WindowChunk || obs.maxTokens > WindowChunk {
		t.Errorf("the largest iteration took %d tokens, want %d (one sequence at a time, its chunk bounded)", obs.maxTokens, WindowChunk)
	}
}

// chunkObserver records the most tokens an iteration took.
type chunkObserver struct{ maxTokens int }

func (*chunkObserver) CacheConfig(int, int)                 {}
func (*chunkObserver) RequestFinished(*engine.RequestStats) {}
func (o *chunkObserver) Iteration(st *engine.IterationStats) {
	o.maxTokens = max(o.maxTokens, st.Tokens)
}

// runAlone submits a request of out tokens (EOS ignored) to e and steps
// e until it has nothing left: its tokens and usage.
func runAlone(t *testing.T, e *engine.Engine, id string, prompt []int32, out int) ([]int32, engine.Usage) {
	t.Helper()
	s, err := e.Submit(context.Background(), &engine.Request{ID: id, Prompt: prompt, Params: engine.Params{MaxTokens: out, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	for range 10000 {
		if run, wait := e.Pending(); run == 0 && wait == 0 {
			break
		}
		if r := e.Step(context.Background()); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	toks, _, c, err := s.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return toks, c.Usage
}
