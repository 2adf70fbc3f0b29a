package kvcache

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCachedPrefix(t *testing.T) {
	// Block size 4; the cache holds the full blocks of 1…10: [1 2 3 4] [5 6 7 8].
	m := newManager(t, Config{NumBlocks: 16, BlockSize: 4, EnablePrefixCache: true})
	prompt := span(1, 10)
	run(t, m, 1, prompt)
	m.Free(1, false)
	check(t, m)

	tests := []struct {
		name   string
		tokens []int32
		want   int
	}{
		{name: "same prompt, capped below the last token", tokens: prompt, want: 8},
		{name: "two full blocks exactly: the last token is computed", tokens: span(1, 8), want: 4},
		{name: "one token past two blocks", tokens: span(1, 9), want: 8},
		{name: "longer prompt: third block never cached", tokens: span(1, 16), want: 8},
		{name: "differs in the second block", tokens: concat(span(1, 5), []int32{99}, span(7, 4)), want: 4},
		{name: "differs in the first block", tokens: concat([]int32{99}, span(2, 9)), want: 0},
		{name: "second block alone is not a prefix", tokens: span(5, 8), want: 0},
		{name: "a block's tokens under another parent", tokens: concat(span(5, 4), span(5, 4), []int32{1}), want: 0},
		{name: "empty", tokens: nil, want: 0},
		{name: "one token", tokens: []int32{1}, want: 0},
		{name: "shorter than a block", tokens: span(1, 3), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := m.Stats()
			if got := m.CachedPrefix(tc.tokens); got != tc.want {
				t.Errorf("CachedPrefix = %d, want %d", got, tc.want)
			}
			if diff := cmp.Diff(before, m.Stats()); diff != "" {
				t.Errorf("CachedPrefix changed stats (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPrefixCacheDisabled(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 8, BlockSize: 4})
	prompt := span(1, 10)
	run(t, m, 1, prompt)
	m.Free(1, false)
	if got := m.CachedPrefix(prompt); got != 0 {
		t.Fatalf("CachedPrefix = %d with caching disabled, want 0", got)
	}
	if got := run(t, m, 2, prompt); got != 0 {
		t.Fatalf("Admit cached = %d with caching disabled, want 0", got)
	}
	m.Deprioritize(prompt)
	check(t, m)
	if diff := cmp.Diff(Stats{Total: 8, Used: 3, Free: 5}, m.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

func TestAdmit(t *testing.T) {
	prompt := span(1, 10) // blocks of 4: [1-4] [5-8] [9 10]
	tests := []struct {
		name       string
		warm       bool // run prompt once first, leaving its blocks cached
		tokens     []int32
		maxNew     int
		wantCached int
		wantBlocks int
	}{
		{name: "cold, whole prompt", tokens: prompt, maxNew: 100, wantBlocks: 3},
		{name: "cold, chunk of 5", tokens: prompt, maxNew: 5, wantBlocks: 2},
		{name: "cold, chunk of 4", tokens: prompt, maxNew: 4, wantBlocks: 1},
		{name: "cold, nothing new", tokens: prompt, maxNew: 0, wantBlocks: 0},
		{name: "negative maxNew is 0", tokens: prompt, maxNew: -5, wantBlocks: 0},
		{name: "empty prompt", tokens: nil, maxNew: 16, wantBlocks: 0},
		{name: "warm, whole prompt", warm: true, tokens: prompt, maxNew: 100, wantCached: 8, wantBlocks: 3},
		{name: "warm, cached blocks only", warm: true, tokens: prompt, maxNew: 0, wantCached: 8, wantBlocks: 2},
		{name: "warm, extended prompt", warm: true, tokens: span(1, 14), maxNew: 3, wantCached: 8, wantBlocks: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Config{NumBlocks: 8, BlockSize: 4, EnablePrefixCache: true})
			var warmBlocks []BlockID
			if tc.warm {
				run(t, m, 1, prompt)
				warmBlocks = append(warmBlocks, m.Blocks(1)...)
				m.Free(1, false)
			}
			before := m.Stats()
			cached, ok := m.Admit(2, tc.tokens, tc.maxNew)
			if !ok {
				t.Fatal("Admit: no room")
			}
			check(t, m)
			table := m.Blocks(2)
			if cached != tc.wantCached || len(table) != tc.wantBlocks {
				t.Fatalf("Admit = %d cached, %d blocks; want %d, %d", cached, len(table), tc.wantCached, tc.wantBlocks)
			}
			if n := tc.wantCached / 4; n > 0 {
				if diff := cmp.Diff(warmBlocks[:n], table[:n]); diff != "" {
					t.Errorf("cached blocks (-want +got):\n%s", diff)
				}
			}
			after := m.Stats()
			eligible := int64(0)
			if len(tc.tokens) > 0 {
				eligible = int64((len(tc.tokens) - 1) / 4 * 4)
			}
			if after.Queries-before.Queries != eligible || after.Hits-before.Hits != int64(cached) {
				t.Errorf("stats moved by %d queries, %d hits; want %d, %d",
					after.Queries-before.Queries, after.Hits-before.Hits, eligible, cached)
			}
			if after.Used != len(table) {
				t.Errorf("Used = %d, want %d", after.Used, len(table))
			}
		})
	}
}

func TestAdmitAndGrowFailAtomically(t *testing.T) {
	// Four blocks of 2. Running 1…5 leaves [1 2] and [3 4] cached on the
	// free list and one more block holding 5 free.
	setup := func(t *testing.T) *Manager {
		m := newManager(t, Config{NumBlocks: 4, BlockSize: 2, EnablePrefixCache: true})
		run(t, m, 1, span(1, 5))
		m.Free(1, false)
		check(t, m)
		return m
	}
	t.Run("admit counts cached blocks taken off the free list", func(t *testing.T) {
		m := setup(t)
		// Two cached blocks plus three fresh ones: 5 > 4 free, although the
		// fresh ones alone would fit.
		tokens := span(1, 10)
		if got := m.CachedPrefix(tokens); got != 4 {
			t.Fatalf("CachedPrefix = %d, want 4", got)
		}
		before := takeSnapshot(m)
		if cached, ok := m.Admit(2, tokens, 100); ok {
			t.Fatalf("Admit succeeded with %d cached, want failure", cached)
		}
		if diff := cmp.Diff(before, takeSnapshot(m), cmp.AllowUnexported(snapshot{}, block{}, registration{}, hostSlot{})); diff != "" {
			t.Fatalf("failed Admit changed state (-before +after):\n%s", diff)
		}
		if m.Has(2) {
			t.Fatal("failed Admit left the sequence behind")
		}
		// Exactly enough: two cached and two fresh blocks.
		if cached, ok := m.Admit(2, tokens, 4); !ok || cached != 4 {
			t.Fatalf("Admit = %d, %v; want 4, true", cached, ok)
		}
		check(t, m)
		if m.NumFree() != 0 {
			t.Fatalf("NumFree = %d, want 0", m.NumFree())
		}
	})
	t.Run("grow", func(t *testing.T) {
		m := setup(t)
		if _, ok := m.Admit(2, []int32{7}, 1); !ok {
			t.Fatal("Admit: no room")
		}
		before := takeSnapshot(m)
		if m.Grow(2, 9) {
			t.Fatal("Grow to 5 blocks of 4 succeeded")
		}
		if diff := cmp.Diff(before, takeSnapshot(m), cmp.AllowUnexported(snapshot{}, block{}, registration{}, hostSlot{})); diff != "" {
			t.Fatalf("failed Grow changed state (-before +after):\n%s", diff)
		}
		if !m.Grow(2, 8) || len(m.Blocks(2)) != 4 {
			t.Fatalf("Grow to 4 blocks: table %v", m.Blocks(2))
		}
		if !m.Grow(2, 3) || len(m.Blocks(2)) != 4 {
			t.Fatalf("Grow to fewer tokens changed the table: %v", m.Blocks(2))
		}
		check(t, m)
		// The cached blocks were evicted to make room.
		if got := m.CachedPrefix(span(1, 5)); got != 0 {
			t.Fatalf("CachedPrefix after eviction = %d, want 0", got)
		}
	})
}

func TestFreeOrder(t *testing.T) {
	// Six blocks of 2; sequence 1 runs 1…5: blocks b0=[1 2] b1=[3 4]
	// cached, b2=[5] partial. Blocks 3, 4, 5 were never used.
	tests := []struct {
		name       string
		evictFirst bool
		want       func(b []BlockID) []BlockID // free list, head first
	}{
		{
			name: "LRU: uncached to the head, cached to the tail, last block first",
			want: func(b []BlockID) []BlockID { return []BlockID{b[2], 3, 4, 5, b[1], b[0]} },
		},
		{
			name:       "evictFirst: all to the head, last block first",
			evictFirst: true,
			want:       func(b []BlockID) []BlockID { return []BlockID{b[2], b[1], b[0], 3, 4, 5} },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Config{NumBlocks: 6, BlockSize: 2, EnablePrefixCache: true})
			run(t, m, 1, span(1, 5))
			table := append([]BlockID(nil), m.Blocks(1)...)
			if diff := cmp.Diff([]BlockID{0, 1, 2}, table); diff != "" {
				t.Fatalf("table (-want +got):\n%s", diff)
			}
			m.Free(1, tc.evictFirst)
			check(t, m)
			if m.Has(1) || m.Blocks(1) != nil {
				t.Fatal("freed sequence still known")
			}
			if diff := cmp.Diff(tc.want(table), m.freeOrder()); diff != "" {
				t.Fatalf("free list (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(Stats{Total: 6, Cached: 2, Free: 6, Queries: 4}, m.Stats()); diff != "" {
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
			m.Free(1, false) // unknown sequences are ignored
			check(t, m)
		})
	}
}

func TestLRUEviction(t *testing.T) {
	// Eight blocks of 2. Sequence 1 caches A=[1 2][3 4], then sequence 2
	// caches B=[11 12][13 14]; both are freed, A first, so A is older.
	m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true})
	a, b := span(1, 5), span(11, 5)
	run(t, m, 1, a)
	run(t, m, 2, b)
	m.Free(1, false)
	m.Free(2, false)
	check(t, m)

	// Each step allocates one more block for sequence 3 and says how much of
	// A and B is still cached. The two uncached partial blocks and the two
	// never used go first, then A's last block, A's first, B's last, B's first.
	// evicted is the Evicted count: only taking a cached block counts.
	steps := []struct{ a, b, evicted int }{
		{4, 4, 0}, {4, 4, 0}, {4, 4, 0}, {4, 4, 0}, // blocks 1–4: uncached ones
		{2, 4, 1}, {0, 4, 2}, {0, 2, 3}, {0, 0, 4},
	}
	if _, ok := m.Admit(3, []int32{100}, 0); !ok {
		t.Fatal("Admit: no room")
	}
	for i, want := range steps {
		if !m.Grow(3, 2*(i+1)) {
			t.Fatalf("Grow to %d blocks failed", i+1)
		}
		check(t, m)
		if gotA, gotB := m.CachedPrefix(a), m.CachedPrefix(b); gotA != want.a || gotB != want.b {
			t.Fatalf("after allocating %d blocks: cached A, B = %d, %d; want %d, %d", i+1, gotA, gotB, want.a, want.b)
		}
		if got := m.Stats().Evicted; got != int64(want.evicted) {
			t.Fatalf("after allocating %d blocks: Evicted = %d, want %d", i+1, got, want.evicted)
		}
	}
	if m.Grow(3, 17) {
		t.Fatal("Grow past the last block succeeded")
	}
}

func TestAdmitTakesCachedBlockFromMiddleOfFreeList(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true})
	run(t, m, 1, span(1, 5))
	run(t, m, 2, span(11, 5))
	m.Free(1, false)
	m.Free(2, false)
	// The free list ends with A's blocks then B's; admitting A again takes
	// its two blocks out of the middle and leaves B's cached.
	if cached, ok := m.Admit(3, span(1, 5), 5); !ok || cached != 4 {
		t.Fatalf("Admit = %d, %v; want 4, true", cached, ok)
	}
	check(t, m)
	if diff := cmp.Diff(Stats{Total: 8, Used: 3, Cached: 2, Free: 5, Queries: 12, Hits: 4}, m.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	if got := m.CachedPrefix(span(11, 5)); got != 4 {
		t.Errorf("B cached = %d, want 4", got)
	}
}

func TestDeprioritize(t *testing.T) {
	// Eight blocks of 2: A=[1 2][3 4] and B=[11 12][13 14] cached, B freed last.
	setup := func(t *testing.T) (*Manager, []BlockID, []BlockID) {
		m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true})
		run(t, m, 1, span(1, 5))
		run(t, m, 2, span(11, 5))
		a := append([]BlockID(nil), m.Blocks(1)[:2]...)
		b := append([]BlockID(nil), m.Blocks(2)[:2]...)
		m.Free(1, false)
		m.Free(2, false)
		return m, a, b
	}
	t.Run("free chain moves to the head, deepest first", func(t *testing.T) {
		m, _, b := setup(t)
		m.Deprioritize(span(11, 6)) // more tokens than cached: the chain just stops
		check(t, m)
		order := m.freeOrder()
		if diff := cmp.Diff([]BlockID{b[1], b[0]}, order[:2]); diff != "" {
			t.Fatalf("head of free list (-want +got):\n%s", diff)
		}
		if m.CachedPrefix(span(11, 5)) != 4 || m.Stats().Cached != 4 {
			t.Fatal("Deprioritize dropped cached contents")
		}
	})
	t.Run("blocks in use stay put", func(t *testing.T) {
		m, a, _ := setup(t)
		// Sequence 3 shares A's first block only.
		if cached, ok := m.Admit(3, []int32{1, 2, 9, 9}, 4); !ok || cached != 2 {
			t.Fatalf("Admit = %d, %v; want 2, true", cached, ok)
		}
		m.Deprioritize(span(1, 4))
		check(t, m)
		if got := m.freeOrder()[0]; got != a[1] {
			t.Fatalf("head of free list = %d, want A's second block %d", got, a[1])
		}
		if m.blocks[a[0]].ref != 1 {
			t.Fatalf("A's first block has refcount %d, want 1", m.blocks[a[0]].ref)
		}
	})
	t.Run("only a whole chain from the first block", func(t *testing.T) {
		m, _, _ := setup(t)
		before := m.freeOrder()
		m.Deprioritize(span(3, 4)) // A's second block without its parent
		m.Deprioritize([]int32{1}) // shorter than a block
		m.Deprioritize(nil)
		if diff := cmp.Diff(before, m.freeOrder()); diff != "" {
			t.Fatalf("free list changed (-before +after):\n%s", diff)
		}
	})
}

