package kvcache

import "fmt"

// The host tier is a second pool of KV blocks in host memory. It holds only
// cached contents, never a block a sequence computes into: a registration
// (its chained hash, uid and token ids) moves to the host when a paused
// program's blocks are offloaded and back to a device block when a prefix
// hit or a restore needs it, so each registration lives in exactly one tier
// and lookups through a chain work whichever tier each link is in.
//
// Host slots sit on one intrusive list, empty slots at the head and occupied
// ones behind them in least-recently-used order, so taking the head either
// uses an empty slot or evicts the least recently offloaded contents.

// HostSlot names one host-tier block; valid slots are 0 … HostBlocks-1.
type HostSlot int32

// loc is where a registration lives: a device BlockID when ≥ 0, host slot
// -loc-1 when negative.
type loc int32

func hostLoc(slot int32) loc { return loc(-slot - 1) }

func (l loc) onHost() bool { return l < 0 }
func (l loc) slot() int32  { return int32(-l - 1) }
func (l loc) String() string {
	if l.onHost() {
		return fmt.Sprintf("host:%d", l.slot())
	}
	return fmt.Sprintf("device:%d", int32(l))
}

// TransferKind is the direction of a copy between the tiers.
type TransferKind uint8

const (
	// CopyOut copies a device block's KV into a host slot (offload).
	CopyOut TransferKind = iota + 1
	// CopyIn copies a host slot's KV into a device block (restore).
	CopyIn
)

func (k TransferKind) String() string {
	switch k {
	case CopyOut:
		return "copy-out"
	case CopyIn:
		return "copy-in"
	}
	return fmt.Sprintf("TransferKind(%d)", uint8(k))
}

// Transfer is one block copy between the tiers that the executor owes the
// Manager. Transfers must be carried out in the order the Manager issued
// them: a later one may reuse a device block or host slot an earlier one
// reads.
type Transfer struct {
	Kind   TransferKind
	Device BlockID
	Host   HostSlot
}

type hostSlot struct {
	used       bool // holds a registration
	prev, next int32
	pin        uint64 // == Manager.pinEpoch: not to be evicted by a spill
	registration
}

type hostTier struct {
	n, bs  int
	slots  []hostSlot // n+1: the last one is the list sentinel
	tokens []int32    // token ids of every slot, valid while used
	used   int
}

func (h *hostTier) init(n, bs int) {
	h.n, h.bs = n, bs
	h.slots = make([]hostSlot, n+1)
	h.tokens = make([]int32, n*bs)
	s := int32(n)
	h.slots[s].prev, h.slots[s].next = s, s
	for i := range n {
		h.linkBefore(int32(i), s)
	}
}

func (h *hostTier) sentinel() int32 { return int32(h.n) }

// linkBefore inserts slot before at.
func (h *hostTier) linkBefore(slot, at int32) {
	p := h.slots[at].prev
	h.slots[slot].prev, h.slots[slot].next = p, at
	h.slots[p].next = slot
	h.slots[at].prev = slot
}

func (h *hostTier) unlink(slot int32) {
	sl := &h.slots[slot]
	h.slots[sl.prev].next = sl.next
	h.slots[sl.next].prev = sl.prev
	sl.prev, sl.next = -1, -1
}

// toTail marks slot most recently used.
func (h *hostTier) toTail(slot int32) {
	h.unlink(slot)
	h.linkBefore(slot, h.sentinel())
}

// toHead makes slot the next one taken.
func (h *hostTier) toHead(slot int32) {
	h.unlink(slot)
	h.linkBefore(slot, h.slots[h.sentinel()].next)
}

func (h *hostTier) slotTokens(slot int32) []int32 {
	off := int(slot) * h.bs
	return h.tokens[off : off+h.bs : off+h.bs]
}

// evict forgets slot's registration and makes it the next slot taken.
func (h *hostTier) evict(m *Manager, slot int32) {
	sl := &h.slots[slot]
	if sl.used {
		delete(m.index, sl.hash)
		sl.used = false
		h.used--
	}
	h.toHead(slot)
}

// take returns the head slot, evicting its contents if it holds any, marked
// used and most recently used. The tier must have at least one slot.
func (h *hostTier) take(m *Manager) int32 {
	slot := h.slots[h.sentinel()].next
	h.evict(m, slot)
	h.slots[slot].used = true
	h.used++
	h.toTail(slot)
	return slot
}

