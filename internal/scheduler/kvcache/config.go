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

// Geometry is the shape of a model's KV cache, enough to size it in bytes.
type Geometry struct {
	Layers, KVHeads, HeadDim, DTypeBytes int
}

// BytesPerToken is the KV cache footprint of one token: a key and a value
// vector per layer and KV head.
func (g Geometry) BytesPerToken() int64 {
	return 2 * int64(g.Layers) * int64(g.KVHeads) * int64(g.HeadDim) * int64(g.DTypeBytes)
}

// BlocksForMemory is the number of whole blocks of blockSize tokens (0 means
// DefaultBlockSize) that fit in budgetBytes. It is 0 when the budget or any
// field of the geometry is not positive.
func BlocksForMemory(budgetBytes int64, g Geometry, blockSize int) int {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	if budgetBytes <= 0 || g.Layers <= 0 || g.KVHeads <= 0 || g.HeadDim <= 0 || g.DTypeBytes <= 0 {
		return 0
	}
	perToken := g.BytesPerToken()
	if perToken > math.MaxInt64/int64(blockSize) {
		return 0 // one block is larger than any budget
	}
	n := budgetBytes / (perToken * int64(blockSize))
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}
