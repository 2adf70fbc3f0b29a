package placement

import "math"

// CapacityModel is the part of a Policy that says what programs charge a
// pod: the controller's rounds and a pod's gate (the runtime's program
// table, deciding whether a new program fits here) read a pod's room
// through the same formula (PodCapacity), so they agree about it.
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

// Validate returns the error Policy.Validate gives for a policy with m's
// fields, or nil.
func (m CapacityModel) Validate() error {
	p := DefaultPolicy()
	p.ActingTokenWeight, p.BufferTokensPerProgram = m.ActingTokenWeight, m.BufferTokensPerProgram
	p.ActingOnHost, p.DeviceOvercommit = m.ActingOnHost, m.DeviceOvercommit
	return p.Validate()
}

// PodCapacity is pod's capacity before any decision, as the first step of
// a round charges it (Capacity documents the formula): the programs of
// programs placed on pod (Pod == pod.Name, ACTIVE), the paused ones whose
// KV it keeps (CachedOn == pod.Name) against its host tier, and its total
// raised by DeviceOvercommit. Programs on other pods are ignored. A round
// that changes nothing on pod reports this same Capacity for it: both
// charge through podLoad and the model's methods below. Like a Snapshot,
// programs must name each program once (PodCapacity does not check it).
// It allocates nothing.
func PodCapacity(m CapacityModel, pod Pod, programs []Program) (Capacity, error) {
	if err := m.Validate(); err != nil {
		return Capacity{}, err
	}
	if err := pod.validate(); err != nil {
		return Capacity{}, err
	}
	var l podLoad
	for i := range programs {
		p := &programs[i]
		if err := p.validate(); err != nil {
			return Capacity{}, err
		}
		switch placed, counted := placedOn(p, &pod); {
		case counted:
			l.place(m, m.placedCharge(p), p.Status == StatusActing, p.MarkedForPause || pod.Draining)
		case !placed && p.State != StateTerminated && p.CachedOn == pod.Name:
			l.keep(m.footprint(p))
		}
	}
	share := m.actingShare(&l, pod.HostTokens)
	if share != 1 {
		for i := range programs {
			if p := &programs[i]; p.Status == StatusActing {
				if _, counted := placedOn(p, &pod); counted {
					c := m.placedCharge(p)
					l.used += m.scaleActing(c, share) - c
				}
			}
		}
	}
	return Capacity{Used: l.used, Total: m.total(&l, pod.CapacityTokens, pod.HostTokens, share),
		Marked: l.marked, Programs: l.programs}, nil
}

// placedOn reports whether p is placed on pod (ACTIVE there), and whether
// the pod is charged for it: not for an ACTING program on a draining pod,
// which the round pauses there.
func placedOn(p *Program, pod *Pod) (placed, counted bool) {
	placed = p.State == StateActive && p.Pod == pod.Name
	return placed, placed && !(pod.Draining && p.Status == StatusActing)
}

// podLoad is what the programs on one pod charge it before any decision:
// the sums Capacity's formula reads.
type podLoad struct {
	// used is the undecayed charge of the programs placed on the pod,
	// marked the part of it held by programs marked for pause.
	used, marked int64
	// actingOwn is the weighted tokens (buffers excluded) of the ACTING
	// programs placed on the pod, hostKept the footprints of the waiting
	// programs whose KV its host tier keeps (ActingOnHost).
	actingOwn, hostKept int64
	programs            int
}

// place charges the pod for a program placed on it, its charge being
// m.placedCharge's; marked: it is, or the round marks it, for pause.
func (l *podLoad) place(m CapacityModel, charge int64, acting, marked bool) {
	l.used += charge
	l.programs++
	if acting {
		l.actingOwn += charge - m.BufferTokensPerProgram
	}
	if marked && !acting {
		l.marked += charge
	}
}

// keep counts a waiting program whose KV the pod keeps, of footprint
// m.footprint's.
func (l *podLoad) keep(footprint int64) { l.hostKept += footprint }

// ownTokens is what a placed program adds to its pod before weighting:
// its context less its share of prefix-cache savings.
func ownTokens(p *Program) int64 {
	return p.ContextTokens - min(max(p.SharedTokens, 0), p.ContextTokens)
}

// weigh charges an ACTING program's tokens at the model's weight.
func (m CapacityModel) weigh(tokens int64) int64 {
	if m.ActingTokenWeight == 1 {
		return tokens
	}
	return int64(math.Round(m.ActingTokenWeight * float64(tokens)))
}

// placedCharge is what a program placed on a pod costs it, undecayed.
func (m CapacityModel) placedCharge(p *Program) int64 {
	own := ownTokens(p)
	if p.Status == StatusActing {
		own = m.weigh(own)
	}
	return own + m.BufferTokensPerProgram
}

// footprint is what a waiting program will cost the pod it is placed on: its
// whole context (it shares nothing there yet), weighted unless a request is
// waiting for it, since then it starts REASONING at once.
func (m CapacityModel) footprint(p *Program) int64 {
	tokens := p.ContextTokens
	if !wantsToRun(p) {
		tokens = m.weigh(tokens)
	}
	return tokens + m.BufferTokensPerProgram
}

// actingShare is the fraction of the ACTING tokens placed on a pod with
// host tier host that its device is charged (ActingOnHost): what the
// tier's room (its size less the KV of the paused programs it keeps)
// cannot hold, 1 without the option or the room. All of a pod's ACTING
// programs get the same share, so the pause and fairness steps, which
// compare charges, rank them as before.
func (m CapacityModel) actingShare(l *podLoad, host int64) float64 {
	room := max(host-l.hostKept, 0)
	switch {
	case !m.ActingOnHost || room == 0 || l.actingOwn <= 0:
		return 1
	case l.actingOwn > room:
		return float64(l.actingOwn-room) / float64(l.actingOwn)
	}
	return 0
}

// scaleActing is the charge of an ACTING program charged c with share of
// its tokens on the device; its buffer stays whole.
func (m CapacityModel) scaleActing(c int64, share float64) int64 {
	buf := m.BufferTokensPerProgram
	return buf + int64(math.Round(share*float64(max(c-buf, 0))))
}

// total is the capacity of a pod with device capacity device and host
// tier host, loaded with l and charging share of its ACTING tokens to the
// device: with DeviceOvercommit, at most that many times device, by no
// more than the tier's room left after the KV of the paused programs it
// keeps and of the ACTING programs it holds (what runs beyond the device
// spills there).
func (m CapacityModel) total(l *podLoad, device, host int64, share float64) int64 {
	if m.DeviceOvercommit <= 1 || host <= 0 {
		return device
	}
	actingOnHost := int64(math.Round((1 - share) * float64(l.actingOwn)))
	room := max(host-l.hostKept-actingOnHost, 0)
	return device + min(int64((m.DeviceOvercommit-1)*float64(device)), room)
}
