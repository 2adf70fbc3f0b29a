package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/completion"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

func TestHostTierNeedsABlockCopier(t *testing.T) {
	_, err := New(Config{
		MaxModelLen: 64, Decoder: letters{eos: 0},
		KV: kvcache.Config{NumBlocks: 8, EnablePrefixCache: true, HostBlocks: 8},
	}, nopExec{})
	if err == nil || !strings.Contains(err.Error(), "batch.BlockCopier") {
		t.Fatalf("New = %v, want an error naming batch.BlockCopier", err)
	}
}

// firstStep runs a program's first request (a 20-token prompt, 4 new
// tokens) to the end and returns the program's context and how many full
// blocks of it have KV (the last sampled token has none yet).
func firstStep(t *testing.T, env *testEnv, o envOpts) (ctx []int32, full int) {
	t.Helper()
	p := prompt(20, 1)
	s := mustSubmit(t, env.e, req("a", p, 4))
	env.runUntilIdle(t, 50)
	toks, _, _ := collect(t, s)
	ctx = append(append([]int32{}, p...), toks...)
	return ctx, (len(ctx) - 1) / o.blockSize
}

// TestOffloadRunsOnIdleEngine: the copies of an offload happen at the next
// iteration even when no request runs, and a resumed program's request
// restores its prefix from the host instead of recomputing it.
func TestOffloadRunsOnIdleEngine(t *testing.T) {
	o := defaultOpts()
	o.numBlocks, o.hostBlocks = 16, 32
	env := newEnv(t, o)
	ctx, full := firstStep(t, env, o)
	if n := env.e.OffloadPrefix(ctx); n != full {
		t.Fatalf("OffloadPrefix moved %d blocks, want %d", n, full)
	}
	env.step(t)
	if env.x.copiedOut != full {
		t.Fatalf("executor copied %d blocks out on an idle step, want %d", env.x.copiedOut, full)
	}
	// Another request takes every device block.
	other := mustSubmit(t, env.e, req("b", prompt(60, 2), 2))
	env.runUntilIdle(t, 100)
	collect(t, other)
	next := mustSubmit(t, env.e, req("a2", append(ctx, 5), 2))
	env.runUntilIdle(t, 50)
	_, _, f := collect(t, next)
	if f.Usage.CachedTokens != full*o.blockSize {
		t.Fatalf("resumed request cached %d tokens, want %d", f.Usage.CachedTokens, full*o.blockSize)
	}
	if st := env.e.KVStats(); st.HostHits == 0 || env.x.copiedIn == 0 {
		t.Fatalf("resumed request did not hit the host tier: %+v, %d copied in", st, env.x.copiedIn)
	}
}

// offloadedProgram is an engine of 16 device and 32 host blocks (overlapping
// copies or not) on which program "a" ran its first request, a 20-token
// prompt p, and was offloaded to the host tier; the copies have run.
func offloadedProgram(t *testing.T, overlap bool) (env *testEnv, p []int32) {
	t.Helper()
	o := defaultOpts()
	o.numBlocks, o.hostBlocks, o.overlap = 16, 32, overlap
	env = newEnv(t, o)
	env.x.eosMod = 0
	p = prompt(20, 1)
	first := mustSubmit(t, env.e, req("a", p, 1))
	env.runUntilIdle(t, 50)
	collect(t, first)
	env.e.OffloadPrefix(p)
	env.step(t)
	return env, p
}

// wantCopyFailure checks a step whose copies failed under request s, which
// resumed the prompt p: the step reports it, s fails, and the contents the
// copies moved are not served again.
func wantCopyFailure(t *testing.T, env *testEnv, r StepResult, s *Stream, p []int32) {
	t.Helper()
	if r.Err == nil || !strings.Contains(r.Err.Error(), "copy") {
		t.Fatalf("step error = %v, want the copy failure", r.Err)
	}
	if _, _, f := collect(t, s); f.FinishReason != completion.Error {
		t.Fatalf("request over failed copies finished %v, want error", f.FinishReason)
	}
	env.x.failCopy = false
	if got := env.e.KV().CachedPrefix(p); got != 0 {
		t.Fatalf("CachedPrefix = %d after the failed copy, want 0", got)
	}
}

// TestCopyFailureFailsBatchAndDropsBlocks: when the executor cannot copy, the
// request that needed the copied-in blocks fails, the contents are never
// served again, and the engine goes on.
func TestCopyFailureFailsBatchAndDropsBlocks(t *testing.T) {
	env, p := offloadedProgram(t, false)
	env.x.failCopy = true
	s := mustSubmit(t, env.e, req("a2", append(p, 3), 2))
	wantCopyFailure(t, env, env.step(t), s, append(p, 3))
	wantGoesOn(t, env, mustSubmit(t, env.e, req("a3", append(p, 3), 2)))
}

// wantGoesOn runs the engine until it is idle and checks that s, a request
// the failed copies were not for, ran to its length and no block leaked.
func wantGoesOn(t *testing.T, env *testEnv, s *Stream) {
	t.Helper()
	env.runUntilIdle(t, 50)
	if _, _, f := collect(t, s); f.FinishReason != completion.Length {
		t.Fatalf("a request the failed copies were not for finished %v, want length", f.FinishReason)
	}
	if used := env.e.KV().Stats().Used; used != 0 {
		t.Errorf("%d blocks leaked", used)
	}
}

