package engine

// stateSlots hands out the recurrent-state slots of an executor that keeps
// them (batch.StateKeeper: a hybrid model's): a running sequence holds one
// from admission until it finishes or is preempted. The engine runs at
// most as many sequences as there are slots (New caps MaxNumSeqs), so
// take always finds one.
type stateSlots struct {
	free []int
}

func newStateSlots(n int) *stateSlots {
	p := &stateSlots{free: make([]int, n)}
	for i := range p.free {
		p.free[i] = n - 1 - i // slot 0 first
	}
	return p
}

// take gives s a slot (none when the engine keeps no states).
func (p *stateSlots) take(s *sequence) {
	if p == nil || s.hasSlot {
		return
	}
	n := len(p.free) - 1
	if n < 0 {
		panic("engine: more running sequences than recurrent-state slots")
	}
	s.slot, s.hasSlot = p.free[n], true
	p.free = p.free[:n]
}

// give takes s's slot back.
func (p *stateSlots) give(s *sequence) {
	if p == nil || !s.hasSlot {
		return
	}
	p.free = append(p.free, s.slot)
	s.slot, s.hasSlot = 0, false
}
