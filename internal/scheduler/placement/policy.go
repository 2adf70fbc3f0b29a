package placement

import (
	"fmt"
	"math"
	"time"
)

// Mode selects the placement algorithm.
type Mode string

const (
	// ModeDefault keeps programs where they are, sends new ones to the pod
	// with the fewest programs and never pauses for capacity.
	ModeDefault Mode = "Default"
	// ModeProgramAware pauses programs before a pod runs out of KV capacity
	// and resumes them where they fit.
	ModeProgramAware Mode = "ProgramAware"
)

// Decay makes the resume step optimistic about ACTING programs: the longer a
// program has been acting, the likelier its KV cache has been evicted, so
// resume counts its tokens × 2^(−t/HalfLife), t being the time since it
// entered ACTING. Pause decisions always use undecayed tokens.
type Decay struct {
	// Enabled turns decay on.
	Enabled bool
	// HalfLife is the time after which an ACTING program counts half its
	// tokens. It must be positive when Enabled.
	HalfLife time.Duration
}

// Policy tunes the algorithm. Start from DefaultPolicy and change fields:
// zero values are taken literally (a zero ActingTokenWeight is a valid
// weight), and New rejects a policy that fails Validate.
type Policy struct {
	// Mode is ModeDefault or ModeProgramAware.
	Mode Mode
	// ActingTokenWeight, in [0, 1], is the fraction of an ACTING program's
	// tokens charged to its pod. Below 1 it assumes part of an idle
	// program's KV cache will be evicted before it returns.
	ActingTokenWeight float64
	// BufferTokensPerProgram is charged per program on a pod, as decode
	// headroom. It must not be negative.
	BufferTokensPerProgram int64
	// ActingDecay optionally decays ACTING tokens in resume decisions.
	ActingDecay Decay
	// MaxPauseDuration bounds how long a program waits: after it, the
	// program is resumed on the least-loaded pod whether it fits or not. It
	// must be positive, so no program waits forever.
	MaxPauseDuration time.Duration
	// WaitAging ages waiting programs: for every WaitAging a program has
	// waited, it moves one class ahead in resume order (never ahead of the
	// held class). Zero turns aging off; it must not be negative.
	WaitAging time.Duration
	// ResumeFirstAfter bounds waiting without pausing anyone: a waiting
	// program that has waited longer than this resumes before the others
	// of its class (which otherwise go smallest first, so the largest
	// would wait longest). Zero turns it off; it must not be negative.
	ResumeFirstAfter time.Duration
	// FairnessBound is time-sliced fairness between programs: a program
	// that wants to run and has waited longer than FairnessBound is resumed
	// first, and if it fits nowhere, the program that has run longest since
	// its last resume (at least FairnessBound) on the pod that then fits it
	// best is paused at its next tool call to make room. Zero turns it off;
	// it must not be negative, and below MaxPauseDuration to matter.
	FairnessBound time.Duration
	// CacheAffinityWait is how long a waiting program whose KV cache is
	// still held by a pod (CachedOn: in its device cache or its host tier)
	// waits for room on that pod rather than being resumed elsewhere, where
	// its whole context would be recomputed. Zero turns it off; it must not
	// be negative. Past this wait the program goes wherever it fits. With
	// FairnessBound, an overdue program makes room on that pod first
	// (zero: on the pod it fits best).
	CacheAffinityWait time.Duration
	// ActingOnHost charges ACTING programs on a pod with a host KV tier
	// (Pod.HostTokens) only for the share of their tokens that the tier
	// cannot hold: such a pod copies an idle program's evicted blocks to
	// host memory and back at its next request instead of dropping them,
	// so its KV no longer needs device room while it acts (the pod's
	// device must still hold what runs). The tier's room is its size less
	// the footprints of the paused programs whose KV it keeps.
	ActingOnHost bool
	// DeviceOvercommit, at least 1, lets the programs placed on a pod with
	// a host KV tier be charged up to this many times its device capacity
	// (Pod.CapacityTokens), as long as the excess fits in the tier's room
	// left after the KV of the paused and ACTING programs it holds. What
	// runs beyond the device is preempted by the pod's engine, whose
	// evicted blocks spill to the host tier and come back at the host
	// link's speed instead of being recomputed: the engine time-slices the
	// device between requests at every iteration, where pausing at the
	// placement waits for a program's tool call and the next round. 1
	// turns it off; pods without a host tier are never overcommitted.
	// DefaultPolicy's 4 is the SchedulerPolicy default (see its field).
	DeviceOvercommit float64
	// KVTransferBandwidth is what moving a paused program's KV between two
	// pods gets of the pod network, in bytes/s; 0 turns moves off. When a
	// program resumes (or leaves a draining pod) on a pod other than the
	// one holding its KV, the placement tells the new pod to fetch the
	// blocks from the old one (PodDecision.Fetch) if that takes less than
	// recomputing the context (PrefillTokensPerSecond); and a program
	// waiting for room on the pod holding its KV (CacheAffinityWait) stops
	// waiting and moves once the transfer takes less than the wait it has
	// left. DefaultPolicy's is 0, off: measured on the agent scenarios it
	// cut recompute but did not raise throughput (docs/benchmarks.md);
	// DefaultKVTransferBandwidth is a node's 2×200 Gb/s.
	KVTransferBandwidth float64
	// PrefillTokensPerSecond is how fast a pod recomputes a context (its
	// prefill throughput): what moving a program's KV saves. It must be
	// positive when KVTransferBandwidth is.
	PrefillTokensPerSecond float64
}

