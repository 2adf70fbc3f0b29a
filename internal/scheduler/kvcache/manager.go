package kvcache

import (
	"fmt"
	"hash/maphash"
)

// SeqID names a sequence (a request's token stream) to the Manager.
type SeqID = uint64

// block is the state of one KV block.
type block struct {
	ref        int32 // number of block tables holding the block
	prev, next int32 // free-list links, valid while ref == 0

	// registration is valid while registered, that is while the prefix
	// cache index maps its hash to this block.
	registered bool
	registration
}

// registration identifies the contents of one cached block, in whichever tier
// it lives. It moves with the contents between tiers, so a chain of
// registrations (and every lookup through it) survives an offload and a
// restore.
type registration struct {
	hash      uint64 // chained hash: hash of (parent, this block's token ids)
	parent    uint64 // chained hash of the previous block (rootHash for the first)
	uid       uint64 // identity of this registration, never reused
	parentUID uint64 // uid of the registration this block extends (0 for the first)
}

// seqState is a sequence's block table and its progress through the prefix
// cache. States are pooled, tables keep their capacity.
type seqState struct {
	table []BlockID

	// hashed leading blocks of table have been through Commit (or came from
	// the cache). chainHash is the chained hash of the last of them, chainUID
	// the registration that holds its content (which may be another
	// sequence's identical block, in either tier). broken stops registration
	// after a hash collision, since no registration can stand for this chain.
	hashed    int
	chainHash uint64
	chainUID  uint64
	broken    bool
}

// Manager allocates KV blocks to sequences and caches full blocks for reuse by
// later sequences with the same prefix. It is not safe for concurrent use.
type Manager struct {
	blockSize int
	numBlocks int
	prefix    bool

	blocks     []block // numBlocks+1: the last one is the free-list sentinel
	numFree    int
	cachedFree int // free blocks that are registered

	// Prefix cache: the token ids of every block (valid while registered),
	// the index from chained hash to the block holding it (in either tier),
	// and the hash.
	tokens  []int32
	index   map[uint64]loc
	nextUID uint64
	seed    maphash.Seed
	scratch []byte
	hashFn  func(parent uint64, toks []int32) uint64 // tests swap in a weak hash

	seqs  map[SeqID]*seqState
	spare []*seqState
	match []loc // scratch for prefix lookups

	host        hostTier
	dropEvicted bool
	// pinEpoch marks the host slots (hostSlot.pin) that the allocations of
	// the Admit or Restore under way must not evict to make room for
	// spilled blocks: the chain being brought back.
	pinEpoch uint64

	// xfers are the copies the executor owes, in order (see Transfers).
	xfers          []Transfer
	restoreScratch []BlockID

	queries, hits, hostHits int64
	offloaded, restored     int64 // blocks moved to and from the host tier
	spilled                 int64 // offloaded blocks that were device evictions
	evicted                 int64 // cached contents allocate took a block from
	imported                int64 // blocks registered by Import
}

// New returns a Manager with all blocks free.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("kvcache config: %w", err)
	}
	bs := cfg.blockSize()
	m := &Manager{
		blockSize:   bs,
		numBlocks:   cfg.NumBlocks,
		prefix:      cfg.EnablePrefixCache,
		dropEvicted: cfg.DropEvicted,
		blocks:      make([]block, cfg.NumBlocks+1),
		seqs:        make(map[SeqID]*seqState),
	}
	s := m.sentinel()
	m.blocks[s].prev, m.blocks[s].next = s, s
	for id := range cfg.NumBlocks {
		m.pushTail(BlockID(id))
	}
	if m.prefix {
		m.tokens = make([]int32, cfg.NumBlocks*bs)
		m.index = make(map[uint64]loc, cfg.NumBlocks+cfg.HostBlocks)
		m.seed = maphash.MakeSeed()
		m.scratch = make([]byte, 8+4*bs)
		m.hashFn = m.contentHash
		m.host.init(cfg.HostBlocks, bs)
	}
	return m, nil
}

// BlockSize is the number of tokens per block.
func (m *Manager) BlockSize() int { return m.blockSize }

// NumBlocks is the total number of blocks.
func (m *Manager) NumBlocks() int { return m.numBlocks }

