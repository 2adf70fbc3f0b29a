package kvcache

// Stats is a snapshot of the block pool and the prefix cache hit counters.
type Stats struct {
	// Total is the number of blocks; Used+Free == Total.
	Total, Used int
	// Cached is the number of free blocks that still hold registered contents.
	Cached int
	// Free is the number of free blocks, Cached included.
	Free int
	// Queries is the number of prompt tokens admitted that could have come
	// from the cache (full blocks, not the last token); Hits is how many did,
	// HostHits how many of those came from the host tier.
	Queries, Hits, HostHits int64
	// HostTotal is the number of host-tier blocks, HostUsed how many hold
	// offloaded contents.
	HostTotal, HostUsed int
	// Offloaded and Restored count blocks moved to and from the host tier;
	// Spilled is how many of the offloaded blocks were device evictions
	// (the rest were Offload calls).
	Offloaded, Restored, Spilled int64
	// Evicted counts cached contents a device allocation took the block
	// from (spilled to the host tier or dropped): zero means every prefix
	// ever registered stayed on the device until reused or released.
	Evicted int64
	// Imported counts blocks another pod's KV was written into (Import).
	Imported int64
}

// Stats returns the current statistics.
func (m *Manager) Stats() Stats {
	return Stats{
		Total:   m.numBlocks,
		Used:    m.numBlocks - m.numFree,
		Cached:  m.cachedFree,
		Free:    m.numFree,
		Queries: m.queries,
		Hits:    m.hits,

		HostHits:  m.hostHits,
		HostTotal: m.host.n,
		HostUsed:  m.host.used,
		Offloaded: m.offloaded,
		Restored:  m.restored,
		Spilled:   m.spilled,
		Evicted:   m.evicted,
		Imported:  m.imported,
	}
}

// HitRate is Hits/Queries, 0 when there were no queries.
func (s Stats) HitRate() float64 {
	if s.Queries == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Queries)
}

// Usage is the fraction of blocks in use.
func (s Stats) Usage() float64 {
	if s.Total == 0 {
		return 0
	}
	return float64(s.Used) / float64(s.Total)
}
