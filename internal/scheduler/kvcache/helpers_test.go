package kvcache

import (
	"testing"
)

func newManager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return m
}

// span returns the n token ids from, from+1, …
func span(from, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(from + i)
	}
	return out
}

func concat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// freeOrder is the free list from head (allocated next) to tail.
func (m *Manager) freeOrder() []BlockID {
	var out []BlockID
	s := m.sentinel()
	for id := m.blocks[s].next; id != s; id = m.blocks[id].next {
		out = append(out, BlockID(id))
	}
	return out
}

func check(t testing.TB, m *Manager) {
	t.Helper()
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// run admits seq with all of tokens, computes and commits them.
func run(t testing.TB, m *Manager, seq SeqID, tokens []int32) (cached int) {
	t.Helper()
	cached, ok := m.Admit(seq, tokens, len(tokens))
	if !ok {
		t.Fatalf("Admit(%d, %d tokens): no room (%d free)", seq, len(tokens), m.NumFree())
	}
	m.Commit(seq, tokens, len(tokens))
	check(t, m)
	return cached
}

// snapshot is everything an operation that fails must leave unchanged.
type snapshot struct {
	blocks []block
	index  map[uint64]loc
	host   []hostSlot
	stats  Stats
	seqs   int
}

func takeSnapshot(m *Manager) snapshot {
	idx := make(map[uint64]loc, len(m.index))
	for h, id := range m.index {
		idx[h] = id
	}
	return snapshot{blocks: append([]block(nil), m.blocks...), index: idx, host: append([]hostSlot(nil), m.host.slots...),
		stats: m.Stats(), seqs: len(m.seqs)}
}
