//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/control"
	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestHybridMoveResumesFromCheckpoint: a hybrid model's program moves
// between two engines with its blocks and its last recurrent-state
// checkpoint; its next turn on the destination resumes from the moved
// checkpoint (the tokens before it are not computed) and generates
// exactly what an engine of its own generates for the same prompt.
// Without the state the destination resumes nothing; with the state's
// bytes corrupted its tokens differ, so they do come from the moved
// state. The source's checkpoint may be on its way to the host (the
// program paused, the copy waiting for an iteration): the export reads
// it once it landed. The same for gpt-oss's rings with the window cache.
func TestHybridMoveResumesFromCheckpoint(t *testing.T) {
	forStateModels(t, testHybridMove)
}

func testHybridMove(t *testing.T, m *model.Model) {
	rng := rand.New(rand.NewPCG(5, 6))
	turn1 := make([]int32, 37)
	for i := range turn1 {
		turn1[i] = int32(rng.IntN(m.Config.VocabSize))
	}
	opts := engineOpts{numBlocks: 64, maxSeqs: 4, maxBatched: 64, prefix: true}
	fresh, _ := newEngine(t, m, opts)
	out1, _ := runTurn(t, fresh, turn1, "alone1")
	ctx := append(slices.Clone(turn1), out1...)
	turn2 := append(slices.Clone(ctx), 7, 8, 9)
	fresh, _ = newEngine(t, m, opts)
	want, _ := runTurn(t, fresh, turn2, "alone2")
	salt := kvcache.SaltOf("")
	resumed := 47 / testBlockSize * testBlockSize // turn 1's last decoded block boundary

	for _, tc := range []struct {
		name       string
		noState    bool
		corrupt    func([]byte)
		paused     bool
		wantCached int
	}{
		{name: "with state", wantCached: resumed},
		{name: "paused source", paused: true, wantCached: resumed},
		{name: "without state", noState: true},
		{name: "corrupted state", corrupt: func(b []byte) {
			for i := 0; i < len(b); i += 4 {
				b[i+3] ^= 0x40 // each F32's sign and exponent
			}
		}, wantCached: resumed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcOpts := opts
			if tc.paused {
				srcOpts.hostStates = 4
			}
			src, _ := newEngine(t, m, srcOpts)
			if got, _ := runTurn(t, src, turn1, "a1"); !slices.Equal(got, out1) {
				t.Fatalf("turn 1 on the source: %v, alone %v", got, out1)
			}
			if tc.paused {
				src.OffloadSaltedPrefix("", ctx) // the copy waits for an iteration
			}
			dst, reg := newEngine(t, m, opts)
			chain := src.CachedChainBlocks(salt, ctx)
			if chain*testBlockSize != resumed {
				t.Fatalf("the source offers %d blocks, want %d (its deepest checkpoint)", chain, resumed/testBlockSize)
			}
			if moved := exectest.MoveChain(t, src, dst, salt, ctx, 2, nil); moved < chain {
				t.Fatalf("moved %d blocks of %d", moved, chain)
			}
			if !tc.noState {
				if k := exectest.MoveState(t, src, dst, salt, ctx, chain, tc.corrupt); k != chain {
					t.Fatalf("moved the state after %d blocks, want %d", k, chain)
				}
				if st := dst.StateStats(); st.Imported != 1 || st.Checkpoints != 1 {
					t.Fatalf("destination: %d states imported, %d checkpoints; want 1, 1", st.Imported, st.Checkpoints)
				}
			}
			got, u := runTurn(t, dst, turn2, "a2")
			if u.CachedTokens != tc.wantCached {
				t.Errorf("turn 2 on the destination resumed from %d cached tokens, want %d", u.CachedTokens, tc.wantCached)
			}
			if n := counter(t, reg, "kvpilot_recurrent_state_restored_tokens_total"); n != float64(tc.wantCached) {
				t.Errorf("kvpilot_recurrent_state_restored_tokens_total %v, want %d", n, tc.wantCached)
			}
			wantImports := 1.0
			if tc.noState {
				wantImports = 0
			}
			if n := counter(t, reg, "kvpilot_recurrent_state_imports_total"); n != wantImports {
				t.Errorf("kvpilot_recurrent_state_imports_total %v, want %v", n, wantImports)
			}
			if same := cmp.Equal(want, got); same != (tc.corrupt == nil) {
				t.Errorf("turn 2 on the destination: %v, alone %v", got, want)
			}
		})
	}

	t.Run("mismatched state size", func(t *testing.T) {
		src, _ := newEngine(t, m, opts)
		runTurn(t, src, turn1, "a1")
		dst, _ := newEngine(t, m, opts)
		chain := exectest.MoveChain(t, src, dst, salt, ctx, 4, nil)
		format, _ := src.BlockFormat()
		k, data, err := src.ExportState(context.Background(), salt, ctx, chain, nil)
		if err != nil || k == 0 || len(data) != format.StateBytes || format.StateBytes == 0 {
			t.Fatalf("export: state after %d blocks, %d bytes (format %d), %v", k, len(data), format.StateBytes, err)
		}
		other := format
		other.StateBytes += 4
		if err := dst.ImportState(context.Background(), other, salt, ctx, k, append(data, 0, 0, 0, 0)); err == nil {
			t.Fatal("a state of another size was imported")
		}
		if _, err := dst.ImportBlocks(context.Background(), other, salt, ctx, 0, 1, make([]byte, format.BlockBytes())); err == nil {
			t.Fatal("blocks of a format with another state size were imported")
		}
		if st := dst.StateStats(); st.Imported != 0 || st.Checkpoints != 0 {
			t.Fatalf("a refused state changed the checkpoints: %+v", st)
		}
	})

	t.Run("no checkpoints", func(t *testing.T) {
		none := opts
		none.checkpoints = engine.CheckpointNone
		e, _ := newEngine(t, m, none)
		if _, ok := e.BlockFormat(); ok {
			t.Error("an engine that keeps no checkpoints offers to move a hybrid model's KV")
		}
		if _, _, err := e.ExportBlocks(context.Background(), salt, ctx, 0, 1, nil); !errors.Is(err, engine.ErrRecurrentMove) {
			t.Errorf("export: %v, want ErrRecurrentMove", err)
		}
	})
}

