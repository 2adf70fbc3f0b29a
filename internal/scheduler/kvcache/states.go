package kvcache

// A hybrid model's recurrent states (a fixed size per sequence) live in
// the memory its KV blocks do: a device's KV budget and a host tier are
// split between the two here, once, for the runtime's executors, the sim
// executor and the simulator; and a state's cost in KV tokens
// (StateTokens) is what a pod reports (wire.KVReport.StateTokens), so the
// controller charges every program the bytes the pod sets aside for it.

// SplitStates divides budget bytes of cache between recurrent states of
// stateBytes each, at most wantSlots of them, and blocks of perBlock
// bytes: the states take at most half of the budget (but at least
// minSlots states, when wantSlots allows), the blocks what the states
// leave. A model without states (stateBytes 0) keeps every byte for
// blocks.
func SplitStates(budget, perBlock, stateBytes int64, wantSlots, minSlots int) (blocks, slots int) {
	if stateBytes > 0 && wantSlots > 0 {
		slots = min(wantSlots, max(minSlots, int(max(budget, 0)/2/stateBytes)))
		budget -= int64(slots) * stateBytes
	}
	if budget <= 0 || perBlock <= 0 {
		return 0, slots
	}
	return int(budget / perBlock), slots
}

// SplitHostTier divides a host tier of hostBlocks blocks of bytesPerBlock
// between a hybrid model's attending layers' blocks and its
// recurrent-state checkpoints of stateBytes each, half of the memory
// each. A model without states (stateBytes 0) keeps every block.
func SplitHostTier(hostBlocks int, bytesPerBlock, stateBytes int64) (blocks, states int) {
	if hostBlocks <= 0 || stateBytes <= 0 || bytesPerBlock <= 0 {
		return hostBlocks, 0
	}
	states = int(int64(hostBlocks) * bytesPerBlock / 2 / stateBytes)
	return hostBlocks - int((int64(states)*stateBytes+bytesPerBlock-1)/bytesPerBlock), states
}

// StateTokens is a recurrent state of stateBytes in tokens of a KV cache
// of perBlock bytes a block of blockSize tokens, rounded up: what one
// running program's state costs a hybrid model's pod (0 without a
// state).
func StateTokens(stateBytes, perBlock int64, blockSize int) int64 {
	if stateBytes <= 0 || perBlock <= 0 || blockSize <= 0 {
		return 0
	}
	perToken := max(perBlock/int64(blockSize), 1)
	return (stateBytes + perToken - 1) / perToken
}