func TestCommit(t *testing.T) {
	t.Run("only full computed blocks are registered", func(t *testing.T) {
		m := newManager(t, Config{NumBlocks: 8, BlockSize: 4, EnablePrefixCache: true})
		tokens := span(1, 12)
		if _, ok := m.Admit(1, tokens, 12); !ok {
			t.Fatal("Admit: no room")
		}
		for _, step := range []struct{ computed, registered int }{
			{3, 0}, {4, 1}, {7, 1}, {12, 3}, {12, 3}, {5, 3},
		} {
			m.Commit(1, tokens, step.computed)
			check(t, m)
			if len(m.index) != step.registered {
				t.Fatalf("after Commit(%d): %d blocks registered, want %d", step.computed, len(m.index), step.registered)
			}
		}
	})
	t.Run("decode tokens extend the chain", func(t *testing.T) {
		m := newManager(t, Config{NumBlocks: 8, BlockSize: 4, EnablePrefixCache: true})
		tokens := span(1, 6)
		run(t, m, 1, tokens)
		for next := int32(7); next <= 13; next++ {
			tokens = append(tokens, next)
			if !m.Grow(1, len(tokens)) {
				t.Fatal("Grow: no room")
			}
			m.Commit(1, tokens, len(tokens))
			check(t, m)
		}
		m.Free(1, false)
		if got := m.CachedPrefix(span(1, 20)); got != 12 {
			t.Fatalf("CachedPrefix of prompt and output = %d, want 12", got)
		}
	})
	t.Run("duplicates stay unregistered but extend the registered chain", func(t *testing.T) {
		m := newManager(t, Config{NumBlocks: 12, BlockSize: 4, EnablePrefixCache: true})
		prompt := span(1, 10)
		// Both admitted before either commits: neither hits the cache.
		for seq := SeqID(1); seq <= 2; seq++ {
			if cached, ok := m.Admit(seq, prompt, 10); !ok || cached != 0 {
				t.Fatalf("Admit(%d) = %d, %v; want 0, true", seq, cached, ok)
			}
		}
		m.Commit(1, prompt, 10)
		m.Commit(2, prompt, 10)
		check(t, m)
		one, two := m.Blocks(1), append([]BlockID(nil), m.Blocks(2)...)
		if len(m.index) != 2 || !m.blocks[one[0]].registered || !m.blocks[one[1]].registered {
			t.Fatalf("index %v, want sequence 1's full blocks %v", m.index, one[:2])
		}
		if m.blocks[two[0]].registered || m.blocks[two[1]].registered {
			t.Fatal("duplicate block registered")
		}
		// Sequence 2 goes on decoding: its new full block is registered
		// after sequence 1's chain, so the whole of it is found.
		long := concat(prompt, span(50, 6))
		if !m.Grow(2, len(long)) {
			t.Fatal("Grow: no room")
		}
		m.Commit(2, long, len(long))
		check(t, m)
		if !m.blocks[m.Blocks(2)[2]].registered {
			t.Fatal("block after the duplicates not registered")
		}
		if got := m.CachedPrefix(concat(long, []int32{0})); got != 16 {
			t.Fatalf("CachedPrefix = %d, want 16", got)
		}
		// Freed duplicates are plain free blocks, reused first; the blocks
		// registered after them stay cached.
		m.Free(2, false)
		check(t, m)
		head := m.freeOrder()[:2]
		for _, id := range two[:2] {
			if !slices.Contains(head, id) {
				t.Errorf("duplicate block %d not at the head of the free list %v", id, head)
			}
		}
		if m.Stats().Cached != 2 {
			t.Errorf("Cached = %d, want 2", m.Stats().Cached)
		}
	})
}

