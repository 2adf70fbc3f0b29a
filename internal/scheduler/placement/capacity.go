package placement

import (
	"math"
	"time"
)

// resumeCharge is what a placed program costs its pod when deciding what to
// resume: its placed charge, with ACTING tokens decayed by the time spent
// acting when decay is on. An unknown or future transition time means no
// decay: the estimate errs towards keeping capacity.
func (s *Scheduler) resumeCharge(p *Program, charge int64, now time.Time) int64 {
	d := s.policy.ActingDecay
	if !d.Enabled || p.Status != StatusActing || p.LastTransition.IsZero() {
		return charge
	}
	t := now.Sub(p.LastTransition)
	if t <= 0 {
		return charge
	}
	tokens := s.policy.ActingTokenWeight * float64(ownTokens(p))
	decayed := int64(math.Round(tokens * math.Exp2(-float64(t)/float64(d.HalfLife))))
	return decayed + s.policy.BufferTokensPerProgram
}

// wantsToRun reports whether a request is waiting for the program.
func wantsToRun(p *Program) bool {
	return p.Status == StatusReasoning || p.HasHeldRequest
}

// Resume classes, in the order they are served.
const (
	// classHeld: a request is waiting and the program is past its first
	// step; it has the most work invested.
	classHeld uint8 = iota
	// classNew: a request is waiting for a program on its first step.
	classNew
	// classIdle: ACTING with no request; resuming it only keeps its cache
	// warm for a turn that has not come yet.
	classIdle
)

func classOf(p *Program) uint8 {
	switch {
	case !wantsToRun(p):
		return classIdle
	case p.Steps > 1:
		return classHeld
	default:
		return classNew
	}
}
