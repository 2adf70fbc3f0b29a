package placement

import "slices"

// Ranks of ACTING pause candidates: a program already marked is paused first,
// since its pod is about to pause it anyway.
const (
	rankMarked uint8 = iota
	rankUnmarked
)

// pauseUntilSafe brings every serving pod back within capacity (step 4).
func (s *Scheduler) pauseUntilSafe() {
	for i := range s.pods {
		if s.pods[i].serving {
			s.pauseOnPod(int32(i))
		}
	}
}

func (s *Scheduler) pauseOnPod(at int32) {
	pod := &s.pods[at]
	members := s.members[s.start[at]:s.start[at+1]]
	if pod.used <= pod.total {
		s.unmarkMembers(at)
		return
	}
	// Tokens already marked count as freed: they leave when their programs
	// become ACTING, so pausing more for them would over-pause.
	overBy := func() int64 { return pod.used - pod.marked - pod.total }

	if overBy() > 0 {
		s.cands = s.cands[:0]
		for _, idx := range members {
			if ps := &s.progs[idx]; ps.acting {
				rank := rankUnmarked
				if ps.markedIn {
					rank = rankMarked
				}
				s.cands = append(s.cands, candidate{id: ps.id, tokens: ps.charge, idx: idx, class: rank})
			}
		}
		slices.SortFunc(s.cands, byClassSmallestFirst)
		for _, c := range s.cands {
			if overBy() <= 0 {
				break
			}
			s.pause(c.idx)
		}
	}
	if overBy() > 0 {
		s.cands = s.cands[:0]
		for _, idx := range members {
			if ps := &s.progs[idx]; !ps.acting && !ps.marked {
				s.cands = append(s.cands, candidate{id: ps.id, tokens: ps.charge, idx: idx})
			}
		}
		slices.SortFunc(s.cands, byClassSmallestFirst)
		for _, c := range s.cands {
			if overBy() <= 0 {
				break
			}
			ps := &s.progs[c.idx]
			ps.marked = true
			pod.marked += ps.charge
			s.dec.Pods[at].Mark = append(s.dec.Pods[at].Mark, ps.id)
		}
	}
	// Earlier marks may now cover more than the pod needs (programs ended,
	// or ACTING ones were paused above): drop those it can spare, largest
	// first.
	s.cands = s.cands[:0]
	for _, idx := range members {
		if ps := &s.progs[idx]; !ps.acting && ps.markedIn && !ps.keepMark {
			s.cands = append(s.cands, candidate{id: ps.id, tokens: ps.charge, idx: idx})
		}
	}
	slices.SortFunc(s.cands, byClassLargestFirst)
	for _, c := range s.cands {
		if overBy()+c.tokens <= 0 {
			s.unmark(at, c.idx)
		}
	}
	// A mark on an ACTING program that stays is stale.
	for _, idx := range members {
		if ps := &s.progs[idx]; ps.acting && ps.markedIn && ps.pod >= 0 {
			s.unmark(at, idx)
		}
	}
}

// pause takes an ACTING program off its pod.
func (s *Scheduler) pause(idx int32) {
	ps := &s.progs[idx]
	pod := &s.pods[ps.pod]
	s.dec.Pods[ps.pod].Pause = append(s.dec.Pods[ps.pod].Pause, ps.id)
	pod.used -= ps.charge
	pod.programs--
	ps.pod = -1
	ps.marked = false
}

// unmark clears a mark reported by the pod.
func (s *Scheduler) unmark(at, idx int32) {
	ps := &s.progs[idx]
	if !ps.acting {
		s.pods[at].marked -= ps.charge
	}
	ps.marked = false
	s.dec.Pods[at].Unmark = append(s.dec.Pods[at].Unmark, ps.id)
}

// unmarkMembers clears every mark on a serving pod's programs.
func (s *Scheduler) unmarkMembers(at int32) {
	for _, idx := range s.members[s.start[at]:s.start[at+1]] {
		if ps := &s.progs[idx]; ps.markedIn && !ps.keepMark {
			s.unmark(at, idx)
		}
	}
}

// unmarkAll is Default mode: nothing is paused for capacity, so no mark on a
// serving pod holds.
func (s *Scheduler) unmarkAll() {
	for i := range s.pods {
		if s.pods[i].serving {
			s.unmarkMembers(int32(i))
		}
	}
}
