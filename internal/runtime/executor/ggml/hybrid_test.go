//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
)

// TestHybridTurnResumesFromCheckpoint: an agent program's second turn
// extends its first turn's tokens; on a hybrid model the engine resumes
// it from the recurrent-state checkpoint its first turn left at its last
// decoded block boundary (the cached blocks beyond it are not used), or,
// keeping only prompts' checkpoints, at its first prompt's last boundary,
// or, keeping none, not at all; the second turn's tokens are those of an
// engine that computes it from scratch.
func TestHybridTurnResumesFromCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		cfg    model.Config
		mode   engine.CheckpointMode
		cached int
	}{
		// Turn 1 computes 37+10 tokens (its last sampled token is not).
		{qwen35Config(), engine.CheckpointPrograms, 47 / testBlockSize * testBlockSize},
		{qwen35moeConfig(), engine.CheckpointPrograms, 47 / testBlockSize * testBlockSize},
		{qwen3nextConfig(), engine.CheckpointPrograms, 47 / testBlockSize * testBlockSize},
		{qwen35Config(), engine.CheckpointPrompts, 37 / testBlockSize * testBlockSize},
		{qwen35Config(), engine.CheckpointNone, 0},
	} {
		cfg := tc.cfg
		t.Run(cfg.Arch+"/"+tc.mode.String(), func(t *testing.T) {
			m := randomModel(t, cfg, model.F32, 5)
			rng := rand.New(rand.NewPCG(3, 4))
			turn1 := make([]int32, 37)
			for i := range turn1 {
				turn1[i] = int32(rng.IntN(m.Config.VocabSize))
			}
			run := func(e *engine.Engine, p []int32, id string) ([]int32, engine.Usage) { return runTurn(t, e, p, id) }
			e, reg := newEngine(t, m, engineOpts{numBlocks: 64, maxSeqs: 4, maxBatched: 64, prefix: true, checkpoints: tc.mode})
			out1, _ := run(e, turn1, "turn1")
			turn2 := append(append(append([]int32(nil), turn1...), out1...), 7, 8, 9)
			got, u := run(e, turn2, "turn2")

			fresh, _ := newEngine(t, m, engineOpts{numBlocks: 64, maxSeqs: 4, maxBatched: 64, prefix: true})
			want, _ := run(fresh, turn2, "alone")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("second turn from the checkpoint differs from scratch (-scratch +resumed):\n%s", diff)
			}
			if u.CachedTokens != tc.cached {
				t.Errorf("second turn resumed from %d cached tokens, want %d", u.CachedTokens, tc.cached)
			}
			if got := counter(t, reg, "kvpilot_recurrent_state_restored_tokens_total"); got != float64(tc.cached) {
				t.Errorf("kvpilot_recurrent_state_restored_tokens_total %v, want %d", got, tc.cached)
			}
		})
	}
}

// TestHybridCheckpointsSpillToHost: when other programs' checkpoints
// evict a program's from the device, with host state slots they spill
// there and its next turn still resumes from its last one (with the
// tokens of a fresh engine); without, the turn finds none and computes
// its whole prompt. A hybrid model's recurrent states, and gpt-oss's
// sliding layers' rings with the window cache (window_ring.go).
func TestHybridCheckpointsSpillToHost(t *testing.T) {
	forStateModels(t, testCheckpointsSpillToHost)
}

// forStateModels runs f for each kind of state an executor keeps: a
// hybrid model's recurrent states (qwen35), and gpt-oss's sliding layers'
// rings with the window cache (a window of 8, rings of 8 + 16 cells).
func forStateModels(t *testing.T, f func(t *testing.T, m *model.Model)) {
	for _, tc := range []struct {
		cfg         model.Config
		windowChunk int
	}{
		{qwen35Config(), 0},
		{gptossNarrow(), 16},
	} {
		t.Run(tc.cfg.Arch, func(t *testing.T) {
			windowChunk = tc.windowChunk
			defer func() { windowChunk = 0 }()
			f(t, randomModel(t, tc.cfg, model.F32, 5))
		})
	}
}