// Defaults of DefaultPolicy.
const (
	DefaultActingTokenWeight      = 1.0
	DefaultBufferTokensPerProgram = 100
	// DefaultDecayHalfLife is the SchedulerPolicy's default
	// (actingTokenDecay.halfLife: 60s), so a pod and the controller decay
	// alike. It must be at least the policy's interval (the CRD's rule: a
	// faster decay cannot be observed), which the seed's 1 s was not.
	DefaultDecayHalfLife    = time.Minute
	DefaultMaxPauseDuration = 30 * time.Minute
	// DefaultWaitAging is the SchedulerPolicy's fairness.waitAging default.
	DefaultWaitAging = time.Minute
	// DefaultResumeFirstAfter is the SchedulerPolicy's
	// fairness.resumeFirstAfter default: on the agent scenarios it cut the
	// longest wait from 12–22 min to 5 min for 0–3% of the steps/min
	// (docs/benchmarks.md, "Resume the long-waiting first").
	DefaultResumeFirstAfter = 5 * time.Minute
	// DefaultCacheAffinityWait is a minute: recomputing a long agent context
	// elsewhere costs the other pod seconds of prefill and the room of a
	// whole context, while a pod's room frees as soon as one of its
	// programs pauses or ends, usually within a few placement rounds.
	DefaultCacheAffinityWait = time.Minute
	// MaxDeviceOvercommit bounds Policy.DeviceOvercommit.
	MaxDeviceOvercommit = 8
	// DefaultKVTransferBandwidth is a node's two 200 Gb/s NICs, in bytes/s:
	// SchedulerPolicy kvTransfer.bandwidthGbps's default, used when
	// transfers are enabled.
	DefaultKVTransferBandwidth = 2 * 200e9 / 8
	// DefaultPrefillTokensPerSecond is a prefill throughput of an 8B model
	// on an H100 class GPU, kept low: at it a transfer pays whenever a
	// token's KV is under DefaultKVTransferBandwidth/it = 2.5 MB (every
	// model served on one GPU).
	DefaultPrefillTokensPerSecond = 20000
)

// DefaultPolicy returns ProgramAware mode with the seed's settings: acting
// weight 1, 100 buffer tokens per program, decay off (half-life 60 s when
// turned on), a 30-minute pause limit, a one-minute cache affinity wait, and
// ACTING programs' KV counted on a pod's host tier where it has one, and no
// KV transfers between pods.
func DefaultPolicy() Policy {
	return Policy{
		Mode:                   ModeProgramAware,
		ActingTokenWeight:      DefaultActingTokenWeight,
		BufferTokensPerProgram: DefaultBufferTokensPerProgram,
		ActingDecay:            Decay{HalfLife: DefaultDecayHalfLife},
		MaxPauseDuration:       DefaultMaxPauseDuration,
		WaitAging:              DefaultWaitAging,
		ResumeFirstAfter:       DefaultResumeFirstAfter,
		CacheAffinityWait:      DefaultCacheAffinityWait,
		ActingOnHost:           true,
		DeviceOvercommit:       4,
		PrefillTokensPerSecond: DefaultPrefillTokensPerSecond,
	}
}

// Validate reports the first field out of its range.
func (p Policy) Validate() error {
	switch {
	case p.Mode != ModeDefault && p.Mode != ModeProgramAware:
		return fmt.Errorf("placement policy: mode %q: want %q or %q", p.Mode, ModeDefault, ModeProgramAware)
	case math.IsNaN(p.ActingTokenWeight) || p.ActingTokenWeight < 0 || p.ActingTokenWeight > 1:
		return fmt.Errorf("placement policy: acting token weight %v: want a value in [0, 1]", p.ActingTokenWeight)
	case p.BufferTokensPerProgram < 0:
		return fmt.Errorf("placement policy: buffer tokens per program %d: must not be negative", p.BufferTokensPerProgram)
	case p.ActingDecay.Enabled && p.ActingDecay.HalfLife <= 0:
		return fmt.Errorf("placement policy: acting decay half-life %v: must be positive when decay is enabled", p.ActingDecay.HalfLife)
	case p.MaxPauseDuration <= 0:
		return fmt.Errorf("placement policy: max pause duration %v: must be positive", p.MaxPauseDuration)
	case p.WaitAging < 0:
		return fmt.Errorf("placement policy: wait aging %v: must not be negative", p.WaitAging)
	case p.ResumeFirstAfter < 0:
		return fmt.Errorf("placement policy: resume-first-after %v: must not be negative", p.ResumeFirstAfter)
	case p.CacheAffinityWait < 0:
		return fmt.Errorf("placement policy: cache affinity wait %v: must not be negative", p.CacheAffinityWait)
	case math.IsNaN(p.DeviceOvercommit) || p.DeviceOvercommit < 1 || p.DeviceOvercommit > MaxDeviceOvercommit:
		return fmt.Errorf("placement policy: device overcommit %v: want a value in [1, %d]", p.DeviceOvercommit, MaxDeviceOvercommit)
	case math.IsNaN(p.KVTransferBandwidth) || p.KVTransferBandwidth < 0:
		return fmt.Errorf("placement policy: KV transfer bandwidth %v: must not be negative", p.KVTransferBandwidth)
	case p.KVTransferBandwidth > 0 && !(p.PrefillTokensPerSecond > 0):
		return fmt.Errorf("placement policy: prefill tokens per second %v: must be positive when KV transfers are on", p.PrefillTokensPerSecond)
	case p.FairnessBound < 0:
		return fmt.Errorf("placement policy: fairness bound %v: must not be negative", p.FairnessBound)
	}
	return nil
}
