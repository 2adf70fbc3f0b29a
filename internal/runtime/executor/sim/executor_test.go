package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

func newTestExec(t *testing.T, acc, model string, opts Options) *Executor {
	t.Helper()
	a, err := LookupAccelerator(acc)
	if err != nil {
		t.Fatal(err)
	}
	g, err := LookupGeometry(model)
	if err != nil {
		t.Fatal(err)
	}
	opts.Accelerator, opts.Geometry = a, g
	x, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func decodeBatch(n, ctxLen int) *batch.Batch {
	b := &batch.Batch{BlockSize: 16}
	for i := range n {
		b.Seqs = append(b.Seqs, batch.Seq{SeqID: uint64(i), Tokens: []int32{1}, Pos: ctxLen, Sample: true})
	}
	b.NumTokens = n
	return b
}

func TestStepTimeFollowsTheRoofline(t *testing.T) {
	x := newTestExec(t, "H100-SXM", "llama-3.1-8b", Options{StepOverhead: time.Nanosecond})
	// Batch-1 decode is bandwidth bound: ~16 GB of weights at 0.8 × 3.35 TB/s.
	one := x.StepTime(decodeBatch(1, 100)).Seconds()
	want := float64(x.opts.Geometry.WeightBytes()) / (3.35e12 * 0.8)
	if math.Abs(one-want)/want > 0.02 {
		t.Errorf("batch-1 decode %.2f ms, want ≈ %.2f ms", one*1e3, want*1e3)
	}
	// Weights are read once per iteration: 64 sequences cost far less than 64×.
	b64 := x.StepTime(decodeBatch(64, 100)).Seconds()
	if b64 > 1.5*one {
		t.Errorf("batch-64 decode %.2f ms vs batch-1 %.2f ms: batching should amortise weights", b64*1e3, one*1e3)
	}
	// Long contexts add KV reads.
	if long := x.StepTime(decodeBatch(64, 8000)).Seconds(); long <= b64 {
		t.Errorf("KV reads should cost time: %.2f ms at 8k vs %.2f ms at 100", long*1e3, b64*1e3)
	}
	// A large prefill is compute bound: 2 × params × tokens / (0.6 × peak).
	pre := &batch.Batch{Seqs: []batch.Seq{{Tokens: make([]int32, 8192), Sample: true}}, NumTokens: 8192}
	got := x.StepTime(pre).Seconds()
	lower := 2 * float64(x.opts.Geometry.Params-2*int64(x.opts.Geometry.Vocab*x.opts.Geometry.Hidden)) * 8192 / (989e12 * 0.6)
	if got < lower || got > 2*lower {
		t.Errorf("8k prefill %.1f ms, want between %.1f and %.1f ms", got*1e3, lower*1e3, 2*lower*1e3)
	}
	// Faster memory, faster decode; tensor parallelism splits the work.
	h200 := newTestExec(t, "H200", "llama-3.1-8b", Options{StepOverhead: time.Nanosecond})
	if h := h200.StepTime(decodeBatch(1, 100)).Seconds(); h >= one {
		t.Errorf("H200 decode %.2f ms not faster than H100 %.2f ms", h*1e3, one*1e3)
	}
	tp := newTestExec(t, "H100-SXM", "llama-3.1-70b", Options{TensorParallel: 4, StepOverhead: time.Nanosecond})
	tp1 := newTestExec(t, "H100-SXM", "llama-3.1-70b", Options{TensorParallel: 1, StepOverhead: time.Nanosecond})
	if a, b := tp.StepTime(decodeBatch(8, 100)), tp1.StepTime(decodeBatch(8, 100)); a >= b/2 {
		t.Errorf("TP=4 step %v should be well under half of TP=1 %v", a, b)
	}
}

func TestTokensAreDeterministicAndEndWithEOS(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(0, 0))
	dist := LogNormal{Mean: 20, Sigma: 0.5, Min: 2, Max: 100}
	x := newTestExec(t, "L4", "llama-3.1-8b", Options{Virtual: clk, OutputLen: dist})
	seed := uint64(12345)
	n := dist.Sample(seed)
	var toks []int32
	for k := 0; k < n+5; k++ {
		b := &batch.Batch{Seqs: []batch.Seq{{Tokens: []int32{1}, Pos: 10 + k - 1, PromptLen: 10, Sample: true, Seed: seed}}, NumTokens: 1}
		out := &batch.Output{Tokens: make([]int32, 1), Sampled: make([]bool, 1), Logits: make([][]float32, 1)}
		before := clk.Now()
		if err := x.Execute(context.Background(), b, out); err != nil {
			t.Fatal(err)
		}
		if !out.Sampled[0] {
			t.Fatal("sim must sample")
		}
		if !clk.Now().After(before) {
			t.Fatal("virtual clock did not advance")
		}
		toks = append(toks, out.Tokens[0])
		if out.Tokens[0] == x.EOS() {
			break
		}
	}
	if len(toks) != n || toks[n-1] != x.EOS() {
		t.Fatalf("got %d tokens ending %d, want EOS at %d", len(toks), toks[len(toks)-1], n)
	}
	for i, tok := range toks[:n-1] {
		if tok == x.EOS() || len(x.Vocabulary().TokenBytes(tok)) == 0 {
			t.Errorf("token %d = %d has no text", i, tok)
		}
		if again := x.token(seed, 10+i, i); again != tok {
			t.Errorf("token %d not deterministic", i)
		}
	}
}

