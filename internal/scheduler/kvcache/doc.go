// Package kvcache is the paged KV block manager: fixed-size blocks, per-sequence
// block tables, reference counts and automatic prefix caching.
package kvcache

// BlockID names one KV block; valid ids are 0 … NumBlocks-1.
type BlockID int32