// HostBlocks is the number of host-tier blocks (0: no host tier).
func (m *Manager) HostBlocks() int { return m.host.n }

// Offload moves the cached blocks of tokens' prefix chain that no sequence
// holds from the device to the host tier, so a paused program's KV survives
// while its device blocks serve others; it returns how many blocks moved. The
// device blocks become plain free blocks at the head of the free list; their
// contents are copied out by the next Transfers batch, before any of them can
// be written again. Blocks still in use (shared with running sequences) stay
// where they are. When the host tier cannot take the whole chain, its leading
// blocks go (a prefix is only useful from its start) and the rest are
// deprioritized; the tier evicts its least recently used contents for room but
// never this chain's. Without a host tier Offload is Deprioritize.
func (m *Manager) Offload(tokens []int32) (offloaded int) { return m.OffloadSalted(0, tokens) }

// OffloadSalted is Offload for the chain of a sequence of salt.
func (m *Manager) OffloadSalted(salt Salt, tokens []int32) (offloaded int) {
	if !m.prefix {
		return 0
	}
	if m.host.n == 0 {
		m.DeprioritizeSalted(salt, tokens)
		return 0
	}
	chain := m.matchPrefix(m.root(salt), tokens, len(tokens)/m.blockSize)
	room := m.host.n
	for _, l := range chain {
		if l.onHost() {
			m.host.toTail(l.slot()) // protect it from this offload's evictions
			room--
		}
	}
	for _, l := range chain {
		id := BlockID(l)
		if l.onHost() || m.blocks[id].ref > 0 {
			continue
		}
		m.unlink(id) // while still registered: keeps cachedFree right
		if room == 0 {
			m.pushHead(id)
			continue
		}
		room--
		slot := m.host.take(m)
		b := &m.blocks[id]
		hs := &m.host.slots[slot]
		hs.registration = b.registration
		copy(m.host.slotTokens(slot), m.blockTokens(id))
		m.index[b.hash] = hostLoc(slot)
		b.registered = false
		m.pushHead(id)
		m.xfers = append(m.xfers, Transfer{Kind: CopyOut, Device: id, Host: HostSlot(slot)})
		offloaded++
	}
	m.offloaded += int64(offloaded)
	return offloaded
}

// spill moves the registration of device block id, which an allocation is
// evicting (it is off the free list and about to be reused), to a host slot
// and queues the copy-out, which runs before the block is written again. It
// reports false, leaving id registered, when there is no host tier, spilling
// is off, id's parent registration is gone (no lookup could reach it), or
// every used host slot is pinned and none is empty.
//
// This is what keeps a program's KV while it is in a tool call: under
// memory pressure its free cached blocks are the least recently used and the
// first evicted, and without the spill its next request would recompute its
// whole context. Spilling at eviction rather than at each tool call copies
// only the blocks that are actually evicted, so a pod with room never pays
// for the host tier.
func (m *Manager) spill(id BlockID) bool {
	h := &m.host
	if h.n == 0 || m.dropEvicted {
		return false
	}
	b := &m.blocks[id]
	if b.parentUID != 0 {
		l, ok := m.index[b.parent]
		if !ok || m.regAt(l).uid != b.parentUID {
			return false
		}
	}
	if hs := &h.slots[h.slots[h.sentinel()].next]; hs.used && (hs.pin == m.pinEpoch || hs.uid == b.parentUID) {
		// Pinned slots sit behind the others, so every used one is pinned;
		// or taking the slot would evict id's own parent, orphaning id.
		return false
	}
	slot := h.take(m)
	hs := &h.slots[slot]
	hs.registration = b.registration
	copy(h.slotTokens(slot), m.blockTokens(id))
	m.index[b.hash] = hostLoc(slot)
	b.registered = false
	m.xfers = append(m.xfers, Transfer{Kind: CopyOut, Device: id, Host: HostSlot(slot)})
	m.offloaded++
	m.spilled++
	return true
}

// pinHost protects the host slots of chain from being evicted by the spills
// of the allocations that follow, until unpinHost. Pinned slots move to the
// tail of the host list, so a spill finding a pinned slot at the head knows
// every used slot is pinned.
func (m *Manager) pinHost(chain []loc) {
	m.pinEpoch++
	for _, l := range chain {
		if l.onHost() {
			m.host.slots[l.slot()].pin = m.pinEpoch
			m.host.toTail(l.slot())
		}
	}
}

