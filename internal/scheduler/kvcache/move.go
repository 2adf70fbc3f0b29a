package kvcache

import "fmt"

// Moving a cached chain between pods. A paused program's KV is the chain of
// its context's full blocks in the prefix cache. Another pod's Manager has
// its own hash seed, so the chain travels as what defines it: the salt and
// the token ids of each block, with the block contents beside them. The
// importing Manager hashes the blocks with its own seed and registers them
// as cached contents, so the program's next request finds them as any
// prefix hit.

// Place is the memory that holds one block's contents: a device block or a
// host-tier slot.
type Place struct {
	OnHost bool
	// Block is the device block (OnHost false), Slot the host slot.
	Block BlockID
	Slot  HostSlot
}

func (l loc) place() Place {
	if l.onHost() {
		return Place{OnHost: true, Slot: HostSlot(l.slot())}
	}
	return Place{Block: BlockID(l)}
}

func (p Place) loc() loc {
	if p.OnHost {
		return hostLoc(int32(p.Slot))
	}
	return loc(p.Block)
}

// ChainPlaces appends to dst where the blocks from … from+n−1 of tokens'
// cached chain under salt live, stopping at the first block that is not
// cached; it changes nothing, statistics included. The caller reads their
// contents before the Manager next changes (and after every transfer it
// has issued has landed: a block just offloaded is still on its way).
func (m *Manager) ChainPlaces(dst []Place, salt Salt, tokens []int32, from, n int) []Place {
	if !m.prefix || from < 0 || n <= 0 {
		return dst
	}
	chain := m.matchPrefix(m.root(salt), tokens, min(from+n, len(tokens)/m.blockSize))
	for i := from; i < len(chain); i++ {
		dst = append(dst, chain[i].place())
	}
	return dst
}

// ImportedBlock is one block an Import registered: its contents must be
// written to Place before the Manager lets anything read it (see Import).
type ImportedBlock struct {
	// Index is the block's position in the chain.
	Index int
	Place Place
}

// Import registers blocks from … from+n−1 of tokens' chain under salt as
// cached contents, so a later Admit of a sequence with that prefix finds
// them; tokens must cover them. The chain's blocks before from must be
// cached already (an earlier Import, or this Manager's own): a chain is only
// useful from its start. Blocks that are cached already are kept and not
// returned; each other one gets a device block while any is free (evicting
// the least recently used cached contents, never this chain's, which spill
// only into an empty host slot), else an empty host slot, else the import
// stops there and the program recomputes the rest. An import never evicts
// what the host tier holds: that is paused programs' offloaded KV, worth
// more than a chain another pod sends on the chance of a resume. It
// returns the blocks whose contents the caller must write, in chain order,
// and appends them to dst.
//
// The caller must carry out the Manager's Transfers (the spills of the
// device blocks it took) before writing the contents, and must write them
// before the next Transfers or Admit can read them; if writing fails, it
// calls DropImported. Imported device blocks go to the tail of the free
// list (most recently used), the deepest nearest the head, as Free leaves
// a finished sequence's chain. It fails, changing nothing, when the prefix
// cache is off or blocks before from are not cached.
func (m *Manager) Import(dst []ImportedBlock, salt Salt, tokens []int32, from, n int) ([]ImportedBlock, error) {
	if !m.prefix {
		return dst, fmt.Errorf("kvcache: import needs the prefix cache")
	}
	if from < 0 || n < 0 || (from+n)*m.blockSize > len(tokens) {
		return dst, fmt.Errorf("kvcache: import of blocks %d…%d of a %d-token chain", from, from+n-1, len(tokens))
	}
	root := m.root(salt)
	chain := m.matchPrefix(root, tokens, from+n)
	if len(chain) < from {
		return dst, fmt.Errorf("kvcache: import from block %d, but the chain is cached only to block %d", from, len(chain))
	}
	if len(chain) == from+n {
		return dst, nil
	}
	// Taking blocks for the import must not evict the chain it extends.
	held := m.holdChain(chain)
	parent, parentUID := root, uint64(0)
	if k := len(chain); k > 0 {
		r := m.regAt(chain[k-1])
		parent, parentUID = r.hash, r.uid
	}
	for i := len(chain); i < from+n; i++ {
		chunk := tokens[i*m.blockSize : (i+1)*m.blockSize]
		h := m.hashFn(parent, chunk)
		if _, taken := m.index[h]; taken {
			// matchPrefix stopped here, so h names other contents: a
			// collision no registration of this chain can get past.
			break
		}
		var l loc
		took := false
		if m.numFree > 0 {
			id := m.allocateSpilling(false)
			held = append(held, id)
			l, took = loc(id), true
		} else if m.hostSlotEmpty() {
			slot := m.host.take(m)
			l, took = hostLoc(slot), true
		}
		if !took {
			break
		}
		r := m.regAt(l)
		m.nextUID++
		*r = registration{hash: h, parent: parent, uid: m.nextUID, parentUID: parentUID}
		if l.onHost() {
			copy(m.host.slotTokens(l.slot()), chunk)
		} else {
			m.blocks[l].registered = true
			copy(m.blockTokens(BlockID(l)), chunk)
		}
		m.index[h] = l
		parent, parentUID = h, r.uid
		dst = append(dst, ImportedBlock{Index: i, Place: l.place()})
		m.imported++
	}
	m.unpinHost()
	m.releaseHeld(held)
	return dst, nil
}

// hostSlotEmpty reports whether the host tier has an empty slot (empty
// slots sit at the head of its list).
func (m *Manager) hostSlotEmpty() bool {
	h := &m.host
	return h.n > 0 && !h.slots[h.slots[h.sentinel()].next].used
}

// DropImported forgets imported blocks whose contents could not be written:
// their registrations (and so every block after them in the chain, which no
// lookup can reach any more) are dropped.
func (m *Manager) DropImported(blocks []ImportedBlock) {
	for _, b := range blocks {
		l := b.Place.loc()
		if l.onHost() {
			if m.host.slots[l.slot()].used {
				m.host.evict(m, l.slot())
			}
			continue
		}
		if m.blocks[l].registered {
			m.unregister(l)
		}
	}
}
