package kvcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A chain exported from one Manager (its token ids) and imported into
// another is a prefix hit there, under the same salt only.
func TestImportMakesTheChainAPrefixHit(t *testing.T) {
	src := newManager(t, Config{NumBlocks: 16, BlockSize: 4, EnablePrefixCache: true})
	salt := SaltOf("tenant")
	ctx := span(100, 14) // 3 full blocks
	if _, ok := src.AdmitSalted(1, salt, ctx, len(ctx)); !ok {
		t.Fatal("admit")
	}
	src.Commit(1, ctx, len(ctx))
	src.Free(1, false)
	places := src.ChainPlaces(nil, salt, ctx, 0, 8)
	if len(places) != 3 {
		t.Fatalf("source chain: %v", places)
	}
	if got := src.ChainPlaces(nil, 0, ctx, 0, 8); len(got) != 0 {
		t.Fatalf("unsalted chain: %v, want none", got)
	}

	dst := newManager(t, Config{NumBlocks: 8, BlockSize: 4, EnablePrefixCache: true})
	if _, err := dst.Import(nil, salt, ctx, 1, 1); err == nil {
		t.Fatal("import of block 1 before block 0: no error")
	}
	got, err := dst.Import(nil, salt, ctx, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err = dst.Import(got, salt, ctx, 1, 2) // block 1 again: kept, not returned
	if err != nil {
		t.Fatal(err)
	}
	check(t, dst)
	var idx []int
	for _, b := range got {
		idx = append(idx, b.Index)
	}
	if diff := cmp.Diff([]int{0, 1, 2}, idx); diff != "" {
		t.Fatalf("imported blocks (-want +got):\n%s", diff)
	}
	if st := dst.Stats(); st.Imported != 3 || st.Cached != 3 {
		t.Fatalf("stats after import: %+v", st)
	}
	if c := dst.CachedPrefix(ctx); c != 0 {
		t.Fatalf("unsalted lookup hits %d tokens of a salted import", c)
	}
	next := append(append([]int32(nil), ctx...), 7, 8)
	cached, ok := dst.AdmitSalted(2, salt, next, 4)
	if !ok || cached != 12 {
		t.Fatalf("admit after import: cached %d ok %v, want 12", cached, ok)
	}
	check(t, dst)
}

// With every device block in use the import goes to the host tier, and
// without one it stops; either way nothing the running sequences hold is
// touched.
func TestImportIntoAFullDevice(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hostBlocks int
		want       int
		onHost     bool
	}{
		{"host tier", 4, 3, true},
		{"no host tier", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Config{NumBlocks: 4, BlockSize: 4, EnablePrefixCache: true, HostBlocks: tc.hostBlocks})
			if _, ok := m.Admit(1, span(0, 16), 16); !ok {
				t.Fatal("admit")
			}
			got, err := m.Import(nil, 0, span(500, 12), 0, 3)
			if err != nil {
				t.Fatal(err)
			}
			check(t, m)
			if len(got) != tc.want {
				t.Fatalf("imported %d blocks, want %d", len(got), tc.want)
			}
			for _, b := range got {
				if b.Place.OnHost != tc.onHost {
					t.Fatalf("block %d at %+v", b.Index, b.Place)
				}
			}
			m.Free(1, false)
			if c := m.CachedPrefix(append(span(500, 12), 1)); c != 4*tc.want {
				t.Fatalf("cached prefix %d after import, want %d", c, 4*tc.want)
			}
		})
	}
}

// An import never evicts the chain it extends, however small the free
// list, and DropImported forgets what could not be written.
func TestImportKeepsItsOwnChainAndDrops(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 3, BlockSize: 2, EnablePrefixCache: true})
	toks := span(1, 12)
	got, err := m.Import(nil, 0, toks, 0, 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("first chunk: %v %v", got, err)
	}
	got2, err := m.Import(nil, 0, toks, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	check(t, m)
	if len(got2) != 1 {
		t.Fatalf("second chunk imported %d blocks into 1 free block", len(got2))
	}
	if c := m.CachedPrefix(toks); c != 6 {
		t.Fatalf("cached prefix %d, want 6: the import evicted its own chain", c)
	}
	m.DropImported(got2)
	check(t, m)
	if c := m.CachedPrefix(toks); c != 4 {
		t.Fatalf("cached prefix %d after dropping block 2, want 4", c)
	}
}

// An import never evicts what the host tier holds (paused programs'
// offloaded KV): it takes free device blocks, evicting cached contents
// there, which spill only into empty host slots, and empty host slots;
// with neither left it stops, and the program recomputes the rest.
func TestImportNeverEvictsTheHostTier(t *testing.T) {
	paused := span(0, 8) // two blocks, offloaded to the two host slots
	for _, tc := range []struct {
		name string
		// cachedDevice fills the device with another chain's cached
		// blocks (free, evictable); else a running sequence holds them.
		cachedDevice bool
		want         int
	}{
		{"device in use", false, 0},
		{"device cached", true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Config{NumBlocks: 4, BlockSize: 4, EnablePrefixCache: true, HostBlocks: 2})
			run(t, m, 1, paused)
			m.Free(1, false)
			if n := m.Offload(paused); n != 2 {
				t.Fatalf("offloaded %d blocks, want 2", n)
			}
			m.ClearTransfers()
			other := span(100, 16)
			run(t, m, 2, other)
			if tc.cachedDevice {
				m.Free(2, false)
			}
			got, err := m.Import(nil, 0, span(500, 12), 0, 3)
			if err != nil {
				t.Fatal(err)
			}
			check(t, m)
			if len(got) != tc.want {
				t.Fatalf("imported %d blocks, want %d", len(got), tc.want)
			}
			for _, b := range got {
				if b.Place.OnHost {
					t.Errorf("block %d imported into a full host tier", b.Index)
				}
			}
			if c := m.CachedPrefix(append(paused, 1)); c != len(paused) {
				t.Fatalf("the paused program's offloaded KV: %d tokens cached, want %d", c, len(paused))
			}
			if st := m.Stats(); st.HostUsed != 2 {
				t.Fatalf("host tier after the import: %+v", st)
			}
		})
	}
}
