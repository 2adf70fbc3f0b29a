package kvcache

// The free list is intrusive: prev and next are fields of the blocks, and
// blocks[numBlocks] is a sentinel, so the list is never empty of nodes and
// linking needs no nil checks. A block is on the list exactly when its
// reference count is 0.

func (m *Manager) sentinel() int32 { return int32(m.numBlocks) }

// link inserts id between prev and next.
func (m *Manager) link(id, prev, next int32) {
	b := &m.blocks[id]
	b.prev, b.next = prev, next
	m.blocks[prev].next = id
	m.blocks[next].prev = id
	m.numFree++
	if b.registered {
		m.cachedFree++
	}
}

// pushHead puts id where it is allocated next.
func (m *Manager) pushHead(id BlockID) {
	s := m.sentinel()
	m.link(int32(id), s, m.blocks[s].next)
}

// pushTail puts id where it is allocated last.
func (m *Manager) pushTail(id BlockID) {
	s := m.sentinel()
	m.link(int32(id), m.blocks[s].prev, s)
}

// unlink takes id off the list wherever it is.
func (m *Manager) unlink(id BlockID) {
	b := &m.blocks[id]
	m.blocks[b.prev].next = b.next
	m.blocks[b.next].prev = b.prev
	b.prev, b.next = -1, -1
	m.numFree--
	if b.registered {
		m.cachedFree--
	}
}

// head is the block allocated next; the list must not be empty.
func (m *Manager) head() BlockID { return BlockID(m.blocks[m.sentinel()].next) }
