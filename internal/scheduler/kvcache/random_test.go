package kvcache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRandomOperations drives a Manager with random Admit, Grow, Commit, Free,
// Deprioritize, Offload and Restore calls on sequences that share prefixes,
// checking the invariants after every step. A shadow model records which token
// each KV slot holds, in both tiers, written only when a sequence computes it
// and moved only by the transfers the Manager issues (carried out lazily, just
// before the next computation or read, as the engine does), so every cache
// hit, from either tier, is checked to hold exactly the tokens asked for,
// whole prefix included.
func TestRandomOperations(t *testing.T) {
	tests := []struct {
		name       string
		blockSize  int
		numBlocks  int
		weakHash   bool
		hostBlocks int
	}{
		{name: "small blocks", blockSize: 2, numBlocks: 24},
		{name: "blocks of 4", blockSize: 4, numBlocks: 40},
		{name: "tight memory", blockSize: 4, numBlocks: 10},
		{name: "colliding hash", blockSize: 2, numBlocks: 24, weakHash: true},
		{name: "colliding hash, blocks of 4", blockSize: 4, numBlocks: 40, weakHash: true},
		{name: "host tier", blockSize: 2, numBlocks: 24, hostBlocks: 16},
		{name: "host tier smaller than a chain", blockSize: 2, numBlocks: 24, hostBlocks: 3},
		{name: "host tier, tight memory", blockSize: 4, numBlocks: 10, hostBlocks: 40},
		{name: "host tier, colliding hash", blockSize: 2, numBlocks: 24, hostBlocks: 12, weakHash: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Config{NumBlocks: tc.numBlocks, BlockSize: tc.blockSize, EnablePrefixCache: true, HostBlocks: tc.hostBlocks})
			if tc.weakHash {
				// Few distinct values: most registrations collide.
				m.hashFn = func(parent uint64, toks []int32) uint64 {
					return (parent*31 + uint64(toks[0])) % 5
				}
			}
			sim := newSimulation(t, m, rand.New(rand.NewPCG(uint64(i), 42)))
			sim.run(8000)
			if sim.hits == 0 || sim.failedAdmits == 0 || sim.failedGrows == 0 {
				t.Errorf("test did not exercise enough: %d cache hits, %d failed admits, %d failed grows",
					sim.hits, sim.failedAdmits, sim.failedGrows)
			}
			if st := m.Stats(); tc.hostBlocks > 0 && (st.Offloaded == 0 || st.Spilled == 0 || st.Restored == 0 || st.HostHits == 0 || sim.copiedIn == 0) {
				t.Errorf("test did not exercise the host tier: %+v, %d blocks copied in", st, sim.copiedIn)
			}
			t.Logf("%d admitted, %d cached tokens, %d failed admits, %d failed grows; %+v",
				sim.admitted, sim.hits, sim.failedAdmits, sim.failedGrows, m.Stats())
		})
	}
}

type simSeq struct {
	tokens   []int32
	computed int
}

type simulation struct {
	t   *testing.T
	m   *Manager
	rng *rand.Rand
	bs  int

	slots    [][]int32 // per block, the token in each KV slot; -1 unwritten
	host     [][]int32 // per host slot, likewise
	seqs     map[SeqID]*simSeq
	ids      []SeqID // live sequences, for random picks
	next     SeqID
	bases    [][]int32 // prompts that later prompts extend
	finished [][]int32 // token lists of freed sequences

	admitted, hits, failedAdmits, failedGrows int
	copiedOut, copiedIn                       int
}

func newSimulation(t *testing.T, m *Manager, rng *rand.Rand) *simulation {
	s := &simulation{t: t, m: m, rng: rng, bs: m.BlockSize(), seqs: map[SeqID]*simSeq{}}
	s.slots = make([][]int32, m.NumBlocks())
	for i := range s.slots {
		s.slots[i] = slices.Repeat([]int32{-1}, s.bs)
	}
	s.host = make([][]int32, m.HostBlocks())
	for i := range s.host {
		s.host[i] = slices.Repeat([]int32{-1}, s.bs)
	}
	for range 4 {
		s.bases = append(s.bases, s.randomTokens(1+rng.IntN(6*s.bs)))
	}
	return s
}

