package simulator

import (
	"context"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// pendingFetch is a KV transfer between pods under way: done (the program
// table's) runs when it has landed, at.
type pendingFetch struct {
	at   time.Duration
	done func()
}

// fetchKV is the pod's FetchKV, in process: what control.KVTransfer.Fetch
// does over the control port. The source pod's engine exports the
// program's cached chain (and a hybrid model's checkpoint) and pd's
// imports it, chunk by chunk as the stream would carry it, at once; the program's requests stay held until
// the transfer's time on the two nodes' links (the sim executor's
// KVTransferTime) has passed. A source that left the pool, or holds
// nothing of the program, ends the fetch at once: the program recomputes.
func (a *agentSim) fetchKV(pd *agentPod, id, addr string, done func()) {
	i, ok := a.byAddr[addr]
	if !ok || a.pods[i].gone {
		done()
		return
	}
	src := a.pods[i]
	cacheSalt, tokens, ok := src.table.KVContext(id)
	if !ok {
		done()
		return
	}
	format, _ := src.eng.BlockFormat()
	salt := kvcache.SaltOf(cacheSalt)
	// What the source's control API serves: its cached chain, a hybrid
	// model's as far as its deepest checkpoint.
	tokens = tokens[:src.eng.CachedChainBlocks(salt, tokens)*src.eng.BlockSize()]
	ctx := context.Background()
	moved := 0
	for {
		n, data, err := src.eng.ExportBlocks(ctx, salt, tokens, moved, 256, nil)
		if err != nil || n == 0 {
			break
		}
		got, err := pd.eng.ImportBlocks(ctx, format, salt, tokens, moved, n, data)
		moved += got
		if err != nil || got < n {
			break
		}
	}
	// A hybrid model's program moves with its recurrent-state checkpoint,
	// charged as the KV tokens it costs (wire.KVReport.StateTokens).
	sent := moved * pd.eng.BlockSize()
	if format.StateBytes > 0 && moved > 0 {
		k, data, err := src.eng.ExportState(ctx, salt, tokens, moved, nil)
		if err == nil && k > 0 && pd.eng.ImportState(ctx, format, salt, tokens, k, data) == nil {
			sent += int(pd.stateTokens)
		}
	}
	pd.clk.Set(a.Now()) // the transfer starts now, on the pool's clock
	d := pd.x.KVTransferTime(sent, src.nic, pd.nic)
	if a.measuring() {
		a.res.KVFetches++
		a.res.KVMovedBlocks += int64(moved)
		a.res.KVMoveTime += d
	}
	a.fetches = append(a.fetches, pendingFetch{at: a.now + d, done: done})
}

// fetchesLanded ends the transfers due by now and asks the gates again
// for the requests they held.
func (a *agentSim) fetchesLanded() error {
	j := 0
	for _, f := range a.fetches {
		if f.at <= a.now {
			f.done()
			continue
		}
		a.fetches[j] = f
		j++
	}
	clear(a.fetches[j:])
	a.fetches = a.fetches[:j]
	return a.wakeHeld()
}
