package kvcache

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOffloadAndHitFromHost pauses a program (Offload of its finished
// context), lets other work take the device blocks, and resumes it: its next
// request finds the whole prefix, restored from the host tier through the
// copy-ins the Manager issues, with the same registrations as before.
func TestOffloadAndHitFromHost(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 6, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 8})
	ctx := span(1, 6) // three full blocks
	run(t, m, 1, ctx)
	table := append([]BlockID(nil), m.Blocks(1)...)
	var uids []uint64
	for _, id := range table {
		uids = append(uids, m.blocks[id].uid)
	}
	m.Free(1, false)

	if n := m.Offload(ctx); n != 3 {
		t.Fatalf("Offload moved %d blocks, want 3", n)
	}
	check(t, m)
	// The chain goes out in order from its first block.
	want := []Transfer{{CopyOut, table[0], 0}, {CopyOut, table[1], 1}, {CopyOut, table[2], 2}}
	if diff := cmp.Diff(want, m.Transfers()); diff != "" {
		t.Fatalf("transfers (-want +got):\n%s", diff)
	}
	m.ClearTransfers()
	st := m.Stats()
	if st.Cached != 0 || st.HostUsed != 3 || st.Offloaded != 3 {
		t.Fatalf("after Offload: %+v, want 0 cached device blocks, 3 host blocks", st)
	}
	if got := m.CachedPrefix(append(ctx, 99)); got != 6 {
		t.Fatalf("CachedPrefix = %d, want 6 (served from the host tier)", got)
	}

	// Other work takes every device block.
	run(t, m, 2, span(100, 12))
	m.Free(2, false)
	if got := m.CachedPrefix(append(ctx, 99)); got != 6 {
		t.Fatalf("CachedPrefix after other work = %d, want 6", got)
	}

	cached := run(t, m, 3, append(ctx, 99))
	if cached != 6 {
		t.Fatalf("resumed request cached %d tokens, want 6", cached)
	}
	// The blocks the restores evict (the other work's, cached) spill to the
	// host in between: keep the copy-ins.
	var got []Transfer
	spills := 0
	for _, x := range m.Transfers() {
		if x.Kind == CopyIn {
			got = append(got, x)
		} else {
			spills++
		}
	}
	if len(got) != 3 {
		t.Fatalf("transfers %v, want 3 copy-ins", m.Transfers())
	}
	if st := m.Stats(); int64(spills) != st.Spilled {
		t.Fatalf("%d copy-outs with the copy-ins, but %d blocks spilled", spills, st.Spilled)
	}
	for i, x := range got {
		if x.Kind != CopyIn || x.Device != m.Blocks(3)[i] || x.Host != HostSlot(i) {
			t.Errorf("transfer %d = %+v, want copy-in of host slot %d into block %d", i, x, i, m.Blocks(3)[i])
		}
		if b := m.blocks[m.Blocks(3)[i]]; !b.registered || b.uid != uids[i] {
			t.Errorf("restored block %d: registered %v uid %d, want the original registration %d", i, b.registered, b.uid, uids[i])
		}
	}
	st = m.Stats()
	if st.HostUsed != int(st.Spilled) || st.Restored != 3 || st.HostHits != 6 || st.Hits != 6 {
		t.Fatalf("after the resumed request: %+v", st)
	}
}

// TestOffloadKeepsSharedBlocksOnDevice: a block another sequence holds stays
// on the device, and the chain still resolves across the two tiers.
func TestOffloadKeepsSharedBlocksOnDevice(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 12, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 8})
	system := span(1, 2)
	run(t, m, 1, concat(system, span(10, 4)))
	run(t, m, 2, concat(system, span(20, 1))) // holds the system block
	shared := m.Blocks(1)[0]
	m.Free(1, false)
	if n := m.Offload(concat(system, span(10, 4))); n != 2 {
		t.Fatalf("Offload moved %d blocks, want 2 (the shared one stays)", n)
	}
	check(t, m)
	if b := m.blocks[shared]; b.ref != 1 || !b.registered {
		t.Fatalf("shared block: refcount %d registered %v, want 1 and registered", b.ref, b.registered)
	}
	hit := m.matchPrefix(rootHash, concat(system, span(10, 4)), 3)
	if len(hit) != 3 || hit[0] != loc(shared) || !hit[1].onHost() || !hit[2].onHost() {
		t.Fatalf("chain %v, want the device block then two host slots", hit)
	}
}