// randomTokens draws from a small alphabet so unrelated prompts still share
// blocks now and then.
func (s *simulation) randomTokens(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(s.rng.IntN(3))
	}
	return out
}

// prompt is a prefix of a base prompt or of a finished sequence (a follow-up
// turn), often with new tokens after it.
func (s *simulation) prompt() []int32 {
	src := s.bases[s.rng.IntN(len(s.bases))]
	if len(s.finished) > 0 && s.rng.IntN(3) == 0 {
		src = s.finished[s.rng.IntN(len(s.finished))]
	}
	p := slices.Clone(src[:s.rng.IntN(len(src)+1)])
	if len(p) == 0 || s.rng.IntN(2) == 0 {
		p = append(p, s.randomTokens(1+s.rng.IntN(3*s.bs))...)
	}
	return p
}

func (s *simulation) run(steps int) {
	for step := range steps {
		var op string
		switch r := s.rng.IntN(100); {
		case r < 25 || len(s.ids) == 0:
			op = "admit"
			s.admit()
		case r < 70:
			op = "step"
			s.step()
		case r < 82:
			op = "free"
			s.free(s.ids[s.rng.IntN(len(s.ids))], s.rng.IntN(4) == 0)
		case r < 86:
			op = "deprioritize"
			s.m.Deprioritize(s.pausedTokens())
		case r < 91:
			op = "offload"
			s.moveTiers(s.pausedTokens(), s.m.Offload)
		case r < 94:
			op = "restore"
			s.moveTiers(s.pausedTokens(), s.m.Restore)
		default:
			op = "lookup"
			s.lookup(s.prompt())
		}
		if err := s.m.CheckInvariants(); err != nil {
			s.t.Fatalf("step %d (%s): %v", step, op, err)
		}
		s.checkAccounting(fmt.Sprintf("step %d (%s)", step, op))
	}
	for len(s.ids) > 0 {
		s.free(s.ids[0], false)
	}
	if err := s.m.CheckInvariants(); err != nil {
		s.t.Fatal(err)
	}
	if st := s.m.Stats(); st.Used != 0 || st.Free != st.Total {
		s.t.Fatalf("all sequences freed but %+v", st)
	}
}

// pausedTokens is the context of a program that pauses: usually a finished
// sequence's tokens.
func (s *simulation) pausedTokens() []int32 {
	if len(s.finished) > 0 && s.rng.IntN(4) != 0 {
		return s.finished[s.rng.IntN(len(s.finished))]
	}
	return s.prompt()
}

// moveTiers runs Offload or Restore and checks what must not change: every
// block table and refcount, and the length of tokens' cached prefix (the move
// never evicts the chain it moves).
func (s *simulation) moveTiers(tokens []int32, move func([]int32) int) {
	s.t.Helper()
	tables := map[SeqID][]BlockID{}
	for _, seq := range s.ids {
		tables[seq] = slices.Clone(s.m.Blocks(seq))
	}
	refs := make([]int32, s.m.NumBlocks())
	for i := range refs {
		refs[i] = s.m.blocks[i].ref
	}
	prefix := s.m.CachedPrefix(tokens)
	full := len(s.m.matchPrefix(rootHash, tokens, len(tokens)/s.bs))
	st := s.m.Stats()
	n := move(tokens)
	after := s.m.Stats()
	// Restore's allocations may spill other blocks; those are not moves.
	if moved := after.Offloaded - after.Spilled - st.Offloaded + st.Spilled + after.Restored - st.Restored; int64(n) != moved {
		s.t.Fatalf("move reported %d blocks, counters moved %d", n, moved)
	}
	if n > full {
		s.t.Fatalf("moved %d blocks of a %d-block chain", n, full)
	}
	for _, seq := range s.ids {
		if !slices.Equal(tables[seq], s.m.Blocks(seq)) {
			s.t.Fatalf("moving tiers changed sequence %d's table", seq)
		}
	}
	for i := range refs {
		if refs[i] != s.m.blocks[i].ref {
			s.t.Fatalf("moving tiers changed block %d's refcount %d -> %d", i, refs[i], s.m.blocks[i].ref)
		}
	}
	if got := s.m.CachedPrefix(tokens); got != prefix {
		s.t.Fatalf("moving tiers changed the cached prefix %d -> %d tokens", prefix, got)
	}
	s.lookup(tokens)
}

