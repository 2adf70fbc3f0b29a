package placement

// NewProgramTokens is the room a new program needs before it is admitted
// (Policy.NewProgramReserve): a typical program's context on the pool, the
// mean ContextTokens of the placed (ACTIVE, with a Pod) programs among
// programs, plus the per-program buffer; just the buffer when the model
// does not reserve or none is placed. A new program's own context is
// unknown until it runs, and it grows step by step towards that of the
// programs already running: admitting it into a pod's last few hundred
// tokens of room, as charging its empty context did, filled pods to the
// brim with programs whose growth the next round had to pause again.
func (m CapacityModel) NewProgramTokens(programs []Program) int64 {
	if !m.NewProgramReserve {
		return m.BufferTokensPerProgram
	}
	var sum, n int64
	for i := range programs {
		if p := &programs[i]; p.State == StateActive && p.Pod != "" {
			sum += p.ContextTokens
			n++
		}
	}
	if n == 0 {
		return m.BufferTokensPerProgram
	}
	return sum/n + m.BufferTokensPerProgram
}

// reserveForNew raises the footprint of every new waiting program (one
// that has not run a step anywhere that could keep its KV) to the
// new-program reserve (step 1, with Policy.NewProgramReserve).
func (s *Scheduler) reserveForNew(snap *Snapshot) {
	reserve := s.policy.CapacityModel().NewProgramTokens(snap.Programs)
	for k := range s.progs {
		if ps := &s.progs[k]; ps.newWaiting && ps.footprint < reserve {
			ps.footprint, ps.charge = reserve, reserve
		}
	}
}
