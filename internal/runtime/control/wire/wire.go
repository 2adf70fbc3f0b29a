// Package wire is the control API's wire format between the controller's
// fleet loop and a runtime pod: the pod's state report (GET /v1/state) and
// the versioned placement the controller pushes (PUT /v1/placement). It
// holds only data types, so the pod's program table, the control API and
// the fleet loop share them without depending on one another.
package wire

import "time"

// Report is what the pod tells the controller (GET state on the control API).
type Report struct {
	// Pod is this pod's name.
	Pod string `json:"pod"`
	// PlacementVersion is the last placement version applied.
	PlacementVersion int64 `json:"placementVersion"`
	// KV is the pod's exact KV capacity.
	KV KVReport `json:"kv"`
	// Programs are the programs this pod runs, has run, or holds requests for.
	Programs []ProgramReport `json:"programs"`
}

// KVReport is the KV cache's size and use.
type KVReport struct {
	BlockSize   int `json:"blockSize"`
	TotalBlocks int `json:"totalBlocks"`
	UsedBlocks  int `json:"usedBlocks"`
	// CachedBlocks are free blocks still holding prefix-cache content.
	CachedBlocks int `json:"cachedBlocks"`
	// HostTotalBlocks is the host-memory tier's size (0: none) and
	// HostUsedBlocks how many of its blocks hold paused programs' KV. They
	// are not device capacity: a program whose KV is on the host needs
	// device room to resume.
	HostTotalBlocks int `json:"hostTotalBlocks,omitempty"`
	HostUsedBlocks  int `json:"hostUsedBlocks,omitempty"`
	// BytesPerToken is one token's KV in bytes when the pod can send and
	// receive programs' KV blocks (GET /v1/kv on its control port, and
	// Placement.Fetch); absent (0) from a pod that cannot, including pods
	// older than the KV transfer, so the controller never asks them to.
	BytesPerToken int64 `json:"bytesPerToken,omitempty"`
	// MaxModelLen is the longest context in tokens this pod serves (its
	// --max-model-len), so also the longest KV chain it takes from another
	// pod: the controller moves a program's KV here only when its context
	// fits. Absent (0) from pods older than this field.
	MaxModelLen int `json:"maxModelLen,omitempty"`
	// StateTokens is what one running program's recurrent state costs a
	// hybrid model's pod, in tokens of its KV (the state's bytes over a
	// token's KV bytes, rounded up): a program's cost is its context's KV
	// plus its state. Absent (0) for other models.
	StateTokens int64 `json:"stateTokens,omitempty"`
}

// CapacityTokens is blocks × block size.
func (k KVReport) CapacityTokens() int64 { return int64(k.TotalBlocks) * int64(k.BlockSize) }

// ProgramReport is one program as this pod sees it.
type ProgramReport struct {
	ID string `json:"id"`
	// Status is REASONING or ACTING.
	Status string `json:"status"`
	// State is ACTIVE, PAUSED or TERMINATED.
	State string `json:"state"`
	// Placed is true when the program runs on this pod (its KV cache is
	// here); false when the pod only holds requests for it.
	Placed         bool      `json:"placed"`
	MarkedForPause bool      `json:"markedForPause,omitempty"`
	ContextTokens  int64     `json:"contextTokens"`
	SharedTokens   int64     `json:"sharedTokens,omitempty"`
	Steps          int       `json:"steps"`
	LastTransition time.Time `json:"lastTransition"`
	PausedSince    time.Time `json:"pausedSince,omitzero"`
	// RunningSince is when the program was last placed or resumed here
	// (the fairness bound pauses the program that has run longest).
	RunningSince time.Time `json:"runningSince,omitzero"`
	HeldRequests int       `json:"heldRequests,omitempty"`
	InFlight     int       `json:"inFlight,omitempty"`
}

// Placement is what the controller pushes (PUT placement on the control
// API). It is versioned: a version not newer than the one applied is
// ignored, so pushes are idempotent. Lists are deltas against the previous
// placement; Routes and Room are the full current view.
type Placement struct {
	Version int64 `json:"version"`
	// Mode is the controller's placement mode (Default or ProgramAware).
	// In Default mode, which never pauses, the gate never holds a new
	// program; "" keeps the mode of the previous placement.
	Mode string `json:"mode,omitempty"`
	// Place: programs to run on this pod from now on (new, resumed, moved).
	Place []string `json:"place,omitempty"`
	// Pause: ACTING programs to pause now.
	Pause []string `json:"pause,omitempty"`
	// Mark: REASONING programs to pause when their request ends.
	Mark []string `json:"mark,omitempty"`
	// Unmark: earlier marks withdrawn.
	Unmark []string `json:"unmark,omitempty"`
	// Release: programs released on another pod (the release call reached
	// a pod that does not run them): end them here too.
	Release []string `json:"release,omitempty"`
	// Routes maps programs to the API address (host:port) of the pod they
	// are placed on, so requests reaching another pod are forwarded there;
	// "" marks a paused program, whose requests are held wherever they
	// arrive.
	// It is a delta (entries set or changed) unless FullRoutes is set, when
	// it replaces the routing table. Routes to this pod's own address are
	// ignored: Place says what runs here.
	Routes map[string]string `json:"routes,omitempty"`
	// Unroute lists programs whose route is gone (released, paused).
	Unroute []string `json:"unroute,omitempty"`
	// FullRoutes marks Routes as the whole table (the first push to a pod,
	// or after it missed one).
	FullRoutes bool `json:"fullRoutes,omitempty"`
	// Room is each pod's remaining capacity in tokens after the decision,
	// keyed by API address: where new programs go.
	Room map[string]int64 `json:"room,omitempty"`
	// MaxPauseSeconds bounds how long a request is held (policy
	// maxPauseDuration); 0 keeps the current value.
	MaxPauseSeconds int64 `json:"maxPauseSeconds,omitempty"`
	// BufferTokensPerProgram is the policy's per-program headroom.
	BufferTokensPerProgram int64 `json:"bufferTokensPerProgram,omitempty"`
	// Capacity is the policy's capacity model, so the pod's gate charges
	// programs as the controller does; absent keeps the pod's current one.
	Capacity *CapacityModel `json:"capacity,omitempty"`
	// Fetch maps programs of Place to the control address (host:port) of
	// the pod holding their KV: this pod fetches the blocks from there
	// (GET /v1/kv) before their requests run, and recomputes what does not
	// arrive. The controller sends it only to pods that report
	// KVReport.BytesPerToken: a pod older than this field refuses a
	// placement naming it (unknown field, 400).
	Fetch map[string]string `json:"fetch,omitempty"`
}

// CapacityModel is what a program charges a pod (placement.CapacityModel;
// the buffer is Placement.BufferTokensPerProgram).
type CapacityModel struct {
	// ActingTokenWeight, in [0, 1], is the share of an ACTING program's
	// tokens charged.
	ActingTokenWeight float64 `json:"actingTokenWeight"`
	// ActingOnHost charges ACTING programs only for what the host tier
	// cannot hold.
	ActingOnHost bool `json:"actingOnHost,omitempty"`
	// DeviceOvercommit, in [1, 8], raises a pod with a host tier's total.
	DeviceOvercommit float64 `json:"deviceOvercommit"`
}

// PlacementResult answers a PUT: the version now in force and whether this
// push changed anything.
type PlacementResult struct {
	Version int64 `json:"version"`
	Applied bool  `json:"applied"`
}
