package sim

import (
	"encoding/binary"
	"fmt"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

var _ batch.StateIO = (*Executor)(nil)

// simStateBytes is a simulated state's bytes: the number of tokens it has
// seen, which a resume checks (advanceStates). The sim keeps no contents;
// what a move of a state costs is charged on the model's
// Geometry.StateBytes by whoever moves it (the simulator's KV fetch).
const simStateBytes = 8

// StateBytes implements batch.StateIO: 8 for a model that keeps states
// (its position), 0 for others.
func (e *Executor) StateBytes() int {
	if !e.opts.Geometry.KeepsStates() {
		return 0
	}
	return simStateBytes
}

// ReadState writes the position of slot's state into dst
// (batch.StateIO).
func (e *Executor) ReadState(slot int, dst []byte) error {
	if err := e.checkStateIO(slot, dst); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(dst, uint64(int64(e.slotPos[slot])))
	return nil
}

// WriteState sets slot's state to the position src holds
// (batch.StateIO).
func (e *Executor) WriteState(slot int, src []byte) error {
	if err := e.checkStateIO(slot, src); err != nil {
		return err
	}
	e.slotPos[slot] = int(int64(binary.LittleEndian.Uint64(src)))
	return nil
}

func (e *Executor) checkStateIO(slot int, b []byte) error {
	switch {
	case e.StateBytes() == 0:
		return fmt.Errorf("sim: %s keeps no states", e.opts.Geometry.Name)
	case slot < 0 || slot >= len(e.slotPos):
		return fmt.Errorf("sim: state slot %d outside %d", slot, len(e.slotPos))
	case len(b) != simStateBytes:
		return fmt.Errorf("sim: a state of %d bytes, want %d", len(b), simStateBytes)
	}
	return nil
}
