package kvcache

import (
	"math"
	"strings"
	"testing"
)

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // substring; "" means success
	}{
		{name: "minimal", cfg: Config{NumBlocks: 1}},
		{name: "prefix cache", cfg: Config{NumBlocks: 8, BlockSize: 4, EnablePrefixCache: true}},
		{name: "zero blocks", cfg: Config{NumBlocks: 0}, wantErr: "NumBlocks must be positive"},
		{name: "negative blocks", cfg: Config{NumBlocks: -3}, wantErr: "NumBlocks must be positive"},
		{name: "too many blocks", cfg: Config{NumBlocks: math.MaxInt32}, wantErr: "NumBlocks must be at most"},
		{name: "negative block size", cfg: Config{NumBlocks: 4, BlockSize: -1}, wantErr: "BlockSize must not be negative"},
		{name: "both bad", cfg: Config{NumBlocks: -1, BlockSize: -1}, wantErr: "BlockSize must not be negative"},
		{name: "host tier", cfg: Config{NumBlocks: 8, EnablePrefixCache: true, HostBlocks: 32}},
		{name: "negative host tier", cfg: Config{NumBlocks: 8, EnablePrefixCache: true, HostBlocks: -1}, wantErr: "HostBlocks must not be negative"},
		{name: "host tier without prefix cache", cfg: Config{NumBlocks: 8, HostBlocks: 4}, wantErr: "HostBlocks (4) needs EnablePrefixCache"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				check(t, m)
				if m.NumFree() != tc.cfg.NumBlocks {
					t.Errorf("NumFree = %d, want %d", m.NumFree(), tc.cfg.NumBlocks)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestDefaultBlockSize(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 2})
	if m.BlockSize() != DefaultBlockSize || m.NumBlocks() != 2 {
		t.Fatalf("BlockSize, NumBlocks = %d, %d; want %d, 2", m.BlockSize(), m.NumBlocks(), DefaultBlockSize)
	}
}

func TestBlocksForMemory(t *testing.T) {
	llama8B := Geometry{Layers: 32, KVHeads: 8, HeadDim: 128, DType: DTypeBF16}
	if got, want := llama8B.BytesPerToken(), int64(131072); got != want {
		t.Fatalf("BytesPerToken = %d, want %d", got, want)
	}
	glmFlash := Geometry{Layers: 47, KVHeads: 1, HeadDim: 576, DType: DTypeF16, KeysOnly: true}
	if got, want := glmFlash.BytesPerToken(), int64(47*576*2); got != want {
		t.Fatalf("keys only: BytesPerToken = %d, want %d", got, want)
	}
	tests := []struct {
		name      string
		budget    int64
		g         Geometry
		blockSize int
		want      int
	}{
		{name: "exact", budget: 16 * 131072 * 10, g: llama8B, blockSize: 16, want: 10},
		{name: "floors", budget: 16*131072*10 - 1, g: llama8B, blockSize: 16, want: 9},
		{name: "default block size", budget: 16 * 131072 * 3, g: llama8B, blockSize: 0, want: 3},
		{name: "block size 32", budget: 16 * 131072 * 10, g: llama8B, blockSize: 32, want: 5},
		{name: "40 GiB", budget: 40 << 30, g: llama8B, blockSize: 16, want: 20480},
		{name: "budget smaller than a block", budget: 1000, g: llama8B, blockSize: 16, want: 0},
		{name: "zero budget", budget: 0, g: llama8B, blockSize: 16, want: 0},
		{name: "negative budget", budget: -1, g: llama8B, blockSize: 16, want: 0},
		{name: "zero geometry", budget: 1 << 30, g: Geometry{}, blockSize: 16, want: 0},
		{name: "negative fields", budget: 1 << 30, g: Geometry{Layers: -1, KVHeads: -1, HeadDim: 1, DType: DTypeF16}, blockSize: 16, want: 0},
		{name: "unresolved dtype", budget: 1 << 30, g: Geometry{Layers: 32, KVHeads: 8, HeadDim: 128}, blockSize: 16, want: 0},
		{name: "q8_0 head not whole blocks", budget: 1 << 30, g: Geometry{Layers: 2, KVHeads: 2, HeadDim: 48, DType: DTypeQ8_0}, blockSize: 16, want: 0},
		{name: "huge row", budget: math.MaxInt64, g: Geometry{Layers: 1, KVHeads: 1 << 20, HeadDim: 1 << 20, DType: DTypeF32}, blockSize: 1, want: 1048575},
		{name: "overflowing row", budget: math.MaxInt64, g: Geometry{Layers: 1, KVHeads: math.MaxInt32, HeadDim: math.MaxInt32, DType: DTypeF32}, blockSize: 1, want: 0},
		{name: "huge block", budget: math.MaxInt64, g: Geometry{Layers: 1 << 20, KVHeads: 1 << 20, HeadDim: 1 << 20, DType: DTypeF16}, blockSize: 1 << 10, want: 0},
		// GLM-4.7-Flash's latent (512 + 64 rotated) in 47 layers at F16:
		// 54,144 bytes a token with one row a layer, twice the blocks of
		// the same shape with a value row.
		{name: "keys only", budget: 16 * 54144 * 10, g: glmFlash, blockSize: 16, want: 10},
		{name: "keys and values", budget: 16 * 54144 * 10, g: Geometry{Layers: 47, KVHeads: 1, HeadDim: 576, DType: DTypeF16}, blockSize: 16, want: 5},
		{name: "keys only, overflowing row", budget: math.MaxInt64, g: Geometry{Layers: 1, KVHeads: math.MaxInt32, HeadDim: math.MaxInt32, DType: DTypeF32, KeysOnly: true}, blockSize: 1, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BlocksForMemory(tc.budget, tc.g, tc.blockSize); got != tc.want {
				t.Errorf("BlocksForMemory(%d, %+v, %d) = %d, want %d", tc.budget, tc.g, tc.blockSize, got, tc.want)
			}
		})
	}
}

func TestStatsRates(t *testing.T) {
	tests := []struct {
		s          Stats
		hit, usage float64
	}{
		{s: Stats{}, hit: 0, usage: 0},
		{s: Stats{Total: 4, Used: 1, Free: 3, Queries: 8, Hits: 2}, hit: 0.25, usage: 0.25},
		{s: Stats{Total: 2, Used: 2, Queries: 0, Hits: 0}, hit: 0, usage: 1},
	}
	for _, tc := range tests {
		if got := tc.s.HitRate(); got != tc.hit {
			t.Errorf("%+v.HitRate() = %v, want %v", tc.s, got, tc.hit)
		}
		if got := tc.s.Usage(); got != tc.usage {
			t.Errorf("%+v.Usage() = %v, want %v", tc.s, got, tc.usage)
		}
	}
}
