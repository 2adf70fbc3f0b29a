package placement

import (
	"slices"
	"strings"
	"time"
)

// rankOverdue orders a program that waited past Policy.FairnessBound before
// every class in resume; the classes follow, two ranks each (resumeRank).
const rankOverdue uint8 = 0

// overdue reports whether a waiting program that wants to run has waited
// longer than the fairness bound.
func (s *Scheduler) overdue(ps *progState, now time.Time) bool {
	b := s.policy.FairnessBound
	return b > 0 && ps.class != classIdle && !ps.waitSince.IsZero() && now.Sub(ps.waitSince) > b
}

// resumeRank is a waiting program's place in resume order: overdue programs
// first, then the classes, each raised one level for every Policy.WaitAging
// the program has waited (never above classHeld), so the longer a program
// waits, the earlier it is resumed; within a class, programs that have
// waited longer than Policy.ResumeFirstAfter come before the others.
func (s *Scheduler) resumeRank(ps *progState, now time.Time) uint8 {
	if s.overdue(ps, now) {
		return rankOverdue
	}
	class := ps.class
	var w time.Duration
	if !ps.waitSince.IsZero() {
		w = now.Sub(ps.waitSince)
	}
	if a := s.policy.WaitAging; a > 0 && w > 0 {
		class -= uint8(min(int64(class), int64(w/a)))
	}
	rank := 2*(class+1) + 1
	if f := s.policy.ResumeFirstAfter; f > 0 && w > f {
		rank-- // waited long: ahead of its class
	}
	return rank
}

// fairness bounds waiting (step 3b): a program that wants to run and has
// waited longer than Policy.FairnessBound, and that resume could not place,
// takes the place of the program that has run longest since it was last
// resumed (at least one FairnessBound) on the pod that then fits it best.
// An ACTING victim is paused at once and the waiting program placed in its
// room; a REASONING one is marked, so its pod pauses it at its next tool
// call (never mid-request), and the waiting program, first in resume order,
// takes the room in a later round. Tokens already marked on a pod count as
// room, so a waiting program claims one victim, not one per round.
func (s *Scheduler) fairness(now time.Time) {
	b := s.policy.FairnessBound
	if b <= 0 {
		return
	}
	s.cands = s.cands[:0]
	for i := range s.progs {
		if ps := &s.progs[i]; ps.pod < 0 && s.overdue(ps, now) {
			s.cands = append(s.cands, candidate{id: ps.id, tokens: ps.waitSince.UnixNano(), idx: int32(i)})
		}
	}
	if len(s.cands) == 0 {
		return
	}
	slices.SortFunc(s.cands, byClassSmallestFirst) // longest-waiting first
	for _, c := range s.cands {
		w := &s.progs[c.idx]
		cachedOn := w.cachedOn
		if s.policy.CacheAffinityWait <= 0 || (cachedOn >= 0 && s.pods[cachedOn].host <= 0) {
			cachedOn = -1 // cache affinity off, or no host tier kept the KV: best fit only
		}
		at, victim := s.bestVictim(w.footprint, cachedOn, now)
		if at < 0 {
			continue
		}
		pod := &s.pods[at]
		if victim < 0 {
			// Marked programs already free enough: keep their marks.
			s.keepMarks(at)
			continue
		}
		v := &s.progs[victim]
		s.dec.FairnessPaused = append(s.dec.FairnessPaused, v.id)
		if v.acting {
			s.pause(victim)
			if pod.remaining() >= w.footprint {
				s.place(c.idx, at)
			}
			continue
		}
		v.marked, v.keepMark = true, true
		pod.marked += v.charge
		if !v.markedIn {
			s.dec.Pods[at].Mark = append(s.dec.Pods[at].Mark, v.id)
		}
		s.keepMarks(at)
	}
}

// bestVictim picks, for a waiting program of footprint tokens, the serving
// pod where it fits best once the longest-running eligible program there
// leaves, and that program; victim is -1 when the pod's marked programs
// already make room. at is -1 when no pod can make room. The pod holding
// the program's KV cache (cachedOn, -1 if none) wins whenever it can make
// room: resuming there restores the cache instead of recomputing it.
func (s *Scheduler) bestVictim(footprint int64, cachedOn int32, now time.Time) (at, victim int32) {
	at, victim = -1, -1
	var bestLeft int64
	for i := range s.pods {
		p := &s.pods[i]
		if !p.serving || p.total < footprint {
			continue
		}
		room := p.remaining() + p.marked
		v := int32(-1)
		if room < footprint {
			v = s.longestRunning(int32(i), now)
			if v < 0 {
				continue
			}
			room += s.progs[v].charge
			if room < footprint {
				continue
			}
		}
		if int32(i) == cachedOn {
			return int32(i), v
		}
		if left := room - footprint; at < 0 || left < bestLeft {
			at, victim, bestLeft = int32(i), v, left
		}
	}
	return at, victim
}

// longestRunning is the unmarked program on pod at that has run longest since
// it was last resumed, if that is at least one fairness bound, or -1.
func (s *Scheduler) longestRunning(at int32, now time.Time) int32 {
	best := int32(-1)
	for _, idx := range s.members[s.start[at]:s.start[at+1]] {
		ps := &s.progs[idx]
		if ps.pod != at || ps.marked || ps.runningSince.IsZero() || now.Sub(ps.runningSince) < s.policy.FairnessBound {
			continue
		}
		if best < 0 {
			best = idx
			continue
		}
		b := &s.progs[best]
		if c := ps.runningSince.Compare(b.runningSince); c < 0 || (c == 0 && strings.Compare(ps.id, b.id) < 0) {
			best = idx
		}
	}
	return best
}

// keepMarks protects the marks on pod at from being dropped as spare this
// round: they make room for an overdue program.
func (s *Scheduler) keepMarks(at int32) {
	for _, idx := range s.members[s.start[at]:s.start[at+1]] {
		if ps := &s.progs[idx]; ps.pod == at && ps.marked {
			ps.keepMark = true
		}
	}
}
