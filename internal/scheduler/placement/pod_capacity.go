package placement

import "time"

// CapacityModel is the part of a Policy that says what programs charge a
// pod: the controller's rounds and a pod's gate (the runtime's program
// table, deciding whether a new program fits here) read a pod's room
// through PodCapacity with the same model, so they agree about it.
type CapacityModel struct {
	ActingTokenWeight      float64
	BufferTokensPerProgram int64
	ActingOnHost           bool
	DeviceOvercommit       float64
}

// CapacityModel returns the policy's capacity model.
func (p Policy) CapacityModel() CapacityModel {
	return CapacityModel{ActingTokenWeight: p.ActingTokenWeight, BufferTokensPerProgram: p.BufferTokensPerProgram,
		ActingOnHost: p.ActingOnHost, DeviceOvercommit: p.DeviceOvercommit}
}

// RawCapacityModel charges every token of a placed program and does not
// overcommit: a pod's gate uses it until the controller's first placement
// says which model the pool runs.
func RawCapacityModel(buffer int64) CapacityModel {
	return CapacityModel{ActingTokenWeight: 1, BufferTokensPerProgram: buffer, DeviceOvercommit: 1}
}

// policy is the model as a Policy that passes Validate.
func (m CapacityModel) policy() Policy {
	p := DefaultPolicy()
	p.ActingTokenWeight, p.BufferTokensPerProgram = m.ActingTokenWeight, m.BufferTokensPerProgram
	p.ActingOnHost, p.DeviceOvercommit = m.ActingOnHost, m.DeviceOvercommit
	return p
}

// PodCapacity is pod's capacity before any decision, as the first step of
// a round charges it (Capacity documents the formula): the programs of
// programs placed on pod (Pod == pod.Name, ACTIVE), the paused ones whose
// KV it keeps (CachedOn == pod.Name) against its host tier, and its total
// raised by DeviceOvercommit. Programs on other pods are ignored. A round
// that changes nothing on pod reports this same Capacity for it.
func PodCapacity(m CapacityModel, pod Pod, programs []Program, now time.Time) (Capacity, error) {
	s, err := NewForCapacity(m)
	if err != nil {
		return Capacity{}, err
	}
	return s.PodCapacity(pod, programs, now)
}

// NewForCapacity is a Scheduler for PodCapacity under m (its other policy
// fields are the defaults'), or the error Validate gives for m.
func NewForCapacity(m CapacityModel) (*Scheduler, error) { return New(m.policy()) }

// PodCapacity is the package's PodCapacity with the Scheduler's policy,
// reusing its scratch memory.
func (s *Scheduler) PodCapacity(pod Pod, programs []Program, now time.Time) (Capacity, error) {
	if err := s.load(Snapshot{Pods: []Pod{pod}, Programs: programs}, now); err != nil {
		return Capacity{}, err
	}
	p := &s.pods[0]
	return Capacity{Used: p.used, Total: p.total, Marked: p.marked, Programs: p.programs}, nil
}