func TestSharedTokens(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 12, BlockSize: 4, EnablePrefixCache: true})
	prompt := span(1, 10)
	run(t, m, 1, prompt)
	if got := m.SharedTokens(1); got != 0 {
		t.Fatalf("SharedTokens alone = %d, want 0", got)
	}
	if cached := run(t, m, 2, prompt); cached != 8 {
		t.Fatalf("cached = %d, want 8", cached)
	}
	if cached := run(t, m, 3, span(1, 6)); cached != 4 {
		t.Fatalf("cached = %d, want 4", cached)
	}
	for _, tc := range []struct {
		seq  SeqID
		want int
	}{{1, 8}, {2, 8}, {3, 4}, {99, 0}} {
		if got := m.SharedTokens(tc.seq); got != tc.want {
			t.Errorf("SharedTokens(%d) = %d, want %d", tc.seq, got, tc.want)
		}
	}
	m.Free(1, false)
	m.Free(3, false)
	if got := m.SharedTokens(2); got != 0 {
		t.Errorf("SharedTokens after the others left = %d, want 0", got)
	}
}

func TestStaleRegistrationIsReplaced(t *testing.T) {
	// Blocks of 2. A=[1 2][3 4] is cached; then A's first block alone is
	// evicted, which strands [3 4]: no lookup can reach it.
	m := newManager(t, Config{NumBlocks: 6, BlockSize: 2, EnablePrefixCache: true})
	prompt := span(1, 5)
	run(t, m, 1, prompt)
	stranded := m.Blocks(1)[1]
	m.Free(1, false)
	m.Deprioritize(span(1, 2))
	if _, ok := m.Admit(2, []int32{9}, 1); !ok { // evicts the head: A's first block
		t.Fatal("Admit: no room")
	}
	check(t, m)
	if got := m.CachedPrefix(prompt); got != 0 {
		t.Fatalf("CachedPrefix = %d, want 0", got)
	}
	if !m.blocks[stranded].registered {
		t.Fatal("setup: second block no longer registered")
	}
	// Computing A again registers the new blocks in place of the stranded one.
	if cached := run(t, m, 3, prompt); cached != 0 {
		t.Fatalf("cached = %d, want 0", cached)
	}
	if m.blocks[stranded].registered {
		t.Fatal("stranded registration kept")
	}
	if got := m.freeOrder()[0]; got != stranded {
		t.Errorf("stranded block %d not at the head of the free list %v", stranded, m.freeOrder())
	}
	m.Free(3, false)
	if cached := run(t, m, 4, prompt); cached != 4 {
		t.Fatalf("cached after recompute = %d, want 4", cached)
	}
}

