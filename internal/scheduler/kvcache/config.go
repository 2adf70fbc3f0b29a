package kvcache

import (
	"errors"
	"fmt"
	"math"
)

// DefaultBlockSize is the number of tokens per block when Config.BlockSize is 0.
const DefaultBlockSize = 16

// maxBlocks keeps every block id and the free-list sentinel within BlockID.
const maxBlocks = math.MaxInt32 - 1

// Config sizes a Manager.
type Config struct {
	// NumBlocks is the number of KV blocks; it must be positive.
	NumBlocks int
	// BlockSize is the number of tokens per block; 0 means DefaultBlockSize.
	BlockSize int
	// EnablePrefixCache turns on automatic prefix caching.
	EnablePrefixCache bool
	// HostBlocks is the number of blocks of the host-memory tier, which keeps
	// the cached KV of paused programs (see Offload) and the cached contents
	// that device allocations evict (write-back: a program in a tool call
	// whose blocks are reused finds them on the host at its next request);
	// 0 means none. It needs the prefix cache, which is how blocks are found
	// again.
	HostBlocks int
	// DropEvicted makes device evictions drop cached contents even with a
	// host tier, so the tier holds only what Offload puts there (the
	// behaviour before write-back; for comparisons).
	DropEvicted bool
}

func (c Config) blockSize() int {
	if c.BlockSize == 0 {
		return DefaultBlockSize
	}
	return c.BlockSize
}

// validate reports every problem of c at once.
func (c Config) validate() error {
	var errs []error
	if c.NumBlocks <= 0 {
		errs = append(errs, fmt.Errorf("NumBlocks must be positive, got %d", c.NumBlocks))
	} else if c.NumBlocks > maxBlocks {
		errs = append(errs, fmt.Errorf("NumBlocks must be at most %d, got %d", maxBlocks, c.NumBlocks))
	}
	if c.BlockSize < 0 {
		errs = append(errs, fmt.Errorf("BlockSize must not be negative, got %d", c.BlockSize))
	}
	if c.HostBlocks < 0 {
		errs = append(errs, fmt.Errorf("HostBlocks must not be negative, got %d", c.HostBlocks))
	} else if c.HostBlocks > maxBlocks {
		errs = append(errs, fmt.Errorf("HostBlocks must be at most %d, got %d", maxBlocks, c.HostBlocks))
	} else if c.HostBlocks > 0 && !c.EnablePrefixCache {
		errs = append(errs, fmt.Errorf("HostBlocks (%d) needs EnablePrefixCache: host blocks are found through the prefix cache", c.HostBlocks))
	} else if c.HostBlocks > 0 && c.BlockSize > 0 && c.HostBlocks > math.MaxInt/c.BlockSize {
		errs = append(errs, fmt.Errorf("HostBlocks×BlockSize overflows: %d×%d", c.HostBlocks, c.BlockSize))
	}
	// The prefix cache keeps the token ids of every block in one flat slice.
	if c.NumBlocks > 0 && c.BlockSize > 0 && c.EnablePrefixCache && c.NumBlocks > math.MaxInt/c.BlockSize {
		errs = append(errs, fmt.Errorf("NumBlocks×BlockSize overflows: %d×%d", c.NumBlocks, c.BlockSize))
	}
	return errors.Join(errs...)
}

// Geometry is the shape of a model's KV cache and its element type, enough
// to size it in bytes. Every layer holds a key and a value row of
// KVHeads×HeadDim elements per token, or only the key row (KeysOnly).
type Geometry struct {
	Layers, KVHeads, HeadDim int
	// DType is the cache's element type, resolved (not DTypeAuto).
	DType DType
	// KeysOnly: every layer keeps one row per token, not two. Multi-head
	// latent attention (deepseek2) caches one compressed latent a token
	// that attention reads both its keys and its values from, so a value
	// row would hold nothing (llama.cpp allocates no value cache for such
	// a model either). The zero value is a key and a value row.
	KeysOnly bool
}

// Validate reports a geometry that cannot hold a token: a non-positive
// field, an unresolved or unknown type, or a Q8_0 cache whose heads are not
// whole blocks of 32 (attention reads each head's row on its own).
func (g Geometry) Validate() error {
	if g.Layers <= 0 || g.KVHeads <= 0 || g.HeadDim <= 0 {
		return fmt.Errorf("KV geometry %d layers × %d KV heads × %d: all must be positive", g.Layers, g.KVHeads, g.HeadDim)
	}
	if _, err := g.DType.RowBytes(g.HeadDim); err != nil {
		return fmt.Errorf("KV cache dtype %s with head dimension %d: %w", g.DType, g.HeadDim, err)
	}
	return nil
}

// RowsPerLayer is the rows one layer keeps per token: a key and a value
// row, or the key row alone (KeysOnly).
func (g Geometry) RowsPerLayer() int {
	if g.KeysOnly {
		return 1
	}
	return 2
}

// RowBytes is one layer's key (or value) row of one token.
func (g Geometry) RowBytes() int64 {
	if g.Validate() != nil {
		return 0
	}
	head, _ := g.DType.RowBytes(g.HeadDim)
	if head > math.MaxInt64/int64(g.KVHeads) {
		return 0
	}
	return int64(g.KVHeads) * head
}

// BytesPerToken is the KV cache footprint of one token: RowsPerLayer rows
// per layer. It is 0 for a geometry Validate refuses or one that
// overflows.
func (g Geometry) BytesPerToken() int64 {
	row, rows := g.RowBytes(), int64(g.RowsPerLayer())
	if row <= 0 || row > math.MaxInt64/rows/int64(g.Layers) {
		return 0
	}
	return rows * int64(g.Layers) * row
}

// BytesPerBlock is the footprint of one block of blockSize tokens (0 means
// DefaultBlockSize), 0 for a geometry Validate refuses or one that
// overflows.
func (g Geometry) BytesPerBlock(blockSize int) int64 {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	perToken := g.BytesPerToken()
	if perToken <= 0 || perToken > math.MaxInt64/int64(blockSize) {
		return 0
	}
	return perToken * int64(blockSize)
}

// BlocksForMemory is the number of whole blocks of blockSize tokens (0 means
// DefaultBlockSize) that fit in budgetBytes. It is 0 when the budget is not
// positive or the geometry is invalid (Geometry.Validate) or one block is
// larger than any budget.
func BlocksForMemory(budgetBytes int64, g Geometry, blockSize int) int {
	perBlock := g.BytesPerBlock(blockSize)
	if budgetBytes <= 0 || perBlock <= 0 {
		return 0
	}
	n := budgetBytes / perBlock
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}
