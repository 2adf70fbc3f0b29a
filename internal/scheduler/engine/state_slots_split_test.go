package engine

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