// TestOffloadNeverEvictsItsOwnChain: a host tier smaller than the chain keeps
// the chain's leading blocks (a prefix is useful only from its start) and
// leaves the rest on the device, deprioritized.
func TestOffloadNeverEvictsItsOwnChain(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 12, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 2})
	ctx := span(1, 8)
	run(t, m, 1, ctx)
	table := append([]BlockID(nil), m.Blocks(1)...)
	m.Free(1, false)
	if n := m.Offload(ctx); n != 2 {
		t.Fatalf("Offload moved %d blocks, want 2", n)
	}
	check(t, m)
	hit := m.matchPrefix(rootHash, ctx, 4)
	if len(hit) != 4 || !hit[0].onHost() || !hit[1].onHost() || hit[2] != loc(table[2]) || hit[3] != loc(table[3]) {
		t.Fatalf("chain %v, want two host slots then blocks %v", hit, table[2:])
	}
	if head := m.freeOrder()[:2]; !cmp.Equal(head, []BlockID{table[3], table[2]}) && !cmp.Equal(head, []BlockID{table[2], table[3]}) {
		t.Fatalf("free list head %v, want the chain's device blocks %v first", head, table[2:])
	}
	// Offloading again is idempotent: nothing more fits, nothing is lost.
	m.ClearTransfers()
	if n := m.Offload(ctx); n != 0 || len(m.Transfers()) != 0 {
		t.Fatalf("second Offload moved %d blocks, %d transfers", n, len(m.Transfers()))
	}
	if got := m.CachedPrefix(append(ctx, 0)); got != 8 {
		t.Fatalf("CachedPrefix = %d, want 8", got)
	}
}

// TestRestoreBringsChainBack: Restore moves the host blocks to free device
// blocks ahead of the request, so the request itself needs no copy.
func TestRestoreBringsChainBack(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 8})
	ctx := span(1, 6)
	run(t, m, 1, ctx)
	m.Free(1, false)
	m.Offload(ctx)
	m.ClearTransfers()
	if n := m.Restore(ctx); n != 3 {
		t.Fatalf("Restore moved %d blocks, want 3", n)
	}
	check(t, m)
	if st := m.Stats(); st.Cached != 3 || st.HostUsed != 0 || st.Used != 0 {
		t.Fatalf("after Restore: %+v, want 3 cached free device blocks", st)
	}
	m.ClearTransfers()
	if cached := run(t, m, 2, append(ctx, 7)); cached != 6 || len(m.Transfers()) != 0 {
		t.Fatalf("request after Restore: %d cached, transfers %v; want 6 and none", cached, m.Transfers())
	}
	if n := m.Restore(ctx); n != 0 {
		t.Fatalf("second Restore moved %d blocks", n)
	}
}

// TestAdmitFromHostFailsAtomically: a host hit needs a device block; without
// room Admit changes nothing.
func TestAdmitFromHostFailsAtomically(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 4, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 8})
	ctx := span(1, 6)
	run(t, m, 1, ctx)
	m.Free(1, false)
	m.Offload(ctx)
	m.ClearTransfers()
	run(t, m, 2, span(50, 4)) // two of the four blocks
	before := takeSnapshot(m)
	if _, ok := m.Admit(3, append(ctx, 7), 1); ok {
		t.Fatal("Admit succeeded with 2 free blocks for 3 restored + 1 new")
	}
	if diff := cmp.Diff(before, takeSnapshot(m), cmp.AllowUnexported(snapshot{}, block{}, registration{}, hostSlot{})); diff != "" {
		t.Fatalf("failed Admit changed state (-before +after):\n%s", diff)
	}
	if len(m.Transfers()) != 0 {
		t.Fatalf("failed Admit queued transfers %v", m.Transfers())
	}
}

