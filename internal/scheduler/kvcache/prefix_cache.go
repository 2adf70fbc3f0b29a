package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
)

// rootHash is the parent hash of an unsalted sequence's first block. A
// registered block could hash to it too, which is why lookups also compare
// parent uids.
const rootHash uint64 = 0

// Salt keeps sequences' prefix-cache entries apart (vLLM's cache_salt):
// the salt seeds the hash chain, so a block registered under one salt is
// never a hit for a sequence of another, and a tenant cannot learn whether
// another's prompt is cached by timing or counting its own hits. Sequences
// of one salt share blocks as before. The zero Salt is the shared cache.
type Salt uint64

// SaltOf is the Salt of a cache_salt string: "" is the zero Salt, any
// other string a non-zero one (SHA-256, so salts chosen to collide would
// take 2^32 tries).
func SaltOf(s string) Salt {
	if s == "" {
		return 0
	}
	sum := sha256.Sum256([]byte(s))
	return Salt(max(binary.LittleEndian.Uint64(sum[:8]), 1))
}

// root is the parent hash of the first block of a sequence of salt.
func (m *Manager) root(salt Salt) uint64 {
	if salt == 0 {
		return rootHash
	}
	var buf [16]byte
	copy(buf[:8], "kv-salt\x00")
	binary.LittleEndian.PutUint64(buf[8:], uint64(salt))
	return maphash.Bytes(m.seed, buf[:])
}

// contentHash is the chained hash of a block: its parent's chained hash and
// its token ids, little endian, through maphash with the Manager's seed.
func (m *Manager) contentHash(parent uint64, toks []int32) uint64 {
	buf := m.scratch[:8+4*len(toks)]
	binary.LittleEndian.PutUint64(buf, parent)
	for i, t := range toks {
		binary.LittleEndian.PutUint32(buf[8+4*i:], uint32(t))
	}
	return maphash.Bytes(m.seed, buf)
}

// blockTokens is the stored token ids of block id.
func (m *Manager) blockTokens(id BlockID) []int32 {
	off := int(id) * m.blockSize
	return m.tokens[off : off+m.blockSize : off+m.blockSize]
}

// cacheableBlocks is how many leading blocks of an n-token prompt may come
// from the cache: only full blocks, and never the one holding the last token,
// whose logits the engine needs.
func (m *Manager) cacheableBlocks(n int) int {
	if n <= 0 {
		return 0
	}
	return (n - 1) / m.blockSize
}

// matchPrefix returns where the registered blocks that hold the leading full
// blocks of tokens, chained from root, live (device or host tier), at most
// maxBlocks of them, stopping at the first miss. A block matches only if it
// holds exactly the same token ids and extends exactly the registration
// matched before it (the first: the same root), so a hash collision is a
// miss. The result is scratch, valid until the next call.
func (m *Manager) matchPrefix(root uint64, tokens []int32, maxBlocks int) []loc {
	out := m.match[:0]
	parent, parentUID := root, uint64(0)
	for i := range maxBlocks {
		chunk := tokens[i*m.blockSize : (i+1)*m.blockSize]
		h := m.hashFn(parent, chunk)
		l, ok := m.index[h]
		if !ok {
			break
		}
		// The parent uid names one registration, so it pins the parent
		// hash and, inductively, every token before this block.
		r := m.regAt(l)
		if r.parentUID != parentUID || r.parent != parent || !slices.Equal(m.tokensAt(l), chunk) {
			break
		}
		out = append(out, l)
		parent, parentUID = h, r.uid
	}
	m.match = out
	return out
}

// regAt is the registration held at l.
func (m *Manager) regAt(l loc) *registration {
	if l.onHost() {
		return &m.host.slots[l.slot()].registration
	}
	return &m.blocks[l].registration
}

// tokensAt is the stored token ids of the block at l.
func (m *Manager) tokensAt(l loc) []int32 {
	if l.onHost() {
		return m.host.slotTokens(l.slot())
	}
	return m.blockTokens(BlockID(l))
}

// CachedPrefix is the number of leading tokens of tokens whose KV is in the
// prefix cache (either tier) as a chain of full blocks from the first, capped
// so that at least the last token is computed. It changes nothing, statistics
// included.
func (m *Manager) CachedPrefix(tokens []int32) int {
	if !m.prefix {
		return 0
	}
	return len(m.matchPrefix(rootHash, tokens, m.cacheableBlocks(len(tokens)))) * m.blockSize
}

