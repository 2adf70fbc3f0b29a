package kvcache

import (
	"errors"
	"fmt"
	"slices"
)

// CheckInvariants verifies the Manager's internal consistency and reports
// every violation found. It is O(blocks + table entries) and meant for tests.
func (m *Manager) CheckInvariants() error {
	var errs []error
	fail := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	n := m.numBlocks
	if len(m.blocks) != n+1 {
		return fmt.Errorf("kvcache invariants: %d block slots for %d blocks", len(m.blocks), n)
	}

	// Reference counts are the number of tables holding each block.
	holders := make([]int32, n)
	for seq, s := range m.seqs {
		for i, id := range s.table {
			if id < 0 || int(id) >= n {
				fail("seq %d: table[%d] = %d out of range", seq, i, id)
				continue
			}
			if slices.Contains(s.table[:i], id) {
				fail("seq %d: block %d appears twice in its table", seq, id)
			}
			holders[id]++
		}
		if s.hashed > len(s.table) {
			fail("seq %d: %d blocks hashed but only %d in its table", seq, s.hashed, len(s.table))
		}
	}
	for id := range n {
		if m.blocks[id].ref != holders[id] {
			fail("block %d: refcount %d, held by %d tables", id, m.blocks[id].ref, holders[id])
		}
	}

	// The free list is a doubly linked cycle through the sentinel holding
	// exactly the blocks with refcount 0.
	s := m.sentinel()
	onList := make([]bool, n)
	listed, cached := 0, 0
	prev := s
	for id := m.blocks[s].next; id != s; id = m.blocks[id].next {
		if id < 0 || int(id) >= n {
			fail("free list: link %d out of range after %d", id, prev)
			break
		}
		if onList[id] {
			fail("free list: block %d listed twice (cycle)", id)
			break
		}
		onList[id] = true
		listed++
		b := &m.blocks[id]
		if b.prev != prev {
			fail("free list: block %d has prev %d, reached from %d", id, b.prev, prev)
		}
		if b.ref != 0 {
			fail("free list: block %d has refcount %d", id, b.ref)
		}
		if holders[id] != 0 {
			fail("free list: block %d is in a block table", id)
		}
		if b.registered {
			cached++
		}
		prev = id
	}
	if m.blocks[s].prev != prev {
		fail("free list: sentinel prev %d, last block %d", m.blocks[s].prev, prev)
	}
	if listed != m.numFree {
		fail("free list: %d blocks listed, free count %d", listed, m.numFree)
	}
	if m.numFree < 0 || m.numFree > n {
		fail("free count %d outside 0…%d", m.numFree, n)
	}
	for id := range n {
		if m.blocks[id].ref == 0 && !onList[id] {
			fail("block %d: refcount 0 but not on the free list", id)
		}
	}
	if cached != m.cachedFree {
		fail("cached free count %d, %d registered blocks on the free list", m.cachedFree, cached)
	}

	// Every registration is consistent with the block it names.
	if !m.prefix {
		if len(m.index) != 0 || m.cachedFree != 0 {
			fail("prefix cache disabled but %d blocks registered", len(m.index))
		}
		return invariantError(errs)
	}
	registered := 0
	for id := range n {
		if m.blocks[id].registered {
			registered++
		}
	}
	if registered != len(m.index) {
		fail("%d blocks marked registered, index has %d", registered, len(m.index))
	}
	uids := make(map[uint64]BlockID, len(m.index))
	for h, id := range m.index {
		if id < 0 || int(id) >= n {
			fail("index: hash %#x maps to block %d out of range", h, id)
			continue
		}
		b := &m.blocks[id]
		switch {
		case !b.registered:
			fail("index: hash %#x maps to block %d, which is not registered", h, id)
		case b.hash != h:
			fail("index: hash %#x maps to block %d, which holds hash %#x", h, id, b.hash)
		case m.hashFn(b.parent, m.blockTokens(id)) != h:
			fail("index: block %d's parent and token ids do not hash to %#x", id, h)
		}
		if b.uid == 0 || b.uid > m.nextUID || b.parentUID >= b.uid {
			fail("index: block %d has uid %d, parent uid %d (last issued %d)", id, b.uid, b.parentUID, m.nextUID)
		}
		if other, dup := uids[b.uid]; dup {
			fail("index: blocks %d and %d share uid %d", other, id, b.uid)
		}
		uids[b.uid] = id
	}
	return invariantError(errs)
}

func invariantError(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("kvcache invariants: %w", errors.Join(errs...))
}
