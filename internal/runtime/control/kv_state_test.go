package control

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/kvstream"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// hybridEngine is a destination engine of a hybrid model (a format with
// recurrent states) that records what a fetch imports: it takes room
// blocks, and with noSlot refuses states as a pod whose checkpoint slots
// are all held by running sequences does.
type hybridEngine struct {
	format batch.BlockFormat
	room   int
	noSlot bool
	blocks int
	states map[int][]byte
}

func (h *hybridEngine) BlockFormat() (batch.BlockFormat, bool)      { return h.format, true }
func (h *hybridEngine) CachedChainBlocks(kvcache.Salt, []int32) int { return 0 }
func (h *hybridEngine) ExportBlocks(context.Context, kvcache.Salt, []int32, int, int, []byte) (int, []byte, error) {
	return 0, nil, nil
}
func (h *hybridEngine) ExportState(context.Context, kvcache.Salt, []int32, int, []byte) (int, []byte, error) {
	return 0, nil, nil
}

func (h *hybridEngine) ImportBlocks(_ context.Context, f batch.BlockFormat, _ kvcache.Salt, _ []int32, from, n int, _ []byte) (int, error) {
	if err := h.format.Compatible(f); err != nil {
		return 0, err
	}
	got := max(0, min(n, h.room-from))
	h.blocks += got
	return got, nil
}

func (h *hybridEngine) ImportState(_ context.Context, f batch.BlockFormat, _ kvcache.Salt, _ []int32, k int, data []byte) error {
	if err := h.format.Compatible(f); err != nil {
		return err
	}
	if h.noSlot {
		return engine.ErrNoCheckpointSlot
	}
	if h.states == nil {
		h.states = map[int][]byte{}
	}
	h.states[k] = bytes.Clone(data)
	return nil
}

var hybridTestFormat = batch.BlockFormat{Geometry: kvcache.Geometry{Layers: 1, KVHeads: 1, HeadDim: 4, DType: kvcache.DTypeF32},
	BlockSize: kvBlockSize, Contents: true, StateBytes: 16}

// hybridPeer serves a stream of blocks blocks of format, then (withState)
// the state after all of them.
func hybridPeer(t *testing.T, format batch.BlockFormat, blocks int, withState bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc, err := kvstream.NewEncoder(w, &kvstream.Header{Format: format, Tokens: make([]int32, blocks*kvBlockSize)})
		if err != nil {
			t.Error(err)
			return
		}
		for sent := 0; sent < blocks; sent += 2 {
			n := min(2, blocks-sent)
			if err := enc.Chunk(n, make([]byte, n*format.BlockBytes())); err != nil {
				return
			}
		}
		if withState {
			if err := enc.State(blocks, bytes.Repeat([]byte{7}, format.StateBytes)); err != nil {
				return
			}
		}
		_ = enc.End()
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A hybrid model's fetch installs the stream's recurrent state once the
// blocks it follows are here, and counts its bytes; a fetch whose blocks
// come without it, whose state follows more blocks than this pod has room
// for, that finds no checkpoint slot, or whose states are of another size
// fails, since the blocks alone resume nothing.
func TestKVFetchInstallsRecurrentState(t *testing.T) {
	const blocks = 5
	other := hybridTestFormat
	other.StateBytes = 32
	for _, tc := range []struct {
		name       string
		peer       batch.BlockFormat
		withState  bool
		room       int
		noSlot     bool
		wantBlocks int
		wantErr    string
	}{
		{name: "installed", peer: hybridTestFormat, withState: true, room: 100, wantBlocks: blocks},
		{name: "no state sent", peer: hybridTestFormat, room: 100, wantBlocks: blocks, wantErr: "without the recurrent state"},
		{name: "no room for its blocks", peer: hybridTestFormat, withState: true, room: 3, wantBlocks: 3, wantErr: "room here for 3 blocks"},
		{name: "no checkpoint slot", peer: hybridTestFormat, withState: true, room: 100, noSlot: true, wantBlocks: blocks, wantErr: engine.ErrNoCheckpointSlot.Error()},
		{name: "other state size", peer: other, withState: true, room: 100, wantErr: "recurrent states of 32 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := &hybridEngine{format: hybridTestFormat, room: tc.room, noSlot: tc.noSlot}
			reg := prometheus.NewRegistry()
			met, err := NewKVMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			kv := &KVTransfer{Engine: eng, Table: programs.New(programs.Config{Pod: "b", Addr: "b:8000"}), MaxChainTokens: kvMaxModelLen, Metrics: met}
			got, err := kv.Fetch(context.Background(), controlclient.New(testToken, 5*time.Second), hybridPeer(t, tc.peer, blocks, tc.withState), "p")
			if got != tc.wantBlocks || eng.blocks != tc.wantBlocks {
				t.Errorf("%d blocks fetched, %d imported; want %d", got, eng.blocks, tc.wantBlocks)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(eng.states[blocks], bytes.Repeat([]byte{7}, hybridTestFormat.StateBytes)) || len(eng.states) != 1 {
					t.Fatalf("states installed: %v, want the one after %d blocks", eng.states, blocks)
				}
				p := &kvPod{reg: reg}
				if b, want := kvCount(t, p, "kvpilot_kv_transfer_bytes_total", "in"), float64(blocks*hybridTestFormat.BlockBytes()+hybridTestFormat.StateBytes); b != want {
					t.Errorf("%v bytes counted, want %v (the blocks and the state)", b, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if !tc.noSlot && len(eng.states) != 0 {
				t.Errorf("states installed despite the failure: %v", eng.states)
			}
			if tc.noSlot && !errors.Is(err, engine.ErrNoCheckpointSlot) {
				t.Errorf("error %v does not wrap ErrNoCheckpointSlot", err)
			}
		})
	}
}