// Commit records that the KV of tokens[:numComputed] of seq is computed;
// tokens is the sequence's whole token list so far. Each block that became
// full is registered in the prefix cache under its chained hash, unless a
// block with the same contents already is (then the sequence shares that
// registration's chain but keeps its own block). Only newly full blocks are
// hashed. Commit panics if seq is unknown or numComputed exceeds tokens or
// the block table.
func (m *Manager) Commit(seq SeqID, tokens []int32, numComputed int) {
	s := m.mustSeq(seq, "Commit")
	if !m.prefix {
		return
	}
	if numComputed > len(tokens) || numComputed > len(s.table)*m.blockSize {
		panic(fmt.Sprintf("kvcache: Commit of %d tokens of sequence %d, which has %d tokens and %d blocks",
			numComputed, seq, len(tokens), len(s.table)))
	}
	for full := numComputed / m.blockSize; s.hashed < full; s.hashed++ {
		i := s.hashed
		chunk := tokens[i*m.blockSize : (i+1)*m.blockSize]
		h := m.hashFn(s.chainHash, chunk)
		if m.chainLive(s) {
			m.registerOrShare(s, s.table[i], h, chunk)
		}
		s.chainHash = h
	}
}

// chainLive reports whether s's next full block can be registered: its parent
// registration must still be in the index (in either tier), or a lookup could
// never reach it.
func (m *Manager) chainLive(s *seqState) bool {
	if s.broken {
		return false
	}
	if s.hashed == 0 {
		return true
	}
	l, ok := m.index[s.chainHash]
	return ok && m.regAt(l).uid == s.chainUID
}

// registerOrShare registers id, the next full block of s, under chained hash
// h, or continues s's chain through an identical registered block.
func (m *Manager) registerOrShare(s *seqState, id BlockID, h uint64, chunk []int32) {
	if r, ok := m.index[h]; ok {
		rb := m.regAt(r)
		if rb.parent != s.chainHash || !slices.Equal(m.tokensAt(r), chunk) {
			// A true collision: h already names other contents.
			s.broken = true
			return
		}
		if rb.parentUID == s.chainUID {
			s.chainUID = rb.uid
			return
		}
		// r extends a registration that is gone (s's parent registration,
		// which has the same hash, is live and is not r's parent), so no
		// lookup can reach r: let id take its place.
		m.unregister(r)
	}
	b := &m.blocks[id]
	m.nextUID++
	b.registered = true
	b.hash, b.parent = h, s.chainHash
	b.uid, b.parentUID = m.nextUID, s.chainUID
	copy(m.blockTokens(id), chunk)
	m.index[h] = loc(id)
	s.chainUID = b.uid
}

// drop removes id from the index; id must not be on the free list, whose
// cached count depends on it.
func (m *Manager) drop(id BlockID) {
	b := &m.blocks[id]
	delete(m.index, b.hash)
	b.registered = false
}

// unregister removes the registration at l from the index wherever it is; a
// free device block moves to the head of the free list and a host slot to the
// head of the host list, since their contents are of no more use.
func (m *Manager) unregister(l loc) {
	if l.onHost() {
		m.host.evict(m, l.slot())
		return
	}
	id := BlockID(l)
	if m.blocks[id].ref > 0 {
		m.drop(id)
		return
	}
	m.unlink(id)
	m.drop(id)
	m.pushHead(id)
}

// Deprioritize moves the free cached blocks of tokens' prefix chain to the
// head of the free list, so they are evicted first, the deepest block first.
// Blocks in use are left alone. It serves a paused program whose request has
// already finished.
func (m *Manager) Deprioritize(tokens []int32) { m.DeprioritizeSalted(0, tokens) }

// DeprioritizeSalted is Deprioritize for the chain of a sequence of salt.
func (m *Manager) DeprioritizeSalted(salt Salt, tokens []int32) {
	if !m.prefix {
		return
	}
	for _, l := range m.matchPrefix(m.root(salt), tokens, len(tokens)/m.blockSize) {
		if id := BlockID(l); !l.onHost() && m.blocks[id].ref == 0 {
			m.unlink(id)
			m.pushHead(id)
		}
	}
}
