package kvcache

import (
	"strings"
	"testing"
)

// TestCheckInvariantsDetectsCorruption breaks a healthy Manager in one way at
// a time and expects the checker to name the damage.
func TestCheckInvariantsDetectsCorruption(t *testing.T) {
	// Blocks of 2: sequences 1 and 2 share [1 2]; sequence 3's blocks were
	// freed and [11 12] [13 14] are cached on the free list.
	setup := func(t *testing.T) *Manager {
		m := newManager(t, Config{NumBlocks: 12, BlockSize: 2, EnablePrefixCache: true})
		run(t, m, 1, span(1, 5))
		run(t, m, 2, span(1, 3))
		run(t, m, 3, span(11, 5))
		m.Free(3, false)
		check(t, m)
		return m
	}
	tests := []struct {
		name    string
		corrupt func(m *Manager)
		want    string
	}{
		{
			name:    "refcount too high",
			corrupt: func(m *Manager) { m.blocks[m.Blocks(1)[1]].ref++ },
			want:    "refcount 2, held by 1 tables",
		},
		{
			name:    "shared block counted once",
			corrupt: func(m *Manager) { m.blocks[m.Blocks(2)[0]].ref-- },
			want:    "refcount 1, held by 2 tables",
		},
		{
			name:    "block in a table and on the free list",
			corrupt: func(m *Manager) { s := m.seqs[1]; s.table = append(s.table, m.head()) },
			want:    "is in a block table",
		},
		{
			name:    "block twice in one table",
			corrupt: func(m *Manager) { s := m.seqs[1]; s.table = append(s.table, s.table[0]) },
			want:    "appears twice",
		},
		{
			name: "double free",
			corrupt: func(m *Manager) {
				id := m.Blocks(1)[2]
				m.blocks[id].ref = 0
				m.pushHead(id)
			},
			want: "is in a block table",
		},
		{
			name: "free block lost from the list",
			corrupt: func(m *Manager) {
				id := m.head()
				m.unlink(id)
				m.numFree++
			},
			want: "not on the free list",
		},
		{
			name:    "free count off",
			corrupt: func(m *Manager) { m.numFree-- },
			want:    "free count",
		},
		{
			name: "broken prev link",
			corrupt: func(m *Manager) {
				id := m.head()
				m.blocks[m.blocks[id].next].prev = -1
			},
			want: "has prev -1",
		},
		{
			name: "cycle",
			corrupt: func(m *Manager) {
				id := m.head()
				m.blocks[m.blocks[id].next].next = int32(id)
			},
			want: "listed twice",
		},
		{
			name:    "link out of range",
			corrupt: func(m *Manager) { m.blocks[m.head()].next = 99 },
			want:    "out of range",
		},
		{
			name:    "cached count off",
			corrupt: func(m *Manager) { m.cachedFree++ },
			want:    "cached free count",
		},
		{
			name: "index names an unregistered block",
			corrupt: func(m *Manager) {
				id := m.Blocks(1)[1]
				m.blocks[id].registered = false
			},
			want: "not registered",
		},
		{
			name: "index names a block with another hash",
			corrupt: func(m *Manager) {
				id := m.Blocks(1)[1]
				m.index[m.blocks[id].hash+1] = loc(id)
			},
			want: "which holds hash",
		},
		{
			name: "stored tokens do not match the hash",
			corrupt: func(m *Manager) {
				id := m.Blocks(1)[1]
				m.blockTokens(id)[0]++
			},
			want: "do not hash to",
		},
		{
			name: "uid reused",
			corrupt: func(m *Manager) {
				a, b := m.Blocks(1)[0], m.Blocks(1)[1]
				m.blocks[b].uid, m.blocks[b].parentUID = m.blocks[a].uid, 0
			},
			want: "share uid",
		},
		{
			name:    "hashed past the table",
			corrupt: func(m *Manager) { m.seqs[2].hashed = 5 },
			want:    "blocks hashed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := setup(t)
			tc.corrupt(m)
			err := m.CheckInvariants()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckInvariants() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
