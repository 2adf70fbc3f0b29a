// Package kvcache is the paged KV block manager: fixed-size blocks, per-sequence
// block tables, reference counts and automatic prefix caching.
//
// The KV cache of the model is cut into NumBlocks blocks of BlockSize tokens.
// Each running sequence owns a block table (the blocks that hold its tokens, in
// order); a block can sit in several tables at once when sequences share a
// prefix, and its reference count is the number of tables holding it.
//
// Free blocks live on one intrusive doubly linked list, allocated from the head.
// A freed block whose contents are registered in the prefix cache goes to the
// tail and keeps its contents until it reaches the head and is reused, so the
// list is also the LRU order of the cache: an Admit that finds a cached block
// takes it back out of the middle of the list in O(1).
//
// Prefix caching is automatic: a block that becomes full is registered under a
// chained hash of its tokens and the hash of the block before it, so a hit on a
// block implies its whole prefix. Lookups compare the stored token ids and the
// identity of the parent registration, so a hash collision costs a cache miss,
// never a wrong KV block.
//
// With Config.HostBlocks, a second tier in host memory keeps the cached
// contents of paused programs (Offload), and the cached contents that device
// allocations evict (spill: write-back at eviction, unless
// Config.DropEvicted), so they need not be recomputed: a
// registration moves between the tiers with its hash and uid, so it lives in
// exactly one tier and a prefix hit may come from either; a hit on the host
// is restored into a device block when the sequence is admitted (or ahead of
// it, by Restore). The host tier has its own LRU list. The Manager only
// decides the moves; the copies themselves are Transfers the engine hands to
// the executor before its next iteration.
//
// A Manager is not safe for concurrent use: the engine loop owns it.
package kvcache

// BlockID names one KV block; valid ids are 0 … NumBlocks-1.
type BlockID int32