func testCheckpointsSpillToHost(t *testing.T, m *model.Model) {
	rng := rand.New(rand.NewPCG(8, 9))
	prompt := func(n int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(rng.IntN(m.Config.VocabSize))
		}
		return p
	}
	turn1, others := prompt(37), make([][]int32, 14)
	for i := range others {
		others[i] = prompt(21)
	}
	for _, host := range []int{0, 64} {
		t.Run(fmt.Sprintf("host=%d", host), func(t *testing.T) {
			// 16 state slots: 4 running, 12 device checkpoints; each
			// other program saves two (its prompt's, its decoded one).
			e, reg := newEngine(t, m, engineOpts{numBlocks: 256, maxSeqs: 4, maxBatched: 64, prefix: true, hostStates: host})
			run := func(p []int32, id string) ([]int32, engine.Usage) { return runTurn(t, e, p, id) }
			out1, _ := run(turn1, "a1")
			for i, p := range others {
				run(p, fmt.Sprintf("o%d", i))
			}
			turn2 := append(append(append([]int32(nil), turn1...), out1...), 7, 8, 9)
			got, u := run(turn2, "a2")
			fresh, _ := newEngine(t, m, engineOpts{numBlocks: 256, maxSeqs: 4, maxBatched: 64, prefix: true})
			want, _ := runTurn(t, fresh, turn2, "alone")
			if diff := cmp.Diff(want, got); diff != "" {
				// On a GPU the resumed prefill's chunks pick other kernels
				// than the whole prompt's: a near tie may flip after the
				// first tokens (gpt-oss's rings from the host, on an H200,
				// after 2); the first token depends on the restored state.
				if testDevice() == DeviceCPU || len(got) == 0 || len(want) == 0 || got[0] != want[0] {
					t.Errorf("second turn differs from scratch (-scratch +resumed):\n%s", diff)
				} else {
					t.Logf("on %s the second turn leaves scratch's tokens after its first (-scratch +resumed):\n%s", testDevice(), diff)
				}
			}
			spills := counter(t, reg, "kvpilot_recurrent_state_spills_total")
			wantCached := 0
			if host > 0 {
				wantCached = 47 / testBlockSize * testBlockSize
				if spills == 0 {
					t.Error("no checkpoint spilled to the host")
				}
			} else if spills != 0 {
				t.Errorf("%v spills without host slots", spills)
			}
			if u.CachedTokens != wantCached {
				t.Errorf("second turn resumed from %d cached tokens, want %d", u.CachedTokens, wantCached)
			}
		})
	}
}

