package engine

import (
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// TestCheckpointTake: a state moved here from another pod takes a free
// device checkpoint, else the least recently used one no sequence owns
// (spilling its state to the host tier when there is one, else dropping
// it), else a host checkpoint; none when every checkpoint is owned; and
// nothing when its key is checkpointed already.
func TestCheckpointTake(t *testing.T) {
	key := func(n int) ckptKey { return ckptKey{h1: uint64(n), h2: uint64(n), n: n} }
	// full is 2 device checkpoints (slots 4, 5) holding keys 1 (older)
	// and 2, with host host checkpoints from slot 10; owned marks the
	// device ones owned by running sequences.
	full := func(host int, owned bool) *checkpoints {
		c := newCheckpoints(4, 2, 10, host)
		c.install(0, key(1))
		c.install(1, key(2))
		if owned {
			c.ck[0].owner, c.ck[1].owner = &sequence{}, &sequence{}
		}
		return c
	}
	for _, tc := range []struct {
		name      string
		c         *checkpoints
		key       ckptKey
		wantSlot  int // -1: already there
		wantSpill *batch.StateCopy
		ok        bool
		// gone is a key no longer checkpointed after the take, kept one
		// still checkpointed (0: none).
		gone, kept int
	}{
		{name: "free device checkpoint", c: newCheckpoints(4, 2, 10, 0), key: key(3), wantSlot: 4, ok: true},
		{name: "already here", c: full(0, false), key: key(2), wantSlot: -1, ok: true, kept: 2},
		{name: "least recently used spills to the host", c: full(1, false), key: key(3), wantSlot: 4,
			wantSpill: &batch.StateCopy{From: 4, To: 10, Pos: 1}, ok: true, kept: 1},
		{name: "least recently used dropped without a host tier", c: full(0, false), key: key(3), wantSlot: 4, ok: true, gone: 1, kept: 2},
		{name: "owned device ones: a host checkpoint", c: full(1, true), key: key(3), wantSlot: 10, ok: true, kept: 2},
		{name: "every one owned", c: full(0, true), key: key(3), ok: false, kept: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx, spill, spilled, ok := tc.c.take(tc.key)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			slot := -1
			if idx >= 0 {
				slot = tc.c.slot(idx)
			}
			if slot != tc.wantSlot {
				t.Fatalf("took slot %d, want %d", slot, tc.wantSlot)
			}
			if spilled != (tc.wantSpill != nil) || spilled && spill != *tc.wantSpill {
				t.Errorf("spill %v %+v, want %+v", spilled, spill, tc.wantSpill)
			}
			if idx >= 0 {
				tc.c.install(idx, tc.key)
				if _, there := tc.c.byKey[tc.key]; !there {
					t.Error("the installed key is not checkpointed")
				}
			}
			if _, there := tc.c.byKey[key(tc.gone)]; tc.gone != 0 && there {
				t.Errorf("key %d still checkpointed", tc.gone)
			}
			if _, there := tc.c.byKey[key(tc.kept)]; tc.kept != 0 && !there {
				t.Errorf("key %d no longer checkpointed", tc.kept)
			}
		})
	}
}
