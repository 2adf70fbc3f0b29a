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

// resume places waiting programs by class, then best-fit decreasing, with one
// reservation against starvation (step 3; see the package comment).
func (s *Scheduler) resume() {
	s.cands = s.cands[:0]
	for i := range s.progs {
		if ps := &s.progs[i]; ps.pod < 0 {
			s.cands = append(s.cands, candidate{id: ps.id, tokens: ps.footprint, idx: int32(i), class: ps.class})
		}
	}
	if len(s.cands) == 0 {
		return
	}
	slices.SortFunc(s.cands, byClassLargestFirst)

	reserved, reservedFor := int32(-1), uint8(0)
	// best and bestOther (best but the reserved pod) change only when a
	// program is placed or a pod reserved, so a program that does not fit
	// costs a comparison, not a scan of the pods.
	best := s.mostRemaining(-1, 0)
	if best < 0 {
		return
	}
	bestOther := best
	for _, c := range s.cands {
		at := best
		if reserved >= 0 && c.class > reservedFor {
			at = bestOther
		}
		if at >= 0 && c.tokens <= s.pods[at].resumeRemaining() {
			s.place(c.idx, at)
			best = s.mostRemaining(-1, 0)
			bestOther = s.mostRemaining(reserved, 0)
			continue
		}
		if reserved < 0 {
			if r := s.mostRemaining(-1, c.tokens); r >= 0 {
				reserved, reservedFor = r, c.class
				bestOther = s.mostRemaining(reserved, 0)
			}
		}
	}
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