// TestFailTransfersDropsRegistrations: contents whose copy failed are never
// served.
func TestFailTransfersDropsRegistrations(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 8})
	ctx := span(1, 6)
	run(t, m, 1, ctx)
	m.Free(1, false)
	m.Offload(ctx)
	failed := append([]Transfer(nil), m.Transfers()...)
	m.ClearTransfers()
	m.FailTransfers(failed[1:]) // the first copy-out worked
	check(t, m)
	if got := m.CachedPrefix(append(ctx, 0)); got != 2 {
		t.Fatalf("CachedPrefix = %d, want 2 (only the block whose copy worked)", got)
	}
	run(t, m, 2, append(ctx, 0))
	failed = append(failed[:0], m.Transfers()...)
	m.ClearTransfers()
	m.FailTransfers(failed)
	check(t, m)
	m.Free(2, false)
	if got := m.CachedPrefix(append(ctx, 0)); got != 0 {
		t.Fatalf("CachedPrefix = %d after a failed copy-in, want 0", got)
	}
}

func TestHostTierInvariantsDetectCorruption(t *testing.T) {
	setup := func(t *testing.T) *Manager {
		m := newManager(t, Config{NumBlocks: 8, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 4})
		run(t, m, 1, span(1, 6))
		m.Free(1, false)
		m.Offload(span(1, 6))
		check(t, m)
		return m
	}
	tests := []struct {
		name    string
		corrupt func(m *Manager)
		want    string
	}{
		{
			name: "registration in both tiers",
			corrupt: func(m *Manager) {
				id := m.head()
				b := &m.blocks[id]
				m.unlink(id)
				b.registered, b.registration = true, m.host.slots[0].registration
				m.pushTail(id)
			},
			want: "which the index maps elsewhere",
		},
		{
			name:    "used count off",
			corrupt: func(m *Manager) { m.host.used-- },
			want:    "slots used, count says",
		},
		{
			name:    "index names an empty slot",
			corrupt: func(m *Manager) { m.host.slots[1].used = false; m.host.used-- },
			want:    "which is empty",
		},
		{
			name:    "slot lost from the list",
			corrupt: func(m *Manager) { m.host.unlink(3) },
			want:    "3 of 4 slots listed",
		},
		{
			name:    "empty slot behind a used one",
			corrupt: func(m *Manager) { m.host.toTail(3) },
			want:    "behind a used one",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := setup(t)
			tc.corrupt(m)
			err := m.CheckInvariants()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckInvariants = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestEvictionSpillsToHost: a program in a tool call (its request finished,
// its blocks free and cached, nobody offloaded them) loses its device blocks
// to other work; with a host tier they are copied out as they are evicted,
// and its next request finds its whole context there. With DropEvicted they
// are gone, as before write-back.
func TestEvictionSpillsToHost(t *testing.T) {
	for _, drop := range []bool{false, true} {
		m := newManager(t, Config{NumBlocks: 6, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 8, DropEvicted: drop})
		ctx := span(1, 6) // three full blocks
		run(t, m, 1, ctx)
		table := append([]BlockID(nil), m.Blocks(1)...)
		m.Free(1, false) // the program goes to a tool call
		m.ClearTransfers()

		run(t, m, 2, span(100, 12)) // takes every device block
		check(t, m)
		var outs []Transfer
		for _, x := range m.Transfers() {
			if x.Kind == CopyOut {
				outs = append(outs, x)
			}
		}
		st := m.Stats()
		if drop {
			if len(outs) != 0 || st.Spilled != 0 || st.HostUsed != 0 {
				t.Fatalf("DropEvicted: copy-outs %v, stats %+v; want none", outs, st)
			}
			if got := m.CachedPrefix(append(ctx, 99)); got != 0 {
				t.Fatalf("DropEvicted: CachedPrefix = %d, want 0 (evicted)", got)
			}
			continue
		}
		if len(outs) != 3 || st.Spilled != 3 || st.Offloaded != 3 || st.HostUsed != 3 {
			t.Fatalf("copy-outs %v, stats %+v; want the program's 3 blocks spilled", outs, st)
		}
		for _, x := range outs {
			if !slices.Contains(table, x.Device) {
				t.Errorf("copy-out of block %d, not one of the program's %v", x.Device, table)
			}
		}
		m.ClearTransfers()
		m.Free(2, false)

		cached := run(t, m, 3, append(ctx, 99)) // the tool call returns
		if cached != 6 {
			t.Fatalf("next request cached %d tokens, want 6 (restored from host)", cached)
		}
		ins := 0
		for _, x := range m.Transfers() {
			if x.Kind == CopyIn {
				ins++
			}
		}
		if st := m.Stats(); ins != 3 || st.Restored != 3 || st.HostHits != 6 {
			t.Fatalf("%d copy-ins, stats %+v; want 3 blocks restored", ins, st)
		}
	}
}

// TestSpillNeverEvictsTheChainBeingRestored: when the host tier holds only
// the chain an Admit restores, the blocks its allocations evict are dropped
// instead of taking the chain's slots, so the request still gets its whole
// prefix with the right contents.
func TestSpillNeverEvictsTheChainBeingRestored(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 6, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 3})
	ctx := span(1, 6)
	run(t, m, 1, ctx)
	m.Free(1, false)
	m.Offload(ctx) // fills the host tier
	m.ClearTransfers()
	run(t, m, 2, span(100, 12))
	m.Free(2, false) // every device block cached: each allocation evicts
	m.ClearTransfers()
	st := m.Stats()
	if st.HostUsed != 3 || st.Cached != 6 {
		t.Fatalf("setup: %+v, want a full host tier and 6 cached device blocks", st)
	}
	cached := run(t, m, 3, append(ctx, 7))
	if cached != 6 {
		t.Fatalf("cached %d tokens, want 6", cached)
	}
	// Every copy-in reads a slot that no earlier copy-out in the batch wrote.
	written := map[HostSlot]bool{}
	for _, x := range m.Transfers() {
		switch x.Kind {
		case CopyOut:
			written[x.Host] = true
		case CopyIn:
			if written[x.Host] {
				t.Fatalf("transfers %v: host slot %d overwritten before its copy-in", m.Transfers(), x.Host)
			}
		}
	}
}

// TestSpillSkipsUnreachableBlocks: an evicted block whose parent
// registration is gone could never be found again, so it is not copied out.
func TestSpillSkipsUnreachableBlocks(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 4, BlockSize: 2, EnablePrefixCache: true, HostBlocks: 4})
	ctx := span(1, 4)
	run(t, m, 1, ctx)
	table := append([]BlockID(nil), m.Blocks(1)...)
	m.Free(1, false)
	m.Offload(ctx[:2]) // the first block goes to the host
	// Its copy fails: the first block's registration is gone, the second
	// (still cached on the device) is unreachable.
	m.FailTransfers(m.Transfers())
	m.ClearTransfers()
	if got := m.CachedPrefix(append(ctx, 0)); got != 0 {
		t.Fatalf("CachedPrefix = %d, want 0", got)
	}
	run(t, m, 2, span(50, 8)) // takes every block
	for _, x := range m.Transfers() {
		if x.Device == table[1] {
			t.Fatalf("transfers %v: unreachable block %d copied out", m.Transfers(), table[1])
		}
	}
	if st := m.Stats(); st.HostUsed != 0 {
		t.Fatalf("%+v: an unreachable block took a host slot", st)
	}
	check(t, m)
}