// TestEvictedBlocksOfAnActingProgramComeBackFromHost: a program whose
// request finished and that is in a tool call (nobody offloads or pauses it)
// loses its device blocks to another request; with a host tier they spill
// there as they are evicted, and its next request restores them instead of
// recomputing, with the same output as on an engine that never evicted them.
// With DropEvicted (the behaviour before write-back) it recomputes.
func TestEvictedBlocksOfAnActingProgramComeBackFromHost(t *testing.T) {
	for _, drop := range []bool{false, true} {
		o := defaultOpts()
		o.numBlocks, o.hostBlocks, o.dropEvicted = 16, 32, drop
		env := newEnv(t, o)
		ctx, full := firstStep(t, env, o)

		// Another request takes every device block while the program acts.
		other := mustSubmit(t, env.e, req("b", prompt(60, 2), 2))
		env.runUntilIdle(t, 100)
		collect(t, other)
		if env.x.copiedOut == 0 && !drop {
			t.Fatalf("no block was copied out while the device was reused: %+v", env.e.KVStats())
		}
		next := append(ctx, 5)
		s := mustSubmit(t, env.e, req("a2", next, 3))
		env.runUntilIdle(t, 50)
		got, _, f := collect(t, s)

		solo := newEnv(t, defaultOpts())
		ss := mustSubmit(t, solo.e, req("solo", next, 3))
		solo.runUntilIdle(t, 50)
		want, _, _ := collect(t, ss)
		if !slices.Equal(got, want) {
			t.Fatalf("drop=%v: next request produced %v, alone %v", drop, got, want)
		}
		st := env.e.KVStats()
		if drop {
			if f.Usage.CachedTokens != 0 || st.Spilled != 0 || env.x.copiedIn != 0 {
				t.Fatalf("DropEvicted: cached %d tokens, %+v; want a full recompute", f.Usage.CachedTokens, st)
			}
			continue
		}
		if f.Usage.CachedTokens != full*o.blockSize {
			t.Fatalf("next request cached %d tokens, want %d (restored from host)", f.Usage.CachedTokens, full*o.blockSize)
		}
		if st.Spilled == 0 || st.HostHits != int64(full*o.blockSize) || env.x.copiedIn < full {
			t.Fatalf("next request did not restore from the host tier: %+v, %d copied in", st, env.x.copiedIn)
		}
	}
}

// TestOverlappedCopiesFailOnlyTheLoadingSequence: with an executor that
// overlaps copies, a request whose KV comes back from the host tier loads
// during another request's iteration and joins the next one; when those
// copies fail, it fails alone (the running request's batch never needed
// them), the contents are dropped, and the engine goes on.
func TestOverlappedCopiesFailOnlyTheLoadingSequence(t *testing.T) {
	env, p := offloadedProgram(t, true)
	running := mustSubmit(t, env.e, req("b", prompt(8, 2), 6))
	env.step(t)

	env.x.failCopy = true
	loading := mustSubmit(t, env.e, req("a2", append(p, 3), 2))
	r := env.step(t)
	if r.Loading != 1 || r.Scheduled != 1 || env.x.overlapped == 0 {
		t.Fatalf("step = %+v with %d transfers beside it; want b computing while a2 loads", r, env.x.overlapped)
	}
	wantCopyFailure(t, env, r, loading, append(p, 3))
	wantGoesOn(t, env, running)
}

// TestRestoredSequenceLoadsBesideTheBatch: a request admitted with its
// prefix on the host tier does not wait for its copies in the iteration
// that admits it: the copies run beside that iteration, it joins the next,
// and its output is the same as on a serial executor's.
func TestRestoredSequenceLoadsBesideTheBatch(t *testing.T) {
	var outs [2][]int32
	for i, overlap := range []bool{false, true} {
		env, p := offloadedProgram(t, overlap)
		running := mustSubmit(t, env.e, req("b", prompt(8, 2), 6))
		env.step(t)
		next := mustSubmit(t, env.e, req("a2", append(p, 3), 4))
		r := env.step(t)
		switch {
		case overlap && (r.Loading != 1 || r.Scheduled != 1 || env.x.overlapped == 0):
			t.Fatalf("overlap: step = %+v, %d transfers beside it; want a2 loading beside b", r, env.x.overlapped)
		case !overlap && (r.Loading != 0 || r.Scheduled != 2):
			t.Fatalf("serial: step = %+v; want a2 and b in one batch", r)
		}
		// The observer (the runtime's metrics) sees the same.
		st := env.obs.last
		if overlap != (st.Loading == 1 && st.CopiedBeside > 0) || overlap == (st.CopiedBefore > 0) {
			t.Fatalf("overlap=%v: iteration stats loading %d, copied %d before and %d beside", overlap, st.Loading, st.CopiedBefore, st.CopiedBeside)
		}
		env.runUntilIdle(t, 50)
		collect(t, running)
		outs[i], _, _ = collect(t, next)
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Fatalf("restored request produced %v overlapped, %v serially", outs[1], outs[0])
	}
}
