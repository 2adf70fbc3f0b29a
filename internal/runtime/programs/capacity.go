package programs

import (
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// capacityState is the gate's capacity model: the controller's, from its
// placements, so that the gate and the controller agree about this pod's
// room (the gate calls placement.PodCapacity, the formula a round charges
// pods by).
type capacityState struct {
	// set: a placement named the model; until then every token of a
	// placed program counts and nothing is overcommitted.
	set   bool
	model placement.CapacityModel
	progs []placement.Program // scratch
}

// applyCapacityLocked takes the capacity model of a placement (nil keeps
// the current one); the buffer is the table's.
func (t *Table) applyCapacityLocked(m *wire.CapacityModel) {
	if m != nil {
		t.capacity.set = true
		t.capacity.model = placement.CapacityModel{ActingTokenWeight: m.ActingTokenWeight, ActingOnHost: m.ActingOnHost,
			DeviceOvercommit: m.DeviceOvercommit}
	}
}

// modelLocked is the capacity model the gate charges this pod by now.
func (t *Table) modelLocked() placement.CapacityModel {
	if !t.capacity.set {
		return placement.RawCapacityModel(t.cfg.Buffer)
	}
	m := t.capacity.model
	m.BufferTokensPerProgram = t.cfg.Buffer
	return m
}

// selfName names this pod in the capacity snapshot (a table configured
// without a pod name still needs one).
func (t *Table) selfName() string {
	if t.cfg.Pod != "" {
		return t.cfg.Pod
	}
	return "self"
}

// localRoomLocked is this pod's remaining capacity as the controller
// computes it (placement.PodCapacity under the pool's capacity model): the
// programs placed here as this pod reports them, and the paused ones whose
// KV it keeps.
func (t *Table) localRoomLocked() int64 {
	if t.cfg.KV == nil {
		return 0
	}
	kv := t.cfg.KV()
	pod := placement.Pod{Name: t.selfName(), Ready: true, CapacityTokens: kv.CapacityTokens(),
		HostTokens: int64(kv.HostTotalBlocks) * int64(kv.BlockSize)}
	c := &t.capacity
	c.progs = c.progs[:0]
	for _, e := range t.progs {
		if !e.placed || e.state == placement.StateTerminated {
			continue
		}
		p := placement.Program{ID: e.id, Status: e.status, State: e.state, MarkedForPause: e.marked,
			ContextTokens: e.contextTokens, SharedTokens: e.sharedTokens, Steps: e.steps,
			LastTransition: e.lastTransition, PausedSince: e.pausedSince, RunningSince: e.runningSince,
			HasHeldRequest: e.held > 0}
		if e.state == placement.StateActive {
			p.Pod = pod.Name
		} else {
			p.CachedOn = pod.Name
		}
		c.progs = append(c.progs, p)
	}
	capa, err := placement.PodCapacity(t.modelLocked(), pod, c.progs)
	clear(c.progs) // drop the ids until the next call
	if err != nil {
		t.cfg.Logger.Error("gate capacity", "err", err)
		return 0
	}
	return capa.Total - capa.Used
}

// Room is this pod's remaining capacity now, by the capacity model of the
// controller's last placement, and the room that placement gave this pod
// (placed is false before a placement named it): with nothing changed
// since, the two agree.
func (t *Table) Room() (local, placed int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	placed, ok = t.room[t.cfg.Addr]
	return t.localRoomLocked(), placed, ok
}
