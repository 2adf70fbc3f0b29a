package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// produced is how many tokens st's request has generated so far.
func produced(e *Engine, st *Stream) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return st.seq.outTokens
}

// stepsToFirstToken steps env until st has a token and returns how many
// steps that took.
func stepsToFirstToken(t *testing.T, env *testEnv, st *Stream, maxSteps int) int {
	t.Helper()
	for i := 1; i <= maxSteps; i++ {
		env.step(t)
		if produced(env.e, st) > 0 {
			return i
		}
	}
	t.Fatalf("%s: no token after %d steps", st.ID(), maxSteps)
	return 0
}

// longChunks counts the last batch's sequences that prefill while more than
// the long-prefill threshold of their prompt was left.
func longChunks(e *Engine) int {
	n := 0
	for _, sq := range e.b.Seqs {
		if sq.Pos < sq.PromptLen && sq.PromptLen-sq.Pos > e.cfg.LongPrefillTokenThreshold {
			n++
		}
	}
	return n
}

func prefillOpts() envOpts {
	return envOpts{numBlocks: 512, blockSize: 4, maxSeqs: 16, maxBatched: 64, maxQueue: 100, maxModelLen: 512, prefix: true}
}

// TestShortRequestBesideLongPrefill: a short request arriving while a long
// prompt is prefilled in chunks gets its first token in the next iteration,
// not after the whole long prompt, and the long one loses at most that
// iteration; alone, the long prompt still fills every iteration's budget.
func TestShortRequestBesideLongPrefill(t *testing.T) {
	const longLen, shortLen, arriveAfter = 448, 24, 2
	for _, tc := range []struct {
		name        string
		longPrefill int
		// shortSteps bounds the steps from the short request's arrival to
		// its first token; longExtra the steps the long one loses to it.
		shortSteps, longExtra int
		// wantShortWaits: without the threshold the short request waits
		// for the long prompt (what the knob is for).
		wantShortWaits bool
	}{
		{name: "default threshold", shortSteps: 1, longExtra: 1},
		{name: "threshold 8", longPrefill: 8, shortSteps: 1, longExtra: 1},
		{name: "threshold off", longPrefill: -1, wantShortWaits: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := prefillOpts()
			o.longPrefill = tc.longPrefill

			alone := newEnv(t, o)
			st := mustSubmit(t, alone.e, req("long", prompt(longLen, 1), 4))
			longAlone := stepsToFirstToken(t, alone, st, 100)
			if want := (longLen + o.maxBatched - 1) / o.maxBatched; longAlone != want {
				t.Errorf("long prompt alone: first token after %d steps, want %d (the whole budget every step)", longAlone, want)
			}

			env := newEnv(t, o)
			long := mustSubmit(t, env.e, req("long", prompt(longLen, 1), 4))
			for range arriveAfter {
				env.step(t)
			}
			short := mustSubmit(t, env.e, req("short", prompt(shortLen, 2), 4))
			shortSteps := stepsToFirstToken(t, env, short, 100)
			longSteps := arriveAfter + shortSteps
			if produced(env.e, long) == 0 {
				longSteps += stepsToFirstToken(t, env, long, 100)
			}
			env.runUntilIdle(t, 100)
			t.Logf("short: first token %d steps after arrival; long: %d steps (%d alone)", shortSteps, longSteps, longAlone)

			if tc.wantShortWaits {
				if shortSteps < longAlone-arriveAfter {
					t.Errorf("short request got its first token %d steps after arrival, before the long prompt was done", shortSteps)
				}
				return
			}
			if shortSteps > tc.shortSteps {
				t.Errorf("short request: first token %d steps after arrival, want <= %d", shortSteps, tc.shortSteps)
			}
			if longSteps > longAlone+tc.longExtra {
				t.Errorf("long request: first token after %d steps, want <= %d (alone %d)", longSteps, longAlone+tc.longExtra, longAlone)
			}
		})
	}
}

// TestLongPrefillProgressesEveryStep: with a new request arriving at every
// step, the long prompt still takes at least the threshold each step and
// finishes.
func TestLongPrefillProgressesEveryStep(t *testing.T) {
	o := prefillOpts()
	o.longPrefill = 16
	env := newEnv(t, o)
	long := mustSubmit(t, env.e, req("long", prompt(448, 1), 2))
	var shorts []*Stream
	for i := 0; produced(env.e, long) == 0; i++ {
		if i == 100 {
			t.Fatal("long prompt not prefilled after 100 steps")
		}
		shorts = append(shorts, mustSubmit(t, env.e, req("short", prompt(40, uint64(10+i)), 2)))
		before := long.seq.numComputed
		env.step(t)
		if got, left := long.seq.numComputed-before, len(long.seq.tokens)-before; got < min(o.longPrefill, left) && produced(env.e, long) == 0 {
			t.Fatalf("step %d: the long prompt took %d tokens, want >= %d", i, got, min(o.longPrefill, left))
		}
	}
	env.runUntilIdle(t, 1000)
	for _, s := range shorts {
		collect(t, s)
	}
	collect(t, long)
}