// NumFree is the number of blocks that can be allocated now, including free
// blocks that still hold cached contents.
func (m *Manager) NumFree() int { return m.numFree }

// Has reports whether seq holds a block table.
func (m *Manager) Has(seq SeqID) bool {
	_, ok := m.seqs[seq]
	return ok
}

// Blocks is seq's block table (nil if seq is unknown). The slice is owned by
// the Manager and valid until seq is next admitted, grown or freed.
func (m *Manager) Blocks(seq SeqID) []BlockID {
	if s, ok := m.seqs[seq]; ok {
		return s.table
	}
	return nil
}

// SharedTokens is the number of seq's tokens held in blocks that other
// sequences hold too: freeing seq would not free their memory. Only full
// cached blocks are ever shared, so this is a multiple of BlockSize.
func (m *Manager) SharedTokens(seq SeqID) int {
	s, ok := m.seqs[seq]
	if !ok {
		return 0
	}
	n := 0
	for _, id := range s.table {
		if m.blocks[id].ref > 1 {
			n++
		}
	}
	return n * m.blockSize
}

// SharedShare is seq's share of the memory its shared blocks save: a block
// that k sequences hold charges each of them 1/k of its tokens, so each
// sequence is credited blockSize × (k−1)/k. Summed over the sequences, the
// credits are exactly the tokens that sharing saves (Σ held − distinct).
func (m *Manager) SharedShare(seq SeqID) int {
	s, ok := m.seqs[seq]
	if !ok {
		return 0
	}
	n := 0
	for _, id := range s.table {
		if k := int(m.blocks[id].ref); k > 1 {
			n += m.blockSize * (k - 1) / k
		}
	}
	return n
}

// Admit starts sequence seq, which must not exist, with prompt tokens. It takes
// the longest cached prefix of tokens (leaving at least the last token to be
// computed), then allocates blocks so the table covers the cached tokens plus
// up to maxNew more. It returns the number of cached tokens. When there are
// not enough free blocks (cached blocks taken off the free list count too) it
// changes nothing and returns ok=false.
func (m *Manager) Admit(seq SeqID, tokens []int32, maxNew int) (cached int, ok bool) {
	return m.AdmitSalted(seq, 0, tokens, maxNew)
}

// AdmitSalted is Admit for a sequence of salt: its prefix hits and the
// blocks it registers are those of salt only.
func (m *Manager) AdmitSalted(seq SeqID, salt Salt, tokens []int32, maxNew int) (cached int, ok bool) {
	return m.AdmitLimited(seq, salt, tokens, maxNew, nil)
}

// AdmitLimited is AdmitSalted whose prefix hit of hit blocks is cut to
// its first limit(hit) blocks (limit nil: all of them): for a sequence
// that can only resume where its engine kept more than the blocks (a
// hybrid model's recurrent state, saved at some block boundaries).
func (m *Manager) AdmitLimited(seq SeqID, salt Salt, tokens []int32, maxNew int, limit func(hit int) int) (cached int, ok bool) {
	if _, dup := m.seqs[seq]; dup {
		panic(fmt.Sprintf("kvcache: Admit of sequence %d, which is already admitted", seq))
	}
	var hit []loc
	eligible := 0
	if m.prefix {
		eligible = m.cacheableBlocks(len(tokens))
		hit = m.matchPrefix(m.root(salt), tokens, eligible)
		eligible *= m.blockSize
		if limit != nil {
			hit = hit[:max(0, min(len(hit), limit(len(hit))))]
		}
	}
	cached = len(hit) * m.blockSize
	cover := cached + min(len(tokens)-cached, max(maxNew, 0))
	fresh := m.blocksFor(cover) - len(hit)
	need := fresh
	onHost := 0
	for _, l := range hit {
		// A hit on the host tier needs a device block to be restored into.
		if l.onHost() {
			onHost++
			need++
		} else if m.blocks[l].ref == 0 {
			need++
		}
	}
	if need > m.numFree {
		return 0, false
	}

	s := m.newSeq()
	s.chainHash = m.root(salt)
	// Take the device hits first: allocating could otherwise evict them.
	// The host hits are pinned: the blocks that allocating evicts spill to
	// the host tier, which must not make room by evicting them.
	for _, l := range hit {
		if !l.onHost() {
			m.acquire(BlockID(l))
		}
	}
	if onHost > 0 {
		m.pinHost(hit)
	}
	for _, l := range hit {
		if l.onHost() {
			s.table = append(s.table, m.restore(l.slot()))
		} else {
			s.table = append(s.table, BlockID(l))
		}
	}
	for range fresh {
		s.table = append(s.table, m.allocate())
	}
	m.unpinHost()
	if len(hit) > 0 {
		b := &m.blocks[s.table[len(hit)-1]]
		s.hashed, s.chainHash, s.chainUID = len(hit), b.hash, b.uid
	}
	m.seqs[seq] = s
	m.queries += int64(eligible)
	m.hits += int64(cached)
	m.hostHits += int64(onHost * m.blockSize)
	return cached, true
}