// runTurn runs one request of 11 greedy tokens after p through e by hand
// and returns its tokens and usage.
func runTurn(t *testing.T, e *engine.Engine, p []int32, id string) ([]int32, engine.Usage) {
	t.Helper()
	s, err := e.Submit(context.Background(), &engine.Request{ID: id, Prompt: p, Params: engine.Params{MaxTokens: 11, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		if run, wait := e.Pending(); run == 0 && wait == 0 {
			break
		}
		e.Step(context.Background())
	}
	toks, _, c, err := s.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return toks, c.Usage
}

// TestStateSlotsChecked: the executor refuses a batch whose state slots
// are out of range or shared, or whose copies name a slot it lacks.
func TestStateSlotsChecked(t *testing.T) {
	m := randomModel(t, qwen35Config(), model.F32, 5)
	x := newTestExec(t, m, 16)
	slots := x.StateSlots()
	if slots != DefaultStateSlots {
		t.Fatalf("%d state slots, want the default %d", slots, DefaultStateSlots)
	}
	if g := x.KV(); g.Layers != 1 {
		t.Errorf("KV geometry of %d layers, want the one attending layer of 4", g.Layers)
	}
	seq := func(state int) batch.Seq {
		return batch.Seq{Tokens: []int32{1, 2}, Blocks: contiguous(0, 2), State: state, Sample: true}
	}
	for _, c := range []struct {
		name string
		b    batch.Batch
		want string
	}{
		{"slot out of range", batch.Batch{Seqs: []batch.Seq{seq(slots)}}, "outside the executor's"},
		{"negative slot", batch.Batch{Seqs: []batch.Seq{seq(-1)}}, "outside the executor's"},
		{"shared slot", batch.Batch{Seqs: []batch.Seq{seq(3), {Tokens: []int32{1}, Blocks: contiguous(4, 2), State: 3}}}, "another sequence's"},
		{"copy out of range", batch.Batch{Seqs: []batch.Seq{seq(0)}, StateCopies: []batch.StateCopy{{From: slots, To: 0}}}, "state copy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.b
			b.BlockSize = testBlockSize
			for _, s := range b.Seqs {
				b.NumTokens += len(s.Tokens)
			}
			out := &batch.Output{Logits: make([][]float32, len(b.Seqs)), Tokens: make([]int32, len(b.Seqs)), Sampled: make([]bool, len(b.Seqs))}
			err := x.Execute(context.Background(), &b, out)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestHybridSavesAtPromptEndAndDecoded: a prompt prefilled in chunks
// saves its state at its last block boundary only, not where its earlier
// chunks end, then at each boundary it decodes past (37 tokens in chunks
// of 16, 10 decoded, blocks of 4: saves at 36, 40 and 44).
func TestHybridSavesAtPromptEndAndDecoded(t *testing.T) {
	m := randomModel(t, qwen35Config(), model.F32, 5)
	e, reg := newEngine(t, m, engineOpts{numBlocks: 64, maxSeqs: 4, maxBatched: 16, prefix: true})
	p := make([]int32, 37)
	for i := range p {
		p[i] = int32(i*7 + 3)
	}
	runTurn(t, e, p, "chunked")
	if got := counter(t, reg, "kvpilot_recurrent_state_saves_total"); got != 3 {
		t.Errorf("%v states saved, want 3 (the prompt's last boundary and two decoded ones)", got)
	}
}

// TestHybridPausedProgramStateMovesToHost: pausing a program (the
// programs table's offload of its tokens) moves its last checkpoint to a
// host slot before the next iteration, and its next turn resumes from
// there with the tokens of a fresh engine.
func TestHybridPausedProgramStateMovesToHost(t *testing.T) {
	m := randomModel(t, qwen35Config(), model.F32, 5)
	turn1 := make([]int32, 37)
	for i := range turn1 {
		turn1[i] = int32((i*11 + 5) % 300)
	}
	e, reg := newEngine(t, m, engineOpts{numBlocks: 64, maxSeqs: 4, maxBatched: 64, prefix: true, hostStates: 8})
	out1, _ := runTurn(t, e, turn1, "a1")
	turn2 := append(append(append([]int32(nil), turn1...), out1...), 7, 8, 9)
	e.OffloadSaltedPrefix("", turn2)
	// An idle engine runs no iteration: the copy waits for the next one.
	e.Step(context.Background())
	got, u := runTurn(t, e, turn2, "a2")
	if n := counter(t, reg, "kvpilot_recurrent_state_spills_total"); n != 1 {
		t.Errorf("%v checkpoints moved to the host, want 1 (the paused program's)", n)
	}
	fresh, _ := newEngine(t, m, engineOpts{numBlocks: 64, maxSeqs: 4, maxBatched: 64, prefix: true})
	want, _ := runTurn(t, fresh, turn2, "alone")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second turn from the host differs from scratch (-scratch +resumed):\n%s", diff)
	}
	if want := 47 / testBlockSize * testBlockSize; u.CachedTokens != want {
		t.Errorf("second turn resumed from %d cached tokens, want %d", u.CachedTokens, want)
	}
}

// TestStatesReadInPlace: a decoding group whose state slots are
// consecutive reads them in place (a view, no gather, no multiplication)
// and gives the logits, bit for bit, of the same sequences in slots the
// executor must gather; a group with a fresh state gathers.
func TestStatesReadInPlace(t *testing.T) {
	m := randomModel(t, qwen35Config(), model.F32, 5)
	inPlace, gathered := newTestExec(t, m, 64), newTestExec(t, m, 64)
	prompts := [][]int32{{1, 2, 3, 4, 5}, {9, 8, 7}, {4, 4, 2, 7, 1, 6}}
	run := func(x *Executor, slots []int, step int, toks []int32) ([][]float32, []stateGroup) {
		var seqs []batch.Seq
		for i, p := range prompts {
			sq := batch.Seq{Tokens: p, Blocks: contiguous(i*16, 16), State: slots[i], Sample: true}
			if step > 0 {
				sq.Tokens, sq.Pos = []int32{toks[i]}, len(p)+step-1
			}
			seqs = append(seqs, sq)
		}
		return execute(t, x, seqs), slices.Clone(x.s.groups)
	}
	toks := make([]int32, len(prompts))
	for step := range 6 {
		want, _ := run(gathered, []int{5, 2, 9}, step, toks)
		got, groups := run(inPlace, []int{3, 4, 5}, step, toks)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("step %d: logits in slots 3-5 differ from slots 5, 2, 9", step)
		}
		inPlaceGroups := 0
		for _, g := range groups {
			if g.slot0 >= 0 {
				inPlaceGroups++
			}
			if g.fresh != (step == 0) || (g.slot0 >= 0) != (step > 0) {
				t.Errorf("step %d: group %+v", step, g)
			}
		}
		if step > 0 && (len(groups) != 1 || inPlaceGroups != 1 || groups[0].slot0 != 3) {
			t.Errorf("step %d: groups %+v, want one read in place from slot 3", step, groups)
		}
		for i := range toks {
			toks[i] = argmax(want[i])
		}
	}
}
