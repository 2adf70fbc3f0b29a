package exectest

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// NewExec makes an executor of numBlocks blocks for the engine tests.
type NewExec func(t testing.TB, numBlocks int) batch.Executor

// CheckEngineRestoresBesideIterations runs the engine over an executor
// (a batch.OverlappingCopier) with a small device cache and a host tier, in
// blocks of blockSize tokens. Program a's first request leaves its context
// cached; b's long prompt evicts part of it to the host; a's next request,
// admitted while c decodes, brings it back from the host beside c's
// iterations (overlapped) or before them (serial), and both a and c
// generate exactly what each generates on an engine of its own.
func CheckEngineRestoresBesideIterations(t *testing.T, m *model.Model, blockSize int, newExec NewExec) {
	t.Helper()
	h := hostEngines{m: m, blockSize: blockSize, newExec: newExec}
	a1, _, c := restorePrompts(m)
	aloneA1 := h.runEngine(t, 64, 0, false, []*engine.Request{greedy("a1", a1, restoreGen)})["a1"]
	want := map[string][]int32{
		"a1": aloneA1,
		"a2": h.runEngine(t, 64, 0, false, []*engine.Request{greedy("a2", restoreA2(a1, aloneA1), restoreGen)})["a2"],
		"c":  h.runEngine(t, 64, 0, false, []*engine.Request{greedy("c", c, 20)})["c"],
	}
	for _, serial := range []bool{true, false} {
		got := RestoresBesideIterations(t, m, blockSize, newExec, serial)
		for _, id := range []string{"a1", "a2", "c"} {
			if !slices.Equal(got[id], want[id]) {
				t.Fatalf("serial=%v: %s %v, alone %v (a1 %v, a2 %v, c %v)", serial, id, got[id], want[id], got["a1"], got["a2"], got["c"])
			}
		}
	}
}

// restoreGen is how many tokens a1 and a2 generate in the scenario of
// CheckEngineRestoresBesideIterations.
const restoreGen = 6

// restoreA2 is a2's prompt: a1's, a1's output and three more tokens.
func restoreA2(a1, out []int32) []int32 {
	return append(append(slices.Clone(a1), out...), 7, 8, 9)
}

// restorePrompts are the scenario's prompts a1, b and c.
func restorePrompts(m *model.Model) (a1, b, c []int32) {
	rng := rand.New(rand.NewPCG(31, 32))
	a1 = randomTokens(rng, 24, m.Config.VocabSize)
	b = randomTokens(rng, 60, m.Config.VocabSize)
	c = randomTokens(rng, 8, m.Config.VocabSize)
	return a1, b, c
}

// RestoresBesideIterations runs the scenario of
// CheckEngineRestoresBesideIterations once, overlapped or serial, checks
// that a2's context went to the host and came back (beside c's iterations
// when overlapped), and returns the tokens of a1, a2 and c.
func RestoresBesideIterations(t *testing.T, m *model.Model, blockSize int, newExec NewExec, serial bool) map[string][]int32 {
	t.Helper()
	h := hostEngines{m: m, blockSize: blockSize, newExec: newExec}
	a1, b, c := restorePrompts(m)
	e := h.newEngine(t, 20, 32, serial)
	got := map[string][]int32{}
	run(t, e, got, greedy("a1", a1, restoreGen))
	run(t, e, got, greedy("b", b, 4))
	if st := e.KVStats(); st.Spilled == 0 {
		t.Fatalf("serial=%v: b's prompt spilled nothing of a's context to the host: %+v", serial, st)
	}
	a2 := restoreA2(a1, got["a1"])
	sc := submit(t, e, greedy("c", c, 20))
	e.Step(context.Background())
	sa := submit(t, e, greedy("a2", a2, restoreGen))
	loading := 0
	for range 200 {
		r := e.Step(context.Background())
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		loading += r.Loading
		if run, wait := e.Pending(); run+wait == 0 {
			break
		}
	}
	got["c"], got["a2"] = drain(t, sc), drain(t, sa)
	if st := e.KVStats(); st.HostHits == 0 || st.Restored == 0 {
		t.Fatalf("serial=%v: a2 restored nothing from the host: %+v", serial, st)
	}
	if serial != (loading == 0) {
		t.Fatalf("serial=%v: a2 spent %d iterations loading beside c", serial, loading)
	}
	return got
}

func greedy(id string, prompt []int32, n int) *engine.Request {
	return &engine.Request{ID: id, Prompt: prompt, Params: engine.Params{MaxTokens: n, IgnoreEOS: true}}
}

// hostEngines make the engines of CheckEngineRestoresBesideIterations.
type hostEngines struct {
	m         *model.Model
	blockSize int
	newExec   NewExec
}

func (h hostEngines) newEngine(t *testing.T, blocks, hostBlocks int, serial bool) *engine.Engine {
	t.Helper()
	m := h.m
	e, err := engine.New(engine.Config{
		MaxNumSeqs: 8, MaxNumBatchedTokens: 16, MaxQueue: 16, MaxModelLen: 256,
		VocabSize: m.Config.VocabSize, EOS: m.Config.EOS, Decoder: m.Tokenizer, SerialCopies: serial,
		KV: kvcache.Config{NumBlocks: blocks, BlockSize: h.blockSize, EnablePrefixCache: true, HostBlocks: hostBlocks},
	}, h.newExec(t, blocks))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// runEngine runs reqs one after another on a fresh engine and returns each
// one's tokens.
func (h hostEngines) runEngine(t *testing.T, blocks, hostBlocks int, serial bool, reqs []*engine.Request) map[string][]int32 {
	t.Helper()
	e := h.newEngine(t, blocks, hostBlocks, serial)
	got := map[string][]int32{}
	for _, r := range reqs {
		run(t, e, got, r)
	}
	return got
}

// run submits r, steps the engine until it is idle and records r's tokens.
func run(t *testing.T, e *engine.Engine, got map[string][]int32, r *engine.Request) {
	t.Helper()
	s := submit(t, e, r)
	for range 500 {
		if res := e.Step(context.Background()); res.Err != nil {
			t.Fatal(res.Err)
		}
		if run, wait := e.Pending(); run+wait == 0 {
			break
		}
	}
	got[r.ID] = drain(t, s)
}

func submit(t *testing.T, e *engine.Engine, r *engine.Request) *engine.Stream {
	t.Helper()
	s, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drain reads a finished request's stream to its end.
func drain(t *testing.T, s *engine.Stream) []int32 {
	t.Helper()
	toks, _ := drainUsage(t, s)
	return toks
}

// drainUsage reads a finished request's stream to its end and returns its
// tokens and usage.
func drainUsage(t *testing.T, s *engine.Stream) ([]int32, engine.Usage) {
	t.Helper()
	var toks []int32
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := s.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		toks = append(toks, c.TokenIDs...)
		if c.Done {
			if c.Err != nil {
				t.Fatalf("request failed: %v", c.Err)
			}
			return toks, c.Usage
		}
	}
}

func randomTokens(rng *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return ids
}
