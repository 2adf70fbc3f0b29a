package engine

import (
	"slices"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestSplitKeepsTheManagersOrder: the transfers that run before the batch
// run in the order the block manager issued them, also when a transfer
// that could have waited is flushed into this iteration behind a serial
// one it conflicts with. Here a restore reads host slot 25 before a load's
// copy-out overwrites it, and a later serial copy naming the copy-out's
// block flushes that copy-out; run flushed-first, slot 25 was overwritten
// before it was restored (a probe's outputs under load, with the host
// tier, differed from the same requests alone).
func TestSplitKeepsTheManagersOrder(t *testing.T) {
	o := newOverlap(nil, 64, 32)
	o.begin(0)
	xf := []kvcache.Transfer{
		{Kind: kvcache.CopyIn, Device: 56, Host: 25},  // serial: no load may wait for it
		{Kind: kvcache.CopyOut, Device: 34, Host: 25}, // a load's copy that may wait
		{Kind: kvcache.CopyIn, Device: 34, Host: 30},  // serial, names block 34: flushes the one before
	}
	o.load(&sequence{}, 1, 2)
	got := o.split(slices.Clone(xf), false)
	if !slices.Equal(got, xf) {
		t.Fatalf("run before the batch: %v, want the manager's order %v", got, xf)
	}
	if o.flushed != 1 {
		t.Errorf("%d backlog transfers flushed, want the copy-out", o.flushed)
	}
}
