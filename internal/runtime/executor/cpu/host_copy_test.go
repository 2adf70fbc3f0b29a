package cpu

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestPrefixRestoredFromHostChangesNothing computes a prefix, copies its
// blocks out to the host, overwrites the device blocks, copies the prefix
// back into other device blocks, and lets a second sequence continue from it:
// it must generate exactly what it generates alone from scratch.
func TestPrefixRestoredFromHostChangesNothing(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const gen, prefixBlocks = 8, 3
	common := randomTokens(rng, prefixBlocks*testBlockSize, 300)
	p2 := append(slices.Clone(common), randomTokens(rng, 5, 300)...)
	want := runAlone(t, m, p2, gen)

	e := newExec(t, m, 64)
	if err := e.ReserveHostBlocks(8, testBlockSize); err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, e: e, rng: rng, free: shuffledBlocks(rng, 64), maxGen: gen}
	s1 := d.add(append(slices.Clone(common), 1), nil, 0)
	for s1.pos < len(common) {
		d.step()
	}
	d.seqs = d.seqs[:0] // s1 is done: its blocks are reused below
	var xfers []kvcache.Transfer
	for i, b := range s1.blocks[:prefixBlocks] {
		xfers = append(xfers, kvcache.Transfer{Kind: kvcache.CopyOut, Device: b, Host: kvcache.HostSlot(5 - i)})
	}
	restored := d.free[:prefixBlocks]
	d.free = d.free[prefixBlocks:]
	for i, b := range restored {
		xfers = append(xfers, kvcache.Transfer{Kind: kvcache.CopyIn, Device: b, Host: kvcache.HostSlot(5 - i)})
	}
	// Copy out, let other work overwrite the device blocks, copy in.
	if err := e.CopyBlocks(context.Background(), xfers[:prefixBlocks]); err != nil {
		t.Fatal(err)
	}
	for l := range e.cfg.Layers {
		for _, b := range s1.blocks {
			n := testBlockSize * e.kvDim
			for j := int(b) * n; j < int(b+1)*n; j++ {
				e.kCache[l][j], e.vCache[l][j] = 7, -7
			}
		}
	}
	if err := e.CopyBlocks(context.Background(), xfers[prefixBlocks:]); err != nil {
		t.Fatal(err)
	}
	s2 := d.add(p2, restored, len(common))
	d.run()
	if diff := cmp.Diff(want, s2.known[len(p2):]); diff != "" {
		t.Errorf("sequence continuing from a restored prefix (-alone +restored):\n%s", diff)
	}
}

func TestCopyBlocksRejectsOutOfRange(t *testing.T) {
	exectest.CheckCopyBlocksRejectsOutOfRange(t, newExec(t, testModel(t), 8), testBlockSize)
}
