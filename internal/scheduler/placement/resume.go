package placement

import (
	"slices"
	"time"
)

// forceResume places every program that has waited longer than
// MaxPauseDuration on the pod with the most remaining capacity, fit or not,
// longest-waiting first (step 2).
func (s *Scheduler) forceResume(now time.Time) {
	s.cands = s.cands[:0]
	for i := range s.progs {
		ps := &s.progs[i]
		if ps.pod < 0 && !ps.waitSince.IsZero() && now.Sub(ps.waitSince) > s.policy.MaxPauseDuration {
			// The wait's start stands in for tokens: oldest first, then id.
			s.cands = append(s.cands, candidate{id: ps.id, tokens: ps.waitSince.UnixNano(), idx: int32(i)})
		}
	}
	if len(s.cands) == 0 {
		return
	}
	slices.SortFunc(s.cands, byClassSmallestFirst)
	for _, c := range s.cands {
		at := s.mostRemaining(-1, 0)
		if at < 0 {
			return
		}
		s.place(c.idx, at)
		s.dec.ForceResumed = append(s.dec.ForceResumed, c.id)
	}
}

// resume places waiting programs by class, then smallest first (the most
// programs in the room there is), each where it fits best, with one
// reservation against starvation (step 3; see the package comment).
func (s *Scheduler) resume(now time.Time) {
	s.cands = s.cands[:0]
	for i := range s.progs {
		if ps := &s.progs[i]; ps.pod < 0 {
			s.cands = append(s.cands, candidate{id: ps.id, tokens: ps.footprint, idx: int32(i), class: s.resumeRank(ps, now)})
		}
	}
	if len(s.cands) == 0 {
		return
	}
	slices.SortFunc(s.cands, byClassSmallestFirst)

	reserved, reservedFor := int32(-1), uint8(0)
	// best and bestOther (best but the reserved pod) change only when a
	// program is placed or a pod reserved, so a program that does not fit
	// costs a comparison, not a scan of the pods.
	best, bestOther := s.bestPods(reserved)
	if best < 0 {
		return
	}
	for _, c := range s.cands {
		at := best
		if reserved >= 0 && c.class > reservedFor {
			at = bestOther
		}
		// Cache affinity: the pod that may still hold the program's KV
		// cache wins when the program fits there (and it is not reserved
		// for a higher class): resuming there reuses the cache instead of
		// recomputing the whole context.
		if k := s.progs[c.idx].cachedOn; k >= 0 && k != at && s.pods[k].serving &&
			(k != reserved || c.class <= reservedFor) && c.tokens <= s.pods[k].resumeRemaining() {
			at = k
		}
		if at >= 0 && c.tokens <= s.pods[at].resumeRemaining() {
			if s.waitsForCache(&s.progs[c.idx], at, now) {
				continue
			}
			s.place(c.idx, at)
			best, bestOther = s.bestPods(reserved)
			continue
		}
		if reserved < 0 {
			if r := s.mostRemaining(-1, c.tokens); r >= 0 {
				reserved, reservedFor = r, c.class
				best, bestOther = s.bestPods(reserved)
			}
		}
	}
}

// waitsForCache reports whether a waiting program that would be placed on
// pod at should rather keep waiting for the pod that still holds its KV
// cache: that pod is serving, has a host KV tier (where the pause put the
// program's KV) but no device room for it now, the program has
// waited less than Policy.CacheAffinityWait (an unknown wait start never
// waits). An overdue program waits too: the fairness step then makes room
// for it on that pod (bestVictim prefers it). Resuming it elsewhere would recompute its whole context
// (its ContextTokens of prefill, and a second copy of its cache), which
// costs more than a short wait for the pod's room to free.
func (s *Scheduler) waitsForCache(ps *progState, at int32, now time.Time) bool {
	k := ps.cachedOn
	w := s.policy.CacheAffinityWait
	if k < 0 || k == at || w <= 0 || !s.pods[k].serving || s.pods[k].host <= 0 {
		return false
	}
	if ps.waitSince.IsZero() {
		return false
	}
	left := w - now.Sub(ps.waitSince)
	// Moving its KV to at costs the transfer; waiting, up to what is left
	// of the wait. (An unknown wait start never waits, above.)
	if s.movesKV(ps, k, at) && s.transferTime(ps, k) < left {
		return false
	}
	return left > 0
}

// movesKV reports whether ps's KV is worth moving from pod from to pod at
// rather than recomputed there: both pods move blocks of the same size, its
// context is no longer than at serves (at refuses a longer chain; pods of
// different max model lengths may still share a model), and one token's KV
// crosses the network faster than a pod recomputes it
// (Policy.KVTransferBandwidth, PrefillTokensPerSecond). Both times grow
// with the context alike, so the comparison is per token.
func (s *Scheduler) movesKV(ps *progState, from, at int32) bool {
	bpt := s.pods[from].kvBytesPerToken
	bw := s.policy.KVTransferBandwidth
	if maxLen := s.pods[at].maxModelLen; maxLen > 0 && ps.contextTokens > maxLen {
		return false
	}
	return bw > 0 && bpt > 0 && bpt == s.pods[at].kvBytesPerToken &&
		float64(bpt)/bw < 1/s.policy.PrefillTokensPerSecond
}

// transferTime is how long moving ps's context from pod from takes.
func (s *Scheduler) transferTime(ps *progState, from int32) time.Duration {
	sec := float64(ps.footprint) * float64(s.pods[from].kvBytesPerToken) / s.policy.KVTransferBandwidth
	return time.Duration(sec * float64(time.Second))
}

// mostRemaining returns the serving pod other than skip with at least
// minTotal capacity and the most remaining capacity in the resume view, the
// first by name on a tie, or -1 if there is none.
func (s *Scheduler) mostRemaining(skip int32, minTotal int64) int32 {
	at := int32(-1)
	var most int64
	for i := range s.pods {
		p := &s.pods[i]
		if !p.serving || int32(i) == skip || p.total < minTotal {
			continue
		}
		if r := p.resumeRemaining(); at < 0 || r > most {
			at, most = int32(i), r
		}
	}
	return at
}

// bestPods returns, in one scan, the serving pod with the most remaining
// capacity in the resume view and the same but for pod skip (-1 skips none),
// the first by name on a tie; -1 where there is none.
func (s *Scheduler) bestPods(skip int32) (best, other int32) {
	best, other = -1, -1
	var most, mostOther int64
	for i := range s.pods {
		p := &s.pods[i]
		if !p.serving {
			continue
		}
		r := p.resumeRemaining()
		if best < 0 || r > most {
			best, most = int32(i), r
		}
		if int32(i) != skip && (other < 0 || r > mostOther) {
			other, mostOther = int32(i), r
		}
	}
	return best, other
}

// placeLeastPrograms is Default mode: every waiting program goes to the
// serving pod running the fewest programs, first by name on a tie.
func (s *Scheduler) placeLeastPrograms() {
	s.cands = s.cands[:0]
	for i := range s.progs {
		if ps := &s.progs[i]; ps.pod < 0 {
			s.cands = append(s.cands, candidate{id: ps.id, tokens: ps.footprint, idx: int32(i), class: ps.class})
		}
	}
	slices.SortFunc(s.cands, byClassLargestFirst)
	for _, c := range s.cands {
		at := int32(-1)
		for i := range s.pods {
			p := &s.pods[i]
			if p.serving && (at < 0 || p.programs < s.pods[at].programs) {
				at = int32(i)
			}
		}
		if at < 0 {
			return
		}
		s.place(c.idx, at)
	}
}
