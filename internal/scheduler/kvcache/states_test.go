package kvcache

import "testing"

// TestSplitHostTier: half of a hybrid model's host tier holds state
// checkpoints, the rest (less the blocks they cover) blocks; a model
// without states keeps every block.
func TestSplitHostTier(t *testing.T) {
	for _, c := range []struct {
		host                 int
		perBlock, stateBytes int64
		blocks, states       int
	}{
		{1000, 1 << 20, 10 << 20, 500, 50}, // 50 states of 10 MiB: 500 MiB, 500 blocks
		{1000, 1 << 20, 3 << 20, 502, 166}, // 166 states take 498 MiB: 498 blocks
		{1000, 1 << 20, 0, 1000, 0},        // no states
		{0, 1 << 20, 10 << 20, 0, 0},       // no host tier
		{10, 1 << 20, 100 << 20, 10, 0},    // no state fits half the tier
		{1000, 1000, 1500, 500, 333},       // 333 states cover 499.5 blocks: 500
	} {
		b, s := SplitHostTier(c.host, c.perBlock, c.stateBytes)
		if b != c.blocks || s != c.states {
			t.Errorf("SplitHostTier(%d, %d, %d) = %d blocks, %d states; want %d, %d", c.host, c.perBlock, c.stateBytes, b, s, c.blocks, c.states)
		}
		if used := int64(b)*c.perBlock + int64(s)*c.stateBytes; used > int64(c.host)*c.perBlock {
			t.Errorf("SplitHostTier(%d, %d, %d) uses %d bytes of %d", c.host, c.perBlock, c.stateBytes, used, int64(c.host)*c.perBlock)
		}
	}
}

// TestSplitStates: a hybrid model's states take at most half of the
// cache (but at least minSlots), the blocks what they leave; a model
// without states keeps every byte for blocks.
func TestSplitStates(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name                           string
		budget, perBlock, stateBytes   int64
		want, min, wantBlocks, wantSlt int
	}{
		{"no states", 1000 * mib, mib, 0, 32, 1, 1000, 0},
		{"all asked fit in half", 1000 * mib, mib, 10 * mib, 32, 1, 680, 32},
		{"half the budget", 1000 * mib, mib, 10 * mib, 64, 1, 500, 50},
		{"at least one", 10 * mib, mib, 100 * mib, 32, 1, 0, 1},
		{"none when none fits", 10 * mib, mib, 100 * mib, 32, 0, 10, 0},
		{"no budget", 0, mib, 10 * mib, 32, 0, 0, 0},
	} {
		b, s := SplitStates(c.budget, c.perBlock, c.stateBytes, c.want, c.min)
		if b != c.wantBlocks || s != c.wantSlt {
			t.Errorf("%s: %d blocks, %d states; want %d, %d", c.name, b, s, c.wantBlocks, c.wantSlt)
		}
	}
}

// TestStateTokens: a state in tokens of KV, rounded up.
func TestStateTokens(t *testing.T) {
	for _, c := range []struct {
		stateBytes, perBlock int64
		blockSize            int
		want                 int64
	}{
		{1000, 160, 16, 100}, // 10 bytes a token
		{1001, 160, 16, 101},
		{0, 160, 16, 0},
		{1000, 0, 16, 0},
		{1000, 8, 16, 1000}, // under a byte a token counts one
	} {
		if got := StateTokens(c.stateBytes, c.perBlock, c.blockSize); got != c.want {
			t.Errorf("StateTokens(%d, %d, %d) = %d, want %d", c.stateBytes, c.perBlock, c.blockSize, got, c.want)
		}
	}
}