// TestHybridMoveOverControlAPI: a hybrid model's program moves between
// two pods as the fleet moves it (the destination's control.KVTransfer
// fetches from the source's control API, kvstream's KVX2 stream): its
// next turn on the destination resumes from the moved checkpoint and
// generates what an engine of its own generates.
func TestHybridMoveOverControlAPI(t *testing.T) {
	m := randomModel(t, qwen35moeConfig(), model.F32, 5)
	turn1 := make([]int32, 37)
	for i := range turn1 {
		turn1[i] = int32((i*13 + 1) % m.Config.VocabSize)
	}
	opts := engineOpts{numBlocks: 64, maxSeqs: 4, maxBatched: 64, prefix: true}
	src, _ := newEngine(t, m, opts)
	out1, _ := runTurn(t, src, turn1, "a1")
	full := append(slices.Clone(turn1), out1...)
	turn2 := append(slices.Clone(full), 7, 8, 9)
	fresh, _ := newEngine(t, m, opts)
	want, _ := runTurn(t, fresh, turn2, "alone")

	// The source's programs table knows the program's context.
	tab := programs.New(programs.Config{Pod: "a", Addr: "a:8000"})
	r := tab.Route("p", false)
	tab.Started(r.Ticket, int64(len(turn1)), "")
	tab.End(r.Ticket, int64(len(full)), 0, full)
	const token = "test-token"
	mux := control.Routes(tab)
	(&control.KVTransfer{Engine: src, Table: tab, MaxChainTokens: 256}).AddRoutes(mux)
	srv := httptest.NewServer(control.Authorize(token, mux))
	t.Cleanup(srv.Close)

	dst, reg := newEngine(t, m, opts)
	fetch := &control.KVTransfer{Engine: dst, Table: programs.New(programs.Config{Pod: "b", Addr: "b:8000"}), MaxChainTokens: 256}
	n, err := fetch.Fetch(context.Background(), controlclient.New(token, 10*time.Second), strings.TrimPrefix(srv.URL, "http://"), "p")
	resumed := 47 / testBlockSize * testBlockSize
	if err != nil || n != resumed/testBlockSize {
		t.Fatalf("fetched %d blocks, %v; want %d", n, err, resumed/testBlockSize)
	}
	if st := dst.StateStats(); st.Imported != 1 {
		t.Fatalf("%d states imported, want 1", st.Imported)
	}
	got, u := runTurn(t, dst, turn2, "a2")
	if u.CachedTokens != resumed {
		t.Errorf("turn 2 on the destination resumed from %d cached tokens, want %d", u.CachedTokens, resumed)
	}
	if n := counter(t, reg, "kvpilot_recurrent_state_restored_tokens_total"); n != float64(resumed) {
		t.Errorf("kvpilot_recurrent_state_restored_tokens_total %v, want %d", n, resumed)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turn 2 on the destination differs from an engine of its own (-alone +moved):\n%s", diff)
	}
}