// Grow makes seq's table cover numTokens tokens. New blocks come from the head
// of the free list, evicting the least recently used cached contents. When
// there are not enough free blocks it changes nothing and returns false.
func (m *Manager) Grow(seq SeqID, numTokens int) bool {
	s := m.mustSeq(seq, "Grow")
	need := m.blocksFor(numTokens) - len(s.table)
	if need <= 0 {
		return true
	}
	if need > m.numFree {
		return false
	}
	for range need {
		s.table = append(s.table, m.allocate())
	}
	return true
}

// Free releases seq's blocks and forgets seq; an unknown seq is ignored. Blocks
// nobody else holds become free: cached ones go to the tail of the free list,
// the sequence's last block nearest the head so a prefix outlives its
// extensions, and uncached ones to the head, to be reused first. With
// evictFirst all of them go to the head, last block first.
func (m *Manager) Free(seq SeqID, evictFirst bool) {
	s, ok := m.seqs[seq]
	if !ok {
		return
	}
	if evictFirst {
		for _, id := range s.table {
			if m.release(id) {
				m.pushHead(id)
			}
		}
	} else {
		for i := len(s.table) - 1; i >= 0; i-- {
			id := s.table[i]
			if !m.release(id) {
				continue
			}
			if m.blocks[id].registered {
				m.pushTail(id)
			} else {
				m.pushHead(id)
			}
		}
	}
	delete(m.seqs, seq)
	s.table = s.table[:0]
	m.spare = append(m.spare, s)
}

func (m *Manager) mustSeq(seq SeqID, op string) *seqState {
	s, ok := m.seqs[seq]
	if !ok {
		panic(fmt.Sprintf("kvcache: %s of sequence %d, which is not admitted", op, seq))
	}
	return s
}

func (m *Manager) newSeq() *seqState {
	var s *seqState
	if n := len(m.spare); n > 0 {
		s = m.spare[n-1]
		m.spare = m.spare[:n-1]
	} else {
		s = new(seqState)
	}
	*s = seqState{table: s.table[:0], chainHash: rootHash}
	return s
}

// blocksFor is the number of blocks that hold n tokens.
func (m *Manager) blocksFor(n int) int {
	if n <= 0 {
		return 0
	}
	return (n + m.blockSize - 1) / m.blockSize
}

// allocate takes the head of the free list, evicting its cached contents:
// to the host tier when there is one (spill), otherwise dropped.
func (m *Manager) allocate() BlockID { return m.allocateSpilling(true) }

// allocateSpilling is allocate; with evictHost false the evicted contents
// spill only into an empty host slot, and are dropped when there is none,
// so nothing the host tier holds is evicted.
func (m *Manager) allocateSpilling(evictHost bool) BlockID {
	id := m.head()
	m.unlink(id)
	if m.blocks[id].registered {
		m.evicted++
		if !(evictHost || m.hostSlotEmpty()) || !m.spill(id) {
			m.drop(id)
		}
	}
	m.blocks[id].ref = 1
	return id
}

// acquire adds a holder to id, taking it off the free list if it was free.
func (m *Manager) acquire(id BlockID) {
	b := &m.blocks[id]
	if b.ref == 0 {
		m.unlink(id)
	}
	b.ref++
}

// release removes a holder from id and reports whether id is now free; the
// caller puts it on the free list.
func (m *Manager) release(id BlockID) bool {
	b := &m.blocks[id]
	b.ref--
	return b.ref == 0
}