func TestHashCollisionsAreMisses(t *testing.T) {
	// Every block hashes alike: the index can hold one block, and a lookup
	// must check contents and parent before trusting it.
	m := newManager(t, Config{NumBlocks: 12, BlockSize: 2, EnablePrefixCache: true})
	m.hashFn = func(uint64, []int32) uint64 { return 7 }
	run(t, m, 1, span(1, 5)) // [1 2] registered; [3 4] collides with it
	check(t, m)
	if len(m.index) != 1 {
		t.Fatalf("%d registrations, want 1", len(m.index))
	}
	tests := []struct {
		tokens []int32
		want   int
	}{
		{tokens: span(1, 5), want: 2},
		{tokens: []int32{1, 2, 9, 9, 9}, want: 2},
		{tokens: []int32{1, 2, 1, 2, 9}, want: 2}, // same contents, other parent
		{tokens: []int32{3, 4, 9}, want: 0},
		{tokens: []int32{2, 1, 9}, want: 0},
	}
	for _, tc := range tests {
		if got := m.CachedPrefix(tc.tokens); got != tc.want {
			t.Errorf("CachedPrefix(%v) = %d, want %d", tc.tokens, got, tc.want)
		}
	}
	// A second sequence with the same first block shares it, and its own
	// colliding blocks are left out as well.
	if cached := run(t, m, 2, []int32{1, 2, 1, 2, 1, 2, 5}); cached != 2 {
		t.Fatalf("cached = %d, want 2", cached)
	}
	if len(m.index) != 1 {
		t.Fatalf("%d registrations, want 1", len(m.index))
	}
}