// TestLongPrefillsTakeTurns: MaxLongPartialPrefills long prompts prefill at
// once; the next sits out, admitted, so the short request behind it in the
// queue still joins at once.
func TestLongPrefillsTakeTurns(t *testing.T) {
	for _, tc := range []struct {
		name           string
		maxLongPartial int
	}{
		{name: "one at a time", maxLongPartial: 1},
		{name: "two side by side", maxLongPartial: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := prefillOpts()
			o.longPrefill, o.maxLongPartial = 16, tc.maxLongPartial
			env := newEnv(t, o)
			long1 := mustSubmit(t, env.e, req("long1", prompt(300, 1), 2))
			env.step(t)
			long2 := mustSubmit(t, env.e, req("long2", prompt(300, 2), 2))
			short := mustSubmit(t, env.e, req("short", prompt(12, 3), 2))
			most := 0
			shortSteps := 0
			for i := 1; produced(env.e, long1) == 0 || produced(env.e, long2) == 0; i++ {
				if i == 100 {
					t.Fatal("long prompts not prefilled after 100 steps")
				}
				env.step(t)
				most = max(most, longChunks(env.e))
				if shortSteps == 0 && produced(env.e, short) > 0 {
					shortSteps = i
				}
			}
			env.runUntilIdle(t, 100)
			if most != tc.maxLongPartial {
				t.Errorf("at most %d long prefills ran in one step, want %d", most, tc.maxLongPartial)
			}
			if shortSteps != 1 {
				t.Errorf("short request behind a waiting long one: first token after %d steps, want 1", shortSteps)
			}
		})
	}
}

// TestMaxNumPartialPrefills: a request that would be one partial prefill too
// many is not admitted, and the queue behind it waits with it; one whose
// prompt fits in the budget left joins.
func TestMaxNumPartialPrefills(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxPartial int
		prompts    []int // queued behind the long prompt, in order
		wantWait   int   // left waiting after the step they arrive for
	}{
		{name: "fits in the budget left", maxPartial: 1, prompts: []int{40}, wantWait: 0},
		{name: "would be a second partial prefill", maxPartial: 1, prompts: []int{60, 8}, wantWait: 2},
		{name: "room for a second partial prefill", maxPartial: 2, prompts: []int{60, 8}, wantWait: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := prefillOpts()
			o.longPrefill, o.maxPartial = 16, tc.maxPartial
			env := newEnv(t, o)
			mustSubmit(t, env.e, req("long", prompt(448, 1), 2))
			env.step(t)
			for i, n := range tc.prompts {
				mustSubmit(t, env.e, req("short", prompt(n, uint64(2+i)), 2))
			}
			env.step(t)
			if _, wait := env.e.Pending(); wait != tc.wantWait {
				t.Errorf("%d requests waiting, want %d", wait, tc.wantWait)
			}
			env.runUntilIdle(t, 100)
		})
	}
}

func TestPartialPrefillConfig(t *testing.T) {
	type knobs struct{ Threshold, Partial, LongPartial int }
	for _, tc := range []struct {
		name    string
		in      knobs
		want    knobs
		wantErr string
	}{
		{name: "defaults", want: knobs{Threshold: 512, Partial: 4, LongPartial: 4}},
		{name: "threshold off", in: knobs{Threshold: -1}, want: knobs{Threshold: 0, Partial: 4, LongPartial: 4}},
		{name: "set", in: knobs{Threshold: 100, Partial: 3, LongPartial: 2}, want: knobs{Threshold: 100, Partial: 3, LongPartial: 2}},
		{name: "negative partial", in: knobs{Partial: -1}, wantErr: "MaxNumPartialPrefills"},
		{name: "more long than partial", in: knobs{Partial: 2, LongPartial: 3}, wantErr: "MaxLongPartialPrefills"},
		{name: "negative long partial", in: knobs{LongPartial: -1}, wantErr: "MaxLongPartialPrefills"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Config{
				MaxModelLen: 64, KV: kvcache.Config{NumBlocks: 8, BlockSize: 4}, Decoder: letters{},
				LongPrefillTokenThreshold: tc.in.Threshold, MaxNumPartialPrefills: tc.in.Partial, MaxLongPartialPrefills: tc.in.LongPartial,
			}, nopExec{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := e.Config()
			got := knobs{c.LongPrefillTokenThreshold, c.MaxNumPartialPrefills, c.MaxLongPartialPrefills}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("effective knobs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTitleBesideLongPrefillOnSim is the user's measurement on the sim
// executor (simulated H100, llama-3.1-8b, virtual time): a 2,303-token
// request arriving with, or half-way through, a 31,178-token prompt's
// prefill gets its first token within twice its time alone at the default
// settings; with the threshold off it waits for the whole long prompt.
func TestTitleBesideLongPrefillOnSim(t *testing.T) {
	const long, title = 31_178, 2_303
	for _, tc := range []struct {
		name      string
		threshold int
		within    bool
	}{
		{name: "default", within: true},
		{name: "threshold off", threshold: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alone := beside{threshold: tc.threshold, short: title}.run(t)["short"]
			for _, arrive := range []int{0, long / 2048 / 2} {
				got := beside{threshold: tc.threshold, long: long, short: title, arriveAfter: arrive}.run(t)["short"]
				ratio := float64(got) / float64(alone)
				t.Logf("arriving after %d iterations: TTFT %v, %.2f× its %v alone", arrive, got, ratio, alone)
				if (ratio <= 2) != tc.within {
					t.Errorf("arriving after %d iterations: TTFT %.2f× its time alone, want within 2×: %v", arrive, ratio, tc.within)
				}
			}
		})
	}
}
