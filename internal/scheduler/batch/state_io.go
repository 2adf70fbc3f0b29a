package batch

// StateIO is implemented by a StateKeeper whose per-sequence states can be
// read out as bytes and written back in: the engine moves a program's
// recurrent-state checkpoint to another pod with it, beside the program's
// KV blocks (BlockIO), so the program resumes there from that state.
//
// Contract:
//   - A state is opaque: StateBytes bytes per slot, whatever the executor
//     keeps in it (a hybrid model's recurrent layers' states, say). The
//     bytes mean the same on every executor of one model and format:
//     two pods exchange states only when their BlockFormats, StateBytes
//     included, are equal (BlockFormat.Compatible); the engine checks.
//   - slot is a device slot (0 … StateSlots()−1) or, for a
//     HostStateKeeper, a host slot numbered after them. ReadState fills
//     dst (len StateBytes) with slot's state; WriteState overwrites it
//     with src. Both are synchronous: the bytes have landed when they
//     return.
//   - The engine owns every slot; it calls ReadState and WriteState only
//     between iterations, never concurrently with Execute or each other.
//     An error from WriteState means the slot holds no usable state.
type StateIO interface {
	StateKeeper
	StateBytes() int
	ReadState(slot int, dst []byte) error
	WriteState(slot int, src []byte) error
}
