package engine

import (
	"fmt"
	"slices"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Recurrent states (batch.StateKeeper: a hybrid model's executor).
//
// A recurrent state holds a sequence's whole past in a fixed size and
// cannot be cut back to an earlier position, so the prefix cache's blocks
// alone do not resume a sequence: it needs the state at the very position
// the hit ends. The engine splits the executor's state slots in two:
//
//   - running slots: each running sequence holds one from admission until
//     it finishes or is preempted (a sequence at position 0 starts from a
//     zero state);
//   - checkpoint slots: states saved at block boundaries, keyed by the
//     tokens before the boundary (and the cache salt), found by later
//     requests whose prompt shares them. A sequence saves its state at the
//     last block boundary of its prompt (its prefill chunk is cut there;
//     a request that repeats or extends the prompt resumes there), and at
//     every block boundary it decodes past into one more checkpoint slot
//     it owns while it runs and re-keys each time: when it finishes, that
//     checkpoint is its state within a block of where its turn ended,
//     which the program's next turn (its prompt extends this one's
//     tokens) resumes from, recomputing less than a block of it.
//     Checkpoints no running sequence owns are evicted least recently
//     used first.
//
// A prefix hit is cut back to the deepest block boundary that has a
// checkpoint (kvcache's AdmitLimited); the checkpoint is copied into the
// sequence's running slot before the iteration that continues it
// (batch.Batch.StateCopies), and saves are copied after it
// (StateSaves), becoming visible once the iteration succeeded.

// CheckpointMode is which states an engine saves (Config.StateCheckpoints).
type CheckpointMode uint8

const (
	// CheckpointPrograms saves the state at the last block boundary of
	// each prompt and, as a sequence decodes, at its latest block
	// boundary: a program's next turn resumes within a block of where its
	// last turn ended.
	CheckpointPrograms CheckpointMode = iota
	// CheckpointPrompts saves the state at the last block boundary of
	// each prompt only (block-aligned prefix caching of the prompt): a
	// program's next turn resumes where its last prompt ended and
	// recomputes the last turn's output. (vLLM's prefix caching for
	// hybrid models, mamba_cache_mode "align", keeps more: the state at
	// every block boundary a request crosses, its output's included, in
	// blocks of several hundred tokens; docs/benchmarks.md, S5.)
	CheckpointPrompts
	// CheckpointNone saves none: every request prefills its whole prompt.
	CheckpointNone
)

// String is the mode's name, as --state-checkpoints takes it.
func (m CheckpointMode) String() string {
	switch m {
	case CheckpointPrograms:
		return "programs"
	case CheckpointPrompts:
		return "prompts"
	case CheckpointNone:
		return "none"
	}
	return fmt.Sprintf("checkpoint mode %d", uint8(m))
}

// MarshalText and UnmarshalText make a mode a flag (flag.TextVar).
func (m CheckpointMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

func (m *CheckpointMode) UnmarshalText(b []byte) error {
	v, err := ParseCheckpointMode(string(b))
	if err == nil {
		*m = v
	}
	return err
}

// ParseCheckpointMode reads a mode's name.
func ParseCheckpointMode(s string) (CheckpointMode, error) {
	for _, m := range []CheckpointMode{CheckpointPrograms, CheckpointPrompts, CheckpointNone} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("state checkpoints %q: want programs, prompts or none", s)
}

// stateSlots are the executor's slots.
type stateSlots struct {
	free    []int // running slots
	running int
	ck      *checkpoints
	// saved, restored, restoredTokens, spilled and imported are
	// StateStats' counters.
	saved, restored, restoredTokens, spilled, imported int64
	// pending are state copies decided between iterations (a paused
	// program's checkpoint moving to the host), run before the next
	// iteration that executes.
	pending []batch.StateCopy
}

// stats are the slots' StateStats.
func (p *stateSlots) stats() StateStats {
	if p == nil {
		return StateStats{}
	}
	st := StateStats{RunningSlots: p.running, RunningUsed: p.running - len(p.free),
		Saved: p.saved, Restored: p.restored, RestoredTokens: p.restoredTokens, Spilled: p.spilled, Imported: p.imported}
	if p.ck != nil {
		st.CheckpointSlots, st.HostCheckpointSlots, st.Checkpoints = p.ck.nDev, len(p.ck.ck)-p.ck.nDev, p.ck.count()
	}
	return st
}

// StateStats are the engine's recurrent-state slots now (zero for a model
// without states).
func (e *Engine) StateStats() StateStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots.stats()
}

// newStateSlots splits n device slots: running ones for up to maxSeqs
// sequences, the rest checkpoints when prefix caching is on (then at least
// half of them), with host more checkpoint slots on the host numbered
// from n. It returns the slots and how many sequences may run.
func newStateSlots(n, host, maxSeqs int, prefix bool, mode CheckpointMode) (*stateSlots, int) {
	prefix = prefix && mode != CheckpointNone
	running := min(n, maxSeqs)
	if prefix {
		running = max(1, min(maxSeqs, n/2))
	}
	p := &stateSlots{free: make([]int, running), running: running}
	for i := range p.free {
		p.free[i] = running - 1 - i // slot 0 first
	}
	if prefix && n > running {
		p.ck = newCheckpoints(running, n-running, n, host)
		p.ck.decoded = mode == CheckpointPrograms
	}
	return p, running
}

// take gives s the lowest free running slot (none when the engine keeps
// no states).
func (p *stateSlots) take(s *sequence) {
	if p == nil || s.hasSlot {
		return
	}
	n := len(p.free) - 1
	if n < 0 {
		panic("engine: more running sequences than recurrent-state slots")
	}
	s.slot, s.hasSlot = p.free[n], true
	p.free = p.free[:n]
}

// give takes s's running slot back, and leaves its checkpoint (if any) to
// the others.
func (p *stateSlots) give(s *sequence) {
	if p == nil {
		return
	}
	if s.hasSlot {
		// Kept in descending order, so that take gives the lowest free
		// slot: sequences admitted together get consecutive ascending
		// slots, which an executor can read in place (the ggml
		// executor's decoding groups) instead of gathering them.
		i, _ := slices.BinarySearchFunc(p.free, s.slot, func(a, b int) int { return b - a })
		p.free = slices.Insert(p.free, i, s.slot)
		s.slot, s.hasSlot = 0, false
	}
	p.ck.release(s)
}

// ckptKey names the state after a prefix of n tokens under a salt: two
// independent 64-bit hashes of the salt and the tokens.
type ckptKey struct {
	h1, h2 uint64
	n      int
}

// prefixHasher extends a ckptKey block by block.
type prefixHasher struct{ k ckptKey }

func newPrefixHasher(salt kvcache.Salt) prefixHasher {
	return prefixHasher{ckptKey{h1: 0xcbf29ce484222325 ^ uint64(salt), h2: splitmix(uint64(salt))}}
}

func (h *prefixHasher) add(tokens []int32) {
	for _, t := range tokens {
		h.k.h1 = (h.k.h1 ^ uint64(uint32(t))) * 0x100000001b3
		h.k.h2 = splitmix(h.k.h2 ^ uint64(uint32(t)))
	}
	h.k.n += len(tokens)
}

// checkpoints are the checkpoint slots: ck[i] for i < nDev is device
// slot base+i, the rest host slots (batch.HostStateKeeper) from hostBase
// on, which device checkpoints spill to when they are evicted.
type checkpoints struct {
	base, nDev, hostBase int
	ck                   []checkpoint
	byKey                map[ckptKey]int // valid checkpoints by key → index
	tick                 uint64
	// pending are this iteration's saves, made visible by commit.
	pending []pendingSave
	// decoded: save at the block boundaries sequences decode past too
	// (CheckpointPrograms).
	decoded bool
}

type checkpoint struct {
	key   ckptKey
	valid bool
	owner *sequence // the running sequence that saves into it, or nil
	used  uint64    // tick of its last save or restore
}

type pendingSave struct {
	i   int
	key ckptKey
}

func newCheckpoints(base, n, hostBase, nHost int) *checkpoints {
	return &checkpoints{base: base, nDev: n, hostBase: hostBase, ck: make([]checkpoint, n+nHost), byKey: make(map[ckptKey]int, n+nHost)}
}

// slot is checkpoint i's executor slot.
func (c *checkpoints) slot(i int) int {
	if i < c.nDev {
		return c.base + i
	}
	return c.hostBase + i - c.nDev
}

// lru is the free or least recently used checkpoint among ck[from:to]
// that no sequence owns, or -1.
func (c *checkpoints) lru(from, to int) int {
	best := -1
	for i := from; i < to; i++ {
		ck := &c.ck[i]
		if ck.owner != nil {
			continue
		}
		if !ck.valid {
			return i
		}
		if best < 0 || ck.used < c.ck[best].used {
			best = i
		}
	}
	return best
}

// deepest is the largest k ≤ maxBlocks whose state after k blocks of
// tokens (under salt) is checkpointed, and that checkpoint's index (k 0:
// none).
func (c *checkpoints) deepest(salt kvcache.Salt, tokens []int32, bs, maxBlocks int) (k, idx int) {
	if c == nil || maxBlocks == 0 {
		return 0, -1
	}
	h := newPrefixHasher(salt)
	k, idx = 0, -1
	for b := 1; b <= maxBlocks; b++ {
		h.add(tokens[(b-1)*bs : b*bs])
		if i, ok := c.byKey[h.k]; ok {
			k, idx = b, i
		}
	}
	return k, idx
}

// restore uses checkpoint idx: its slot, to copy from.
func (c *checkpoints) restore(idx int) int {
	c.tick++
	c.ck[idx].used = c.tick
	return c.slot(idx)
}

// slotFor is the device checkpoint s saves into: with own, the one it
// owns, else a free or the least recently used unowned one, which it then
// owns; without, a free or least recently used unowned one, left unowned
// (ok false: every device checkpoint is owned by a running sequence). A
// valid checkpoint it takes spills to the host tier when there is one
// (spill, a copy to run before the iteration; spilled false: none).
func (c *checkpoints) slotFor(s *sequence, own bool) (idx int, spill batch.StateCopy, spilled, ok bool) {
	if own && s.ckpt >= 0 {
		return s.ckpt, spill, false, true
	}
	best := c.lru(0, c.nDev)
	if best < 0 {
		return 0, spill, false, false
	}
	spill, spilled = c.spill(best)
	if own {
		c.ck[best].owner = s
		s.ckpt = best
	}
	return best, spill, spilled, true
}

// spill moves device checkpoint i's key to a free or least recently used
// host checkpoint and returns the copy that moves its state (ok false: no
// host tier, or i is not a valid device checkpoint).
func (c *checkpoints) spill(i int) (cp batch.StateCopy, ok bool) {
	dev := &c.ck[i]
	if i >= c.nDev || !dev.valid {
		return cp, false
	}
	h := c.lru(c.nDev, len(c.ck))
	if h < 0 {
		return cp, false
	}
	host := &c.ck[h]
	if host.valid {
		delete(c.byKey, host.key)
	}
	*host = checkpoint{key: dev.key, valid: true, used: dev.used}
	c.byKey[dev.key] = h
	dev.valid = false
	return batch.StateCopy{From: c.slot(i), To: c.slot(h), Pos: dev.key.n}, true
}

// offload spills the deepest device checkpoint of tokens' full blocks
// under salt that no running sequence owns (a paused program's), ahead
// of an eviction.
func (c *checkpoints) offload(salt kvcache.Salt, tokens []int32, bs int) (cp batch.StateCopy, ok bool) {
	if c == nil || c.nDev == len(c.ck) {
		return cp, false
	}
	k, i := c.deepest(salt, tokens, bs, len(tokens)/bs)
	if k == 0 || c.ck[i].owner != nil {
		return cp, false
	}
	return c.spill(i)
}

// failCopies drops the checkpoints that copies (an iteration's
// StateCopies, which failed) were writing: their slots hold no state.
func (c *checkpoints) failCopies(copies []batch.StateCopy) {
	if c == nil {
		return
	}
	for _, cp := range copies {
		for i := range c.ck {
			if ck := &c.ck[i]; ck.valid && c.slot(i) == cp.To {
				delete(c.byKey, ck.key)
				ck.valid = false
			}
		}
	}
}

// save records that checkpoint idx holds the state after key once the
// iteration succeeds (commit).
func (c *checkpoints) save(idx int, key ckptKey) {
	c.pending = append(c.pending, pendingSave{idx, key})
}

// commit applies the iteration's saves (ok), or, after a failed
// iteration, drops the checkpoints they were writing; it returns how many
// it applied.
func (c *checkpoints) commit(ok bool) (saved int) {
	if c == nil {
		return 0
	}
	for _, p := range c.pending {
		ck := &c.ck[p.i]
		if ck.valid {
			delete(c.byKey, ck.key)
			ck.valid = false
		}
		if !ok {
			continue
		}
		if old, dup := c.byKey[p.key]; dup && old != p.i {
			c.ck[old].valid = false // a newer save of the same prefix
		}
		c.tick++
		ck.key, ck.valid, ck.used = p.key, true, c.tick
		c.byKey[p.key] = p.i
		saved++
	}
	c.pending = c.pending[:0]
	return saved
}

// take is the checkpoint a state moved here from another pod under key
// goes into (ImportState): idx -1 when key is checkpointed already; else
// a free or the least recently used device checkpoint no sequence owns,
// whose valid state spills to the host tier (spill, a copy to run first;
// spilled false: none) or is dropped; else such a host checkpoint. ok is
// false when every checkpoint is owned.
func (c *checkpoints) take(key ckptKey) (idx int, spill batch.StateCopy, spilled, ok bool) {
	if _, dup := c.byKey[key]; dup {
		return -1, spill, false, true
	}
	idx = c.lru(0, c.nDev)
	if idx >= 0 {
		spill, spilled = c.spill(idx)
	} else if idx = c.lru(c.nDev, len(c.ck)); idx < 0 {
		return 0, spill, false, false
	}
	if ck := &c.ck[idx]; ck.valid {
		delete(c.byKey, ck.key)
		ck.valid = false
	}
	return idx, spill, spilled, true
}

// install records that checkpoint idx holds the state after key.
func (c *checkpoints) install(idx int, key ckptKey) {
	c.tick++
	c.ck[idx] = checkpoint{key: key, valid: true, used: c.tick}
	c.byKey[key] = idx
}

// release ends s's ownership of its checkpoint, which stays for others.
func (c *checkpoints) release(s *sequence) {
	if c == nil || s.ckpt < 0 {
		return
	}
	c.ck[s.ckpt].owner = nil
	s.ckpt = -1
}

// count is the number of valid checkpoints (tests, metrics).
func (c *checkpoints) count() int {
	if c == nil {
		return 0
	}
	return len(c.byKey)
}

// alignLocked runs after the batch is planned, on an engine whose states
// are checkpointed: a prefill chunk that passes a block boundary ends at
// the last one it passes, and every sequence whose tokens end on a block
// boundary saves its state there (StateSaves).
func (e *Engine) alignLocked() {
	ck, bs := e.slots.ck, e.blockSize
	for i, s := range e.sched {
		sq := &e.b.Seqs[i]
		end := sq.Pos + len(sq.Tokens)
		b := end / bs * bs
		// Saved: the prompt's last block boundary, and (CheckpointPrograms)
		// the boundaries decoded past; not the boundaries a long prompt's
		// chunks end on before its last one, which would evict the other
		// programs' checkpoints for states few requests resume from.
		if b <= sq.Pos || b < s.promptLen/bs*bs || (b > s.promptLen && !ck.decoded) {
			continue // no boundary reached, or none this mode saves
		}
		if b < end {
			cut := end - b
			sq.Tokens = sq.Tokens[:len(sq.Tokens)-cut]
			sq.Sample, sq.ArgmaxOnly = false, false
			e.b.NumTokens -= cut
		}
		// The prompt's checkpoint stays for whoever repeats the prompt;
		// the decoded ones replace each other.
		idx, spill, spilled, ok := ck.slotFor(s, b > s.promptLen)
		if !ok {
			continue
		}
		if spilled {
			e.b.StateCopies = append(e.b.StateCopies, spill)
			e.slots.spilled++
		}
		if s.hashed.k.n == 0 || s.hashed.k.n > b || s.hashed.k.n%bs != 0 {
			s.hashed = newPrefixHasher(s.salt)
		}
		s.hashed.add(s.tokens[s.hashed.k.n:b])
		ck.save(idx, s.hashed.k)
		e.b.StateSaves = append(e.b.StateSaves, batch.StateCopy{From: s.slot, To: ck.slot(idx), Pos: b})
	}
}