// unpinHost ends the pins of the last pinHost.
func (m *Manager) unpinHost() { m.pinEpoch++ }

// Restore brings the host-tier blocks of tokens' prefix chain back to the
// device as free cached blocks (most recently used), so the program's next
// request finds its whole prefix on the device and the copies can run before
// that request is even admitted. It restores the chain's blocks in order while
// free device blocks last, never evicting the chain's own device blocks, and
// returns how many it restored.
func (m *Manager) Restore(tokens []int32) (restored int) { return m.RestoreSalted(0, tokens) }

// RestoreSalted is Restore for the chain of a sequence of salt.
func (m *Manager) RestoreSalted(salt Salt, tokens []int32) (restored int) {
	if !m.prefix || m.host.n == 0 {
		return 0
	}
	chain := m.matchPrefix(m.root(salt), tokens, len(tokens)/m.blockSize)
	held := m.holdChain(chain)
	defer m.unpinHost()
	for _, l := range chain {
		if !l.onHost() {
			continue
		}
		if m.numFree == 0 {
			break
		}
		held = append(held, m.restore(l.slot()))
		restored++
	}
	m.releaseHeld(held)
	return restored
}

// holdChain holds chain's free device blocks, so allocating cannot evict
// them, and pins its host blocks, so the spills of those allocations
// cannot (until unpinHost); it returns the held blocks (scratch), to which
// the caller may append the blocks it allocates and then hands them to
// releaseHeld.
func (m *Manager) holdChain(chain []loc) []BlockID {
	held := m.restoreScratch[:0]
	for _, l := range chain {
		if id := BlockID(l); !l.onHost() && m.blocks[id].ref == 0 {
			m.acquire(id)
			held = append(held, id)
		}
	}
	m.pinHost(chain)
	return held
}

// releaseHeld puts held blocks back on the free list as cached contents,
// the deepest block nearest the head, as Free leaves a finished sequence's
// chain.
func (m *Manager) releaseHeld(held []BlockID) {
	for i := len(held) - 1; i >= 0; i-- {
		if m.release(held[i]) {
			m.pushTail(held[i])
		}
	}
	m.restoreScratch = held[:0]
}

// restore moves the registration in host slot into a newly allocated device
// block (refcount 1) and queues the copy-in.
func (m *Manager) restore(slot int32) BlockID {
	id := m.allocate()
	hs := &m.host.slots[slot]
	b := &m.blocks[id]
	b.registered = true
	b.registration = hs.registration
	copy(m.blockTokens(id), m.host.slotTokens(slot))
	m.index[b.hash] = loc(id)
	hs.used = false
	m.host.used--
	m.host.toHead(slot)
	m.xfers = append(m.xfers, Transfer{Kind: CopyIn, Device: id, Host: HostSlot(slot)})
	m.restored++
	return id
}

// Transfers is the block copies between the tiers that the Manager has
// decided since the last ClearTransfers, in the order they must run. The
// caller must carry them out before the next executor iteration (a copied-out
// device block may be allocated to a sequence in it, a copied-in one is
// already in a block table) and then call ClearTransfers. The slice is owned
// by the Manager and valid until its next change.
func (m *Manager) Transfers() []Transfer { return m.xfers }

// ClearTransfers forgets the transfers that the caller has carried out.
func (m *Manager) ClearTransfers() { m.xfers = m.xfers[:0] }

// FailTransfers handles transfers that the executor could not carry out:
// every registration they would have moved is dropped, since the block or
// slot it names may hold anything. Sequences holding a copied-in block must
// not use it (the engine fails them); the block stays in their tables,
// unregistered, until they are freed. Transfers decided since failed was
// taken stay pending.
func (m *Manager) FailTransfers(failed []Transfer) {
	for _, t := range failed {
		switch t.Kind {
		case CopyOut:
			if hs := &m.host.slots[t.Host]; hs.used {
				m.host.evict(m, int32(t.Host))
			}
		case CopyIn:
			if b := &m.blocks[t.Device]; b.registered {
				m.unregister(loc(t.Device))
			}
		}
	}
}