func TestMisusePanics(t *testing.T) {
	tests := []struct {
		name string
		do   func(m *Manager)
	}{
		{name: "admit twice", do: func(m *Manager) { m.Admit(1, nil, 0); m.Admit(1, nil, 0) }},
		{name: "grow unknown", do: func(m *Manager) { m.Grow(1, 4) }},
		{name: "commit unknown", do: func(m *Manager) { m.Commit(1, span(1, 4), 4) }},
		{name: "commit past the tokens", do: func(m *Manager) { m.Admit(1, span(1, 4), 4); m.Commit(1, span(1, 4), 5) }},
		{name: "commit past the table", do: func(m *Manager) { m.Admit(1, span(1, 8), 4); m.Commit(1, span(1, 8), 8) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Config{NumBlocks: 4, BlockSize: 4, EnablePrefixCache: true})
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.do(m)
		})
	}
}

func TestCommitRegistersOnlyReachableBlocks(t *testing.T) {
	t.Run("after a hash collision", func(t *testing.T) {
		m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true})
		// [3 4] hashes like the first block [1 2], whatever its parent.
		m.hashFn = func(parent uint64, toks []int32) uint64 {
			if toks[0] == 3 {
				parent, toks = rootHash, []int32{1, 2}
			}
			return m.contentHash(parent, toks)
		}
		run(t, m, 1, span(1, 7))
		if len(m.index) != 1 || !m.blocks[m.Blocks(1)[0]].registered {
			t.Fatalf("index %v, want only the first block %d", m.index, m.Blocks(1)[0])
		}
	})
	t.Run("after a collision of equal blocks under other parents", func(t *testing.T) {
		m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true})
		m.hashFn = func(_ uint64, toks []int32) uint64 { return m.contentHash(rootHash, toks) }
		a, b := []int32{1, 2, 5, 6, 9}, []int32{3, 4, 5, 6, 9}
		run(t, m, 1, a)
		run(t, m, 2, b) // its [5 6] hashes like a's and must not displace it
		if got := m.CachedPrefix(a); got != 4 {
			t.Fatalf("CachedPrefix(a) = %d, want 4", got)
		}
		if got := m.CachedPrefix(b); got != 2 {
			t.Fatalf("CachedPrefix(b) = %d, want 2", got)
		}
	})
	t.Run("after the shared registration is evicted", func(t *testing.T) {
		m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true})
		// Sequence 2 duplicates sequence 1's first block, so its chain goes
		// through sequence 1's registration.
		m.Admit(1, span(1, 3), 3)
		m.Admit(2, span(1, 3), 3)
		m.Commit(1, span(1, 3), 3)
		m.Commit(2, span(1, 3), 3)
		m.Free(1, true)
		if _, ok := m.Admit(3, span(50, 12), 12); !ok { // evicts everything free
			t.Fatal("Admit: no room")
		}
		check(t, m)
		if len(m.index) != 0 {
			t.Fatalf("index %v, want empty", m.index)
		}
		tokens := span(1, 5)
		m.Commit(2, tokens, 4)
		check(t, m)
		if len(m.index) != 0 {
			t.Fatalf("block without a reachable parent registered: %v", m.index)
		}
	})
}

