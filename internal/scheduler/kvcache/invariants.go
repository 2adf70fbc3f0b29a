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
	m.checkHostTier(fail)
	if registered+m.host.used != len(m.index) {
		fail("%d device blocks registered and %d host slots used, index has %d", registered, m.host.used, len(m.index))
	}
	// A registration lives in exactly one tier: the index names one place
	// per hash, and no uid appears twice across both tiers.
	uids := make(map[uint64]loc, len(m.index))
	for h, l := range m.index {
		if l.onHost() {
			if int(l.slot()) >= m.host.n {
				fail("index: hash %#x maps to host slot %d out of range", h, l.slot())
				continue
			}
			if !m.host.slots[l.slot()].used {
				fail("index: hash %#x maps to host slot %d, which is empty", h, l.slot())
			}
		} else {
			if int(l) >= n {
				fail("index: hash %#x maps to block %d out of range", h, l)
				continue
			}
			if !m.blocks[l].registered {
				fail("index: hash %#x maps to block %d, which is not registered", h, l)
			}
		}
		r := m.regAt(l)
		switch {
		case r.hash != h:
			fail("index: hash %#x maps to %v, which holds hash %#x", h, l, r.hash)
		case m.hashFn(r.parent, m.tokensAt(l)) != h:
			fail("index: %v's parent and token ids do not hash to %#x", l, h)
		}
		if r.uid == 0 || r.uid > m.nextUID || r.parentUID >= r.uid {
			fail("index: %v has uid %d, parent uid %d (last issued %d)", l, r.uid, r.parentUID, m.nextUID)
		}
		if other, dup := uids[r.uid]; dup {
			fail("index: %v and %v share uid %d", other, l, r.uid)
		}
		uids[r.uid] = l
	}
	// Every registered block and used slot is the one its hash names.
	for id := range n {
		if b := &m.blocks[id]; b.registered && m.index[b.hash] != loc(id) {
			fail("block %d is registered under %#x, which the index maps elsewhere", id, b.hash)
		}
	}
	for slot := range m.host.n {
		if hs := &m.host.slots[slot]; hs.used {
			if l, ok := m.index[hs.hash]; !ok || l != hostLoc(int32(slot)) {
				fail("host slot %d holds %#x, which the index maps elsewhere", slot, hs.hash)
			}
		}
	}
	return invariantError(errs)
}

// checkHostTier verifies the host list: a doubly linked cycle through the
// sentinel holding every slot once, empty slots before used ones, and the
// used count.
func (m *Manager) checkHostTier(fail func(string, ...any)) {
	h := &m.host
	if h.n == 0 {
		if h.used != 0 {
			fail("no host tier but %d host slots used", h.used)
		}
		return
	}
	if len(h.slots) != h.n+1 {
		fail("host tier: %d slots for %d blocks", len(h.slots), h.n)
		return
	}
	s := h.sentinel()
	seen := make([]bool, h.n)
	listed, used := 0, 0
	prev := s
	sawUsed := false
	for id := h.slots[s].next; id != s; id = h.slots[id].next {
		if id < 0 || int(id) >= h.n {
			fail("host list: link %d out of range after %d", id, prev)
			return
		}
		if seen[id] {
			fail("host list: slot %d listed twice (cycle)", id)
			return
		}
		seen[id] = true
		listed++
		sl := &h.slots[id]
		if sl.prev != prev {
			fail("host list: slot %d has prev %d, reached from %d", id, sl.prev, prev)
		}
		if sl.used {
			used++
			sawUsed = true
		} else if sawUsed {
			fail("host list: empty slot %d behind a used one (empty slots go first)", id)
		}
		prev = id
	}
	if h.slots[s].prev != prev {
		fail("host list: sentinel prev %d, last slot %d", h.slots[s].prev, prev)
	}
	if listed != h.n {
		fail("host list: %d of %d slots listed", listed, h.n)
	}
	if used != h.used {
		fail("host tier: %d slots used, count says %d", used, h.used)
	}
}

func invariantError(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("kvcache invariants: %w", errors.Join(errs...))
}