// transfer carries out the Manager's pending copies on the shadow slots, as
// the executor would, in order.
func (s *simulation) transfer() {
	for _, x := range s.m.Transfers() {
		switch x.Kind {
		case CopyOut:
			copy(s.host[x.Host], s.slots[x.Device])
			s.copiedOut++
		case CopyIn:
			copy(s.slots[x.Device], s.host[x.Host])
			s.copiedIn++
		default:
			s.t.Fatalf("transfer of kind %v", x.Kind)
		}
	}
	s.m.ClearTransfers()
}

// lookup checks that the cached prefix of tokens holds exactly those tokens.
func (s *simulation) lookup(tokens []int32) {
	s.t.Helper()
	s.transfer()
	want := s.m.CachedPrefix(tokens)
	if limit := max(len(tokens)-1, 0) / s.bs * s.bs; want > limit {
		s.t.Fatalf("CachedPrefix = %d for %d tokens, beyond the cap %d", want, len(tokens), limit)
	}
	hit := s.m.matchPrefix(rootHash, tokens, s.m.cacheableBlocks(len(tokens)))
	if len(hit)*s.bs != want {
		s.t.Fatalf("CachedPrefix = %d but %d blocks match", want, len(hit))
	}
	s.checkHolds(hit, tokens)
}

// checkHolds fails unless the blocks at locs hold the leading tokens, slot for
// slot.
func (s *simulation) checkHolds(locs []loc, tokens []int32) {
	s.t.Helper()
	for i, l := range locs {
		got := s.slots[max(l, 0)]
		if l.onHost() {
			got = s.host[l.slot()]
		}
		if diff := cmp.Diff(tokens[i*s.bs:(i+1)*s.bs], got); diff != "" {
			s.t.Fatalf("cached block %v (#%d of the prefix) holds other tokens (-want +got):\n%s", l, i, diff)
		}
	}
}

func deviceLocs(ids []BlockID) []loc {
	out := make([]loc, len(ids))
	for i, id := range ids {
		out[i] = loc(id)
	}
	return out
}

func (s *simulation) admit() {
	tokens := s.prompt()
	seq := s.next
	s.next++
	expect := s.m.CachedPrefix(tokens)
	before := takeSnapshot(s.m)
	cached, ok := s.m.Admit(seq, tokens, s.rng.IntN(len(tokens)+2))
	if !ok {
		s.failedAdmits++
		if diff := cmp.Diff(before, takeSnapshot(s.m), cmp.AllowUnexported(snapshot{}, block{}, registration{}, hostSlot{})); diff != "" {
			s.t.Fatalf("failed Admit changed state (-before +after):\n%s", diff)
		}
		return
	}
	if cached != expect {
		s.t.Fatalf("Admit cached %d tokens, CachedPrefix said %d", cached, expect)
	}
	s.transfer()
	table := s.m.Blocks(seq)
	s.checkHolds(deviceLocs(table[:cached/s.bs]), tokens)
	s.fresh(table[cached/s.bs:])
	s.admitted++
	s.hits += cached
	s.seqs[seq] = &simSeq{tokens: tokens, computed: cached}
	s.ids = append(s.ids, seq)
}