func TestSharedShareCreditsEachHolderItsShare(t *testing.T) {
	m, err := New(Config{NumBlocks: 32, BlockSize: 4, EnablePrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	prefix := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	a := append(append([]int32{}, prefix...), 9)
	if _, ok := m.Admit(1, a, len(a)); !ok {
		t.Fatal("admit 1")
	}
	m.Commit(1, a, len(a))
	for seq := SeqID(2); seq <= 3; seq++ {
		b := append(append([]int32{}, prefix...), int32(10+seq))
		if cached, ok := m.Admit(seq, b, len(b)); !ok || cached != 8 {
			t.Fatalf("admit %d: cached %d ok %v", seq, cached, ok)
		}
	}
	// Two blocks held by three sequences: each is credited 2 × 4 × 2/3.
	total := 0
	for seq := SeqID(1); seq <= 3; seq++ {
		if got := m.SharedShare(seq); got != 2*(4*2/3) {
			t.Errorf("seq %d: share %d", seq, got)
		}
		total += m.SharedShare(seq)
		if m.SharedTokens(seq) != 8 {
			t.Errorf("seq %d: shared tokens %d", seq, m.SharedTokens(seq))
		}
	}
	// Held 3 × 8 prefix tokens, 8 distinct: sharing saves 16 (integer
	// rounding per block may lose a token or two, never gain).
	if total > 16 || total < 12 {
		t.Errorf("credits sum to %d, want ≈ 16", total)
	}
}
