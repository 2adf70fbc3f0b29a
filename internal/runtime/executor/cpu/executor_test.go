package cpu

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

const testBlockSize = 4

func newExec(t testing.TB, m *model.Model, numBlocks int) *Executor {
	t.Helper()
	e, err := New(m, numBlocks, testBlockSize, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func contiguous(first, n int) []kvcache.BlockID { return exectest.Contiguous(first, n) }

func execute(t testing.TB, e *Executor, seqs []batch.Seq) [][]float32 {
	t.Helper()
	return exectest.Execute(t, e, testBlockSize, seqs)
}

func randomTokens(rng *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return ids
}

// TestForwardMatchesReference checks logits against the float64 reference:
// the largest difference must be within 1e-4 of the largest |logit| (f32
// accumulation over these widths is good to about 1e-6).
func TestForwardMatchesReference(t *testing.T) {
	const tol = 1e-4
	for _, tc := range []struct {
		name string
		cfg  model.Config
		typ  model.DType
	}{
		{"mha", model.Config{VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 4, FFN: 96}, model.F32},
		{"gqa4-tied", model.Config{VocabSize: 280, Dim: 64, Layers: 2, Heads: 8, KVHeads: 2, HeadDim: 16, FFN: 64, TiedEmbeddings: true}, model.F32},
		{"qwen2-bias-gqa4", model.Config{Arch: model.ArchQwen2, VocabSize: 300, Dim: 96, Layers: 2, Heads: 4, KVHeads: 1, FFN: 128, QKVBias: true, RopeTheta: 1e6}, model.F32},
		{"q8_0-gqa2", model.Config{VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96}, model.Q8_0},
		{"f16-headdim-wide", model.Config{VocabSize: 260, Dim: 32, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 24, FFN: 40}, model.F16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.Random(tc.cfg, 11).Convert(tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			ref := newReference(m)
			tokens := randomTokens(rand.New(rand.NewPCG(5, 6)), 11, tc.cfg.VocabSize)
			// Sequence i is the prefix tokens[:i+1], all in one batch: its
			// logits are those of position i.
			e := newExec(t, m, 64)
			var seqs []batch.Seq
			next := 0
			for i := range tokens {
				nb := (i + testBlockSize) / testBlockSize
				seqs = append(seqs, batch.Seq{SeqID: uint64(i), Tokens: tokens[:i+1], Blocks: contiguous(next, nb), Sample: true})
				next += nb
			}
			got := execute(t, e, seqs)
			for i, tok := range tokens {
				want := ref.next(tok)
				var scale, worst float64
				for j, w := range want {
					scale = max(scale, math.Abs(w))
					worst = max(worst, math.Abs(float64(got[i][j])-w))
				}
				if worst > tol*scale || math.IsNaN(worst) {
					t.Errorf("position %d: max |logit diff| %.3g exceeds %.0e × %.3g", i, worst, tol, scale)
				}
			}
		})
	}
}

func argmax(l []float32) int32 {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	return int32(best)
}

// runAlone generates greedily for one prompt with its own executor and
// contiguous blocks, prompt in one step.
func runAlone(t *testing.T, m *model.Model, prompt []int32, gen int) []int32 {
	e := newExec(t, m, 64)
	blocks := contiguous(0, 64)
	toks, pos, out := prompt, 0, []int32(nil)
	for len(out) < gen {
		l := execute(t, e, []batch.Seq{{Tokens: toks, Pos: pos, Blocks: blocks, Sample: true}})
		pos += len(toks)
		tok := argmax(l[0])
		out = append(out, tok)
		toks = []int32{tok}
	}
	return out
}

// driver plays the engine: each step, every unfinished sequence processes
// its next chunk of known tokens, in one batch, decoding ones first.
type driver struct {
	t      *testing.T
	e      *Executor
	rng    *rand.Rand
	free   []kvcache.BlockID
	seqs   []*seqState
	maxGen int
}

type seqState struct {
	id     uint64
	known  []int32 // prompt, then generated tokens
	prompt int
	pos    int
	blocks []kvcache.BlockID
}

func (d *driver) add(prompt []int32, shared []kvcache.BlockID, cached int) *seqState {
	s := &seqState{id: uint64(len(d.seqs)), known: slices.Clone(prompt), prompt: len(prompt), pos: cached, blocks: slices.Clone(shared)}
	d.seqs = append(d.seqs, s)
	return s
}

func (d *driver) step() bool {
	var seqs []batch.Seq
	var states []*seqState
	for _, decoding := range []bool{true, false} {
		for _, s := range d.seqs {
			if len(s.known)-s.prompt >= d.maxGen || (s.pos >= s.prompt) != decoding {
				continue
			}
			n := min(len(s.known)-s.pos, 1+d.rng.IntN(7))
			for len(s.blocks)*testBlockSize < s.pos+n {
				s.blocks = append(s.blocks, d.free[0])
				d.free = d.free[1:]
			}
			seqs = append(seqs, batch.Seq{SeqID: s.id, Tokens: s.known[s.pos : s.pos+n], Pos: s.pos, Blocks: s.blocks, Sample: s.pos+n == len(s.known)})
			states = append(states, s)
		}
	}
	if len(seqs) == 0 {
		return false
	}
	logits := execute(d.t, d.e, seqs)
	for i, s := range states {
		s.pos += len(seqs[i].Tokens)
		if seqs[i].Sample {
			s.known = append(s.known, argmax(logits[i]))
		}
	}
	return true
}

func (d *driver) run() {
	for d.step() {
	}
}

func shuffledBlocks(rng *rand.Rand, n int) []kvcache.BlockID {
	ids := contiguous(0, n)
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

func testModel(t *testing.T) *model.Model {
	m, err := model.Random(model.Config{VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96}, 21).Convert(model.Q8_0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBatchedPagedGenerationMatchesAlone(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const gen = 12
	var prompts [][]int32
	for _, n := range []int{5, 17, 1, 33, 8} {
		prompts = append(prompts, randomTokens(rng, n, 300))
	}
	d := &driver{t: t, e: newExec(t, m, 128), rng: rng, free: shuffledBlocks(rng, 128), maxGen: gen}
	for _, p := range prompts {
		d.add(p, nil, 0)
	}
	d.run()
	for i, p := range prompts {
		want := runAlone(t, m, p, gen)
		if diff := cmp.Diff(want, d.seqs[i].known[len(p):]); diff != "" {
			t.Errorf("prompt %d (len %d): batched tokens differ from alone (-alone +batched):\n%s", i, len(p), diff)
		}
	}
}

func TestPrefixSharingChangesNothing(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewPCG(9, 10))
	const gen, sharedBlocks = 8, 3
	common := randomTokens(rng, sharedBlocks*testBlockSize, 300)
	p1 := append(slices.Clone(common), randomTokens(rng, 6, 300)...)
	p2 := append(slices.Clone(common), randomTokens(rng, 3, 300)...)
	want1, want2 := runAlone(t, m, p1, gen), runAlone(t, m, p2, gen)

	e := newExec(t, m, 64)
	d := &driver{t: t, e: e, rng: rng, free: shuffledBlocks(rng, 64), maxGen: gen}
	s1 := d.add(p1, nil, 0)
	for s1.pos < len(common) {
		d.step()
	}
	// The second sequence hits the first one's prefix blocks.
	prefix := s1.blocks[:sharedBlocks]
	snapshot := func() []float32 {
		var kv []float32
		for li := range e.layers {
			for _, b := range prefix {
				n := testBlockSize * e.kvDim
				kv = append(kv, e.kCache[li][int(b)*n:int(b+1)*n]...)
				kv = append(kv, e.vCache[li][int(b)*n:int(b+1)*n]...)
			}
		}
		return kv
	}
	before := snapshot()
	s2 := d.add(p2, prefix, len(common))
	d.run()
	if diff := cmp.Diff(want1, s1.known[len(p1):]); diff != "" {
		t.Errorf("sequence owning the prefix (-alone +shared):\n%s", diff)
	}
	if diff := cmp.Diff(want2, s2.known[len(p2):]); diff != "" {
		t.Errorf("sequence reusing the prefix (-alone +shared):\n%s", diff)
	}
	if !slices.Equal(before, snapshot()) {
		t.Error("shared prefix blocks were written")
	}
}

// TestGGUFRoundTripLogits: a model written to a GGUF file, whole or in
// parts of 4 tensors (llama.cpp's gguf-split layout, loaded from its first
// part), gives the logits and greedy tokens of the model in memory.
func TestGGUFRoundTripLogits(t *testing.T) {
	base := model.Random(model.Config{VocabSize: 290, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 64}, 4)
	prompt := randomTokens(rand.New(rand.NewPCG(1, 3)), 9, 290)
	for _, typ := range []model.DType{model.F32, model.F16, model.Q8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			mem, err := base.Convert(typ)
			if err != nil {
				t.Fatal(err)
			}
			seq := []batch.Seq{{Tokens: prompt, Blocks: contiguous(0, 3), Sample: true}}
			want := execute(t, newExec(t, mem, 8), seq)[0]
			wantToks := runAlone(t, mem, prompt, 6)
			for name, loaded := range map[string]*model.Model{"whole": exectest.WriteAndLoad(t, mem), "split": exectest.WriteSplitAndLoad(t, mem, 4)} {
				got := execute(t, newExec(t, loaded, 8), seq)[0]
				if !slices.Equal(want, got) {
					t.Errorf("%s: logits of the loaded model differ from the in-memory one", name)
				}
				if diff := cmp.Diff(wantToks, runAlone(t, loaded, prompt, 6)); diff != "" {
					t.Errorf("%s: greedy tokens (-memory +loaded):\n%s", name, diff)
				}
			}
		})
	}
}

func TestExecuteErrors(t *testing.T) {
	m := testModel(t)
	e := newExec(t, m, 4)
	exectest.CheckExecuteErrors(t, e, testBlockSize,
		exectest.ErrorCase{Name: "negative token", Seq: batch.Seq{Tokens: []int32{-1}, Blocks: []kvcache.BlockID{0}}, Want: "token -1 outside"})
	if _, err := New(m, 0, 16, Options{}); err == nil {
		t.Error("New with 0 blocks: no error")
	}
	// A type the loader reads but this executor cannot run is refused at
	// start, naming the tensor and the executor that runs it.
	k := testModel(t)
	q := k.Weights.Layers[1].Up
	rb, _ := model.Q4_0.RowBytes(q.Cols())
	q.Type, q.Data = model.Q4_0, make([]byte, rb*q.Rows())
	if _, err := New(k, 4, testBlockSize, Options{}); err == nil || !strings.Contains(err.Error(), "blk.1.ffn_up.weight has type Q4_0") || !strings.Contains(err.Error(), "--executor ggml") {
		t.Errorf("New with a Q4_0 tensor: got %v", err)
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	m := testModel(t)
	e := newExec(t, m, 32)
	seqs := make([]batch.Seq, 4)
	for i := range seqs {
		seqs[i] = batch.Seq{SeqID: uint64(i), Tokens: []int32{int32(i)}, Pos: 9, Blocks: contiguous(4*i, 4), Sample: true}
	}
	b := &batch.Batch{Seqs: seqs, NumTokens: len(seqs), BlockSize: testBlockSize}
	out := &batch.Output{Logits: make([][]float32, len(seqs))}
	ctx := context.Background()
	if err := e.Execute(ctx, b, out); err != nil {
		t.Fatal(err)
	}
	// The engine hands the executor nil logit rows every step (it clears
	// the output); the executor points them at its own memory.
	if n := testing.AllocsPerRun(20, func() {
		clear(out.Logits)
		_ = e.Execute(ctx, b, out)
	}); n != 0 {
		t.Errorf("a decode step allocates %v times", n)
	}
}

// TestKVGeometry: kvcache's accounting of the executor's KV geometry is
// the memory the executor allocates, and a cache type other than f32 is
// refused, naming the type.
func TestKVGeometry(t *testing.T) {
	c := model.TinyConfig()
	e, err := New(model.Random(c, 1), 8, 16, Options{Threads: 1, KVCacheDType: kvcache.DTypeF32})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var floats int
	for l := range e.kCache {
		floats += len(e.kCache[l]) + len(e.vCache[l])
	}
	if got, want := KVGeometry(c).BytesPerBlock(16)*8, int64(4*floats); got != want {
		t.Errorf("KVGeometry says 8 blocks take %d bytes; the executor holds %d", got, want)
	}
	for _, d := range []kvcache.DType{kvcache.DTypeF16, kvcache.DTypeBF16, kvcache.DTypeQ8_0} {
		_, err := New(model.Random(c, 1), 8, 16, Options{KVCacheDType: d})
		if err == nil || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("KV cache dtype %s: error %v, want a refusal naming it", d, err)
		}
	}
}