// fresh records that blocks were just allocated: their slots hold nothing yet.
func (s *simulation) fresh(blocks []BlockID) {
	for _, id := range blocks {
		if s.m.blocks[id].ref != 1 || s.m.blocks[id].registered {
			s.t.Fatalf("new block %d: refcount %d, registered %v", id, s.m.blocks[id].ref, s.m.blocks[id].registered)
		}
		for j := range s.slots[id] {
			s.slots[id][j] = -1
		}
	}
}

// step computes the next chunk of a random sequence: more of its prompt, or
// the KV of its last token plus a newly sampled one (decode).
func (s *simulation) step() {
	s.transfer() // the executor copies before it computes
	seq := s.ids[s.rng.IntN(len(s.ids))]
	q := s.seqs[seq]
	if q.computed == len(q.tokens) {
		// The sampled token depends on the context only, so sequences with
		// the same prefix produce the same output and share blocks.
		var next int32
		for _, tok := range q.tokens[max(len(q.tokens)-3, 0):] {
			next = (next*7 + tok + 1) % 3
		}
		q.tokens = append(q.tokens, next)
	}
	target := min(len(q.tokens), q.computed+1+s.rng.IntN(3*s.bs))
	old := slices.Clone(s.m.Blocks(seq))
	free := s.m.NumFree()
	if !s.m.Grow(seq, target) {
		s.failedGrows++
		if s.m.NumFree() != free || !slices.Equal(old, s.m.Blocks(seq)) {
			s.t.Fatalf("failed Grow changed the table or the free count")
		}
		s.free(seq, s.rng.IntN(2) == 0) // preempted
		return
	}
	s.transfer() // the engine copies evicted blocks out before it computes
	table := s.m.Blocks(seq)
	if !slices.Equal(old, table[:len(old)]) {
		s.t.Fatalf("Grow changed existing table entries: %v -> %v", old, table)
	}
	s.fresh(table[len(old):])
	for p := q.computed; p < target; p++ {
		id := table[p/s.bs]
		if b := s.m.blocks[id]; b.ref != 1 || b.registered {
			s.t.Fatalf("computing into block %d with refcount %d, registered %v", id, b.ref, b.registered)
		}
		s.slots[id][p%s.bs] = q.tokens[p]
	}
	s.m.Commit(seq, q.tokens, target)
	if s.rng.IntN(8) == 0 {
		s.m.Commit(seq, q.tokens, target) // repeating a commit is harmless
	}
	q.computed = target
}

func (s *simulation) free(seq SeqID, evictFirst bool) {
	q := s.seqs[seq]
	s.m.Free(seq, evictFirst)
	delete(s.seqs, seq)
	s.ids = slices.DeleteFunc(s.ids, func(id SeqID) bool { return id == seq })
	if s.m.Has(seq) {
		s.t.Fatalf("sequence %d still known after Free", seq)
	}
	if q.computed > 0 {
		s.finished = append(s.finished, q.tokens[:q.computed])
		if len(s.finished) > 16 {
			s.finished = s.finished[1:]
		}
	}
}

// checkAccounting compares the public counters with the tables.
func (s *simulation) checkAccounting(where string) {
	s.t.Helper()
	holders := map[BlockID]int{}
	for _, seq := range s.ids {
		for _, id := range s.m.Blocks(seq) {
			holders[id]++
		}
	}
	for _, seq := range s.ids {
		shared := 0
		for _, id := range s.m.Blocks(seq) {
			if holders[id] > 1 {
				shared += s.bs
			}
		}
		if got := s.m.SharedTokens(seq); got != shared {
			s.t.Fatalf("%s: SharedTokens(%d) = %d, want %d", where, seq, got, shared)
		}
	}
	st := s.m.Stats()
	if st.Used != len(holders) || st.Used+st.Free != st.Total || st.Free != s.m.NumFree() || st.Cached > st.Free {
		s.t.Fatalf("%s: stats %+v with %d blocks in tables", where, st, len(holders))
	}
}
