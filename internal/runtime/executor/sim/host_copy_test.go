package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestCopyBlocksChargesTheHostLink: 100 blocks of 16 Llama-3.1-8B tokens
// (128 KiB of KV a token, 2 MiB a block) over PCIe Gen5 x16 at 80% of 64 GB/s
// take 4.1 ms; Gen4 (A100) twice that; out and in overlap (full duplex).
func TestCopyBlocksChargesTheHostLink(t *testing.T) {
	const perBlock = 16 * 131072.0
	for _, tc := range []struct {
		acc  string
		link float64
	}{
		{"H100-SXM", 64e9}, {"H200", 64e9}, {"A100-80GB", 32e9}, {"L4", 32e9},
	} {
		t.Run(tc.acc, func(t *testing.T) {
			clk := clock.NewVirtual(time.Unix(0, 0))
			x := newTestExec(t, tc.acc, "llama-3.1-8b", Options{Virtual: clk})
			if err := x.ReserveHostBlocks(200, 16); err != nil {
				t.Fatal(err)
			}
			var ts []kvcache.Transfer
			for i := range 100 {
				ts = append(ts, kvcache.Transfer{Kind: kvcache.CopyOut, Device: kvcache.BlockID(i), Host: kvcache.HostSlot(i)})
			}
			for i := range 60 {
				ts = append(ts, kvcache.Transfer{Kind: kvcache.CopyIn, Device: kvcache.BlockID(i), Host: kvcache.HostSlot(100 + i)})
			}
			start := clk.Now()
			if err := x.CopyBlocks(context.Background(), ts); err != nil {
				t.Fatal(err)
			}
			want := time.Duration(100*perBlock/(tc.link*0.8)*1e9) + transferLatency
			if got := clk.Now().Sub(start); got < want-time.Microsecond || got > want+time.Microsecond {
				t.Fatalf("100 blocks out and 60 in took %v, want %v", got, want)
			}
		})
	}
}

func TestCopyBlocksChecksTheReservation(t *testing.T) {
	x := newTestExec(t, "H100-SXM", "llama-3.1-8b", Options{Virtual: clock.NewVirtual(time.Unix(0, 0))})
	if err := x.ReserveHostBlocks(4, 16); err != nil {
		t.Fatal(err)
	}
	err := x.CopyBlocks(context.Background(), []kvcache.Transfer{{Kind: kvcache.CopyOut, Device: 1, Host: 4}})
	if err == nil || !strings.Contains(err.Error(), "outside the 4 reserved host blocks") {
		t.Fatalf("CopyBlocks to slot 4 of 4 = %v", err)
	}
}

// TestSharedHostLinkSplitsItsBandwidth: two H100s behind one PCIe switch
// (a shared 64 GB/s uplink) copying 100 blocks out at the same moment: the
// first copy takes what it takes alone, the second waits for the uplink
// and ends at twice that; copies in the other direction do not wait
// (full duplex), and a device on another switch is not slowed.
func TestSharedHostLinkSplitsItsBandwidth(t *testing.T) {
	const perBlock = 16 * 131072.0
	alone := time.Duration(100*perBlock/(64e9*0.8)*1e9) + transferLatency
	uplink := &HostLink{Bandwidth: 64e9}
	other := &HostLink{Bandwidth: 64e9}
	newDev := func(links ...*HostLink) (*Executor, *clock.Virtual) {
		clk := clock.NewVirtual(time.Unix(0, 0))
		x := newTestExec(t, "H100-SXM", "llama-3.1-8b", Options{Virtual: clk, HostLinks: links})
		if err := x.ReserveHostBlocks(200, 16); err != nil {
			t.Fatal(err)
		}
		return x, clk
	}
	blocks := func(kind kvcache.TransferKind) []kvcache.Transfer {
		var ts []kvcache.Transfer
		for i := range 100 {
			ts = append(ts, kvcache.Transfer{Kind: kind, Device: kvcache.BlockID(i), Host: kvcache.HostSlot(i)})
		}
		return ts
	}
	took := func(x *Executor, clk *clock.Virtual, kind kvcache.TransferKind) time.Duration {
		start := clk.Now()
		if err := x.CopyBlocks(context.Background(), blocks(kind)); err != nil {
			t.Fatal(err)
		}
		return clk.Now().Sub(start)
	}
	near := func(got, want time.Duration) bool {
		return got > want-10*time.Microsecond && got < want+10*time.Microsecond
	}
	a, ca := newDev(uplink)
	b, cb := newDev(uplink)
	c, cc := newDev(uplink)
	d, cd := newDev(other)
	if got := took(a, ca, kvcache.CopyOut); !near(got, alone) {
		t.Errorf("first copy over the uplink took %v, want %v (alone)", got, alone)
	}
	if got := took(b, cb, kvcache.CopyOut); !near(got, 2*(alone-transferLatency)) {
		t.Errorf("second copy out at the same time took %v, want about %v", got, 2*alone)
	}
	if got := took(c, cc, kvcache.CopyIn); !near(got, alone) {
		t.Errorf("a copy in beside them took %v, want %v (the other direction is free)", got, alone)
	}
	if got := took(d, cd, kvcache.CopyOut); !near(got, alone) {
		t.Errorf("a device behind another switch took %v, want %v", got, alone)
	}
}