func TestRealTimeExecuteSleepsAndHonoursContext(t *testing.T) {
	x := newTestExec(t, "L4", "llama-3.1-8b", Options{StepOverhead: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	out := &batch.Output{Tokens: make([]int32, 1), Sampled: make([]bool, 1), Logits: make([][]float32, 1)}
	if err := x.Execute(ctx, decodeBatch(1, 10), out); err == nil {
		t.Fatal("a cancelled step must return the context error")
	}
}

func TestKVBlocksForDevice(t *testing.T) {
	a, _ := LookupAccelerator("h100-sxm")
	g, _ := LookupGeometry("LLAMA-3.1-8B")
	n, err := KVBlocksForDevice(a, g, 1, 0.9, 16)
	if err != nil {
		t.Fatal(err)
	}
	// (72 GiB − 16 GB weights − 2 GiB) / (128 KiB × 16) ≈ 26k blocks.
	if n < 20000 || n > 30000 {
		t.Errorf("%d blocks", n)
	}
	g70, _ := LookupGeometry("llama-3.1-70b")
	if _, err := KVBlocksForDevice(a, g70, 1, 0.9, 16); err == nil {
		t.Error("70B does not fit on one H100")
	}
	if n4, err := KVBlocksForDevice(a, g70, 4, 0.9, 16); err != nil || n4 <= 0 {
		t.Errorf("70B on 4 H100: %d, %v", n4, err)
	}
	if _, err := LookupAccelerator("TPU"); err == nil {
		t.Error("unknown accelerator accepted")
	}
}

func TestVocabularyEncode(t *testing.T) {
	v := NewVocabulary(1000)
	ids := v.Encode("the model  reads\nunknownword")
	if len(ids) != 4 || ids[0] != 0 || ids[1] != 14 {
		t.Errorf("ids %v", ids)
	}
	for _, id := range ids {
		if id < 0 || id >= v.EOS() {
			t.Errorf("id %d out of range", id)
		}
	}
	if len(v.Encode("")) != 1 {
		t.Error("empty text must still give one token")
	}
}

// TestKVDTypeSizesTheCache: the KV cache's type sets the blocks a device
// holds and the KV bytes a long-context step reads: F32 holds half of the
// model's BF16 blocks, Q8_0 32/17 of them (kvcache's accounting), and a
// decode step at 8k tokens of context is faster with Q8_0 than with F32.
func TestKVDTypeSizesTheCache(t *testing.T) {
	a, _ := LookupAccelerator("H100-SXM")
	g, _ := LookupGeometry("llama-3.1-8b")
	blocks := map[kvcache.DType]int{}
	step := map[kvcache.DType]time.Duration{}
	for _, d := range []kvcache.DType{kvcache.DTypeAuto, kvcache.DTypeBF16, kvcache.DTypeF32, kvcache.DTypeQ8_0} {
		g.KVDType = d
		// The KV budget left by the weights and the reserve, fixed so
		// that the ratios are exact: 8 GiB.
		n, err := KVBlocksForDevice(a, g, 1, float64(g.WeightBytes()+2<<30+8<<30)/float64(a.MemoryBytes), 16)
		if err != nil {
			t.Fatal(err)
		}
		blocks[d] = n
		x, err := New(Options{Accelerator: a, Geometry: g, StepOverhead: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		step[d] = x.StepTime(decodeBatch(64, 8000))
	}
	if blocks[kvcache.DTypeAuto] != blocks[kvcache.DTypeBF16] {
		t.Errorf("auto holds %d blocks, BF16 (the model's type) %d", blocks[kvcache.DTypeAuto], blocks[kvcache.DTypeBF16])
	}
	if bf, f32 := blocks[kvcache.DTypeBF16], blocks[kvcache.DTypeF32]; bf < 2*f32 || bf > 2*f32+1 {
		t.Errorf("BF16 holds %d blocks, F32 %d: want twice as many", bf, f32)
	}
	if bf, q8 := blocks[kvcache.DTypeBF16], blocks[kvcache.DTypeQ8_0]; q8 < bf*32/17-1 || q8 > bf*32/17+1 {
		t.Errorf("Q8_0 holds %d blocks, want 32/17 of BF16's %d", q8, bf)
	}
	if !(step[kvcache.DTypeQ8_0] < step[kvcache.DTypeBF16] && step[kvcache.DTypeBF16] < step[kvcache.DTypeF32]) {
		t.Errorf("64 decodes at 8k context: Q8_0 %v, BF16 %v, F32 %v; want fewer KV bytes to be faster", step[kvcache.DTypeQ8_0], step[kvcache.DTypeBF16], step[kvcache.DTypeF32])
	}
}

// A KV transfer between pods takes its bytes over the slower of the two
// nodes' links, and transfers through one link take turns.
func TestKVTransferTime(t *testing.T) {
	x := newTestExec(t, "H100-SXM", "llama-3.1-8b", Options{Virtual: clock.NewVirtual(time.Unix(0, 0))})
	a, b := &NetLink{Bandwidth: 50e9}, &NetLink{Bandwidth: 25e9}
	// 30,000 tokens of 128 KiB: 3.93 GB, 157 ms at 25 GB/s.
	want := time.Duration(math.Ceil(30000*131072/25e9*1e9)) + netLatency
	if got := x.KVTransferTime(30000, a, b); got != want {
		t.Fatalf("first transfer: %v, want %v", got, want)
	}
	// A second one through b waits for the first.
	if got := x.KVTransferTime(30000, a, b); got != 2*want-netLatency {
		t.Fatalf("second transfer: %v, want %v", got, 2*want-netLatency)
	}
	if got := x.KVTransferTime(0, a, b); got != 0 {
		t.Fatalf("empty transfer: %v", got)
	}
}
