package exectest

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// MoveChain moves the cached chain of tokens under salt from engine src to
// engine dst, chunk blocks at a time, as the control API's transfer does,
// and returns how many blocks dst holds. corrupt, when set, changes each
// chunk's bytes on the way.
func MoveChain(t testing.TB, src, dst *engine.Engine, salt kvcache.Salt, tokens []int32, chunk int, corrupt func([]byte)) int {
	t.Helper()
	ctx := context.Background()
	format, ok := src.BlockFormat()
	if !ok {
		t.Fatal("source engine cannot export blocks")
	}
	var buf []byte
	moved := 0
	for {
		n, data, err := src.ExportBlocks(ctx, salt, tokens, moved, chunk, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return moved
		}
		if corrupt != nil {
			corrupt(data)
		}
		got, err := dst.ImportBlocks(ctx, format, salt, tokens, moved, n, data)
		if err != nil {
			t.Fatal(err)
		}
		moved += got
		if got < n {
			return moved
		}
		buf = data
	}
}

// MoveState moves the deepest recurrent-state checkpoint within the first
// blocks blocks of tokens' chain under salt from engine src to engine dst
// (a hybrid model's, after MoveChain), as the control API's transfer
// does, and returns the blocks it follows (0: none moved). corrupt, when
// set, changes the state's bytes on the way.
func MoveState(t testing.TB, src, dst *engine.Engine, salt kvcache.Salt, tokens []int32, blocks int, corrupt func([]byte)) int {
	t.Helper()
	ctx := context.Background()
	format, _ := src.BlockFormat()
	k, data, err := src.ExportState(ctx, salt, tokens, blocks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k == 0 {
		return 0
	}
	if corrupt != nil {
		corrupt(data)
	}
	if err := dst.ImportState(ctx, format, salt, tokens, k, data); err != nil {
		t.Fatal(err)
	}
	return k
}

// CheckEngineMovesKV runs a program's first request on engine A, moves its
// cached context to engine B (a fresh engine over another executor of the
// same model) in chunks, and runs its next request on B: B's prefill
// finds the whole moved chain cached (no recompute), and the request
// generates exactly what it generates on an engine of its own. Moving
// corrupted bytes instead changes what B generates, so the tokens do come
// from the moved KV; and an engine whose blocks are of another size
// refuses the blocks, changing nothing.
func CheckEngineMovesKV(t *testing.T, m *model.Model, blockSize int, newExec NewExec) {
	t.Helper()
	h := hostEngines{m: m, blockSize: blockSize, newExec: newExec}
	rng := rand.New(rand.NewPCG(41, 42))
	a1 := randomTokens(rng, 5*blockSize+3, m.Config.VocabSize)
	const gen = 8
	salt := kvcache.SaltOf("tenant-a")
	withSalt := func(r *engine.Request) *engine.Request { r.CacheSalt = "tenant-a"; return r }

	alone := h.runEngine(t, 64, 0, false, []*engine.Request{greedy("a1", a1, gen)})["a1"]
	ctx := append(slices.Clone(a1), alone...)
	a2 := append(slices.Clone(ctx), 11, 12, 13)
	want := h.runEngine(t, 64, 0, false, []*engine.Request{greedy("a2", a2, gen)})["a2"]
	chain := len(ctx) / blockSize

	for _, tc := range []struct {
		name    string
		corrupt func([]byte)
	}{
		{"intact", nil},
		{"corrupted", func(b []byte) {
			for i := range b {
				b[i] ^= 0x40
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := h.newEngine(t, 32, 0, false)
			got := map[string][]int32{}
			run(t, src, got, withSalt(greedy("a1", a1, gen)))
			if !slices.Equal(got["a1"], alone) {
				t.Fatalf("a1 on A: %v, alone %v", got["a1"], alone)
			}
			dst := h.newEngine(t, 32, 8, false)
			if moved := MoveChain(t, src, dst, salt, ctx, 2, tc.corrupt); moved != chain {
				t.Fatalf("moved %d blocks of a %d-block chain", moved, chain)
			}
			if st := dst.KVStats(); st.Imported != int64(chain) {
				t.Fatalf("B imported %d blocks, want %d", st.Imported, chain)
			}
			s := submit(t, dst, withSalt(greedy("a2", a2, gen)))
			for range 500 {
				if r := dst.Step(context.Background()); r.Err != nil {
					t.Fatal(r.Err)
				}
				if run, wait := dst.Pending(); run+wait == 0 {
					break
				}
			}
			toks, usage := drainUsage(t, s)
			if usage.CachedTokens != chain*blockSize {
				t.Fatalf("B's prefill found %d tokens cached, want the moved %d", usage.CachedTokens, chain*blockSize)
			}
			if same := slices.Equal(toks, want); same != (tc.corrupt == nil) {
				t.Fatalf("a2 on B: %v, alone %v", toks, want)
			}
		})
	}

	t.Run("mismatched format", func(t *testing.T) {
		src := h.newEngine(t, 32, 0, false)
		run(t, src, map[string][]int32{}, greedy("a1", a1, gen))
		dst := h.newEngine(t, 32, 0, false)
		format, _ := src.BlockFormat()
		n, data, err := src.ExportBlocks(context.Background(), 0, ctx, 0, 2, nil)
		if err != nil || n != 2 {
			t.Fatalf("export: %d blocks, %v", n, err)
		}
		bigger, otherType := format, format
		bigger.BlockSize *= 2
		otherType.Geometry.DType = kvcache.DTypeF16
		if format.Geometry.DType == kvcache.DTypeF16 {
			otherType.Geometry.DType = kvcache.DTypeBF16
		}
		for _, f := range []batch.BlockFormat{bigger, otherType} {
			if got, err := dst.ImportBlocks(context.Background(), f, 0, ctx, 0, n, data); err == nil || got != 0 {
				t.Fatalf("import of blocks of format %+v into %+v: %d blocks, err %v", f, format, got, err)
			}
		}
		if st := dst.KVStats(); st.Imported != 0 || st.Cached != 0 {
			t.Fatalf("a refused import changed the cache: %+v", st)
		}
		if got, err := dst.ImportBlocks(context.Background(), format, 0, ctx, 0, n, data); err != nil || got != n {
			t.Fatalf("import of the same format: %d blocks, %v", got, err)
		}
	})
}
