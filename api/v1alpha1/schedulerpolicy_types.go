package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SchedulerPolicy is how the controller schedules agent programs across the
// pods of the InferencePools that refer to it, and the request defaults
// those pods apply. Pools refer to a policy in their own namespace by name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kvpolicy,categories=kvpilot
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Interval",type=string,JSONPath=`.spec.interval`
// +kubebuilder:printcolumn:name="Pools",type=integer,JSONPath=`.status.poolCount`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SchedulerPolicy struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired scheduling behaviour.
	// +required
	Spec SchedulerPolicySpec `json:"spec"`

	// status is the observed state of the policy.
	// +optional
	Status SchedulerPolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SchedulerPolicyList is a list of SchedulerPolicies.
type SchedulerPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SchedulerPolicy `json:"items"`
}

// SchedulerPolicySpec is the desired scheduling behaviour.
//
// +kubebuilder:validation:XValidation:rule="duration(self.maxPauseDuration) > duration(self.interval)",message="maxPauseDuration must be longer than interval, or a paused program could time out before the controller looks at it again"
// +kubebuilder:validation:XValidation:rule="!self.actingTokenDecay.enabled || duration(self.actingTokenDecay.halfLife) >= duration(self.interval)",message="actingTokenDecay.halfLife must be at least interval: the controller cannot observe a faster decay"
// +kubebuilder:validation:XValidation:rule="!has(self.fairness.bound) || duration(self.fairness.bound) == duration('0s') || (duration(self.fairness.bound) >= duration(self.interval) && duration(self.fairness.bound) < duration(self.maxPauseDuration))",message="fairness.bound must be 0s (off), or at least interval and shorter than maxPauseDuration"
type SchedulerPolicySpec struct {
	// mode: Default leaves each pod to its own continuous batching;
	// ProgramAware also places, pauses and resumes programs across pods so
	// an agent's KV cache stays warm between its turns.
	// +kubebuilder:default=Default
	// +optional
	Mode SchedulingMode `json:"mode,omitempty"`

	// interval is how often the controller reads the pods and re-places
	// programs.
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('5m')",message="interval must be between 1s and 5m"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// actingTokenWeight is how much of an acting program's KV cache (its
	// agent is running a tool, not the model) counts against a pod's
	// capacity, from 0 (free) to 1 (as much as a reasoning program's).
	// +kubebuilder:default="1"
	// +optional
	ActingTokenWeight Fraction `json:"actingTokenWeight,omitempty"`

	// bufferTokensPerProgram is the headroom kept per program for the tokens
	// its next step will add.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	BufferTokensPerProgram *int32 `json:"bufferTokensPerProgram,omitempty"`

	// actingTokenDecay lowers the weight of a program's KV cache the longer
	// it has been acting, so long tool calls give way first.
	// +kubebuilder:default={}
	// +optional
	ActingTokenDecay ActingTokenDecay `json:"actingTokenDecay,omitempty"`

	// actingOnHost: on a pod with a host KV tier (the pool's
	// engine.kvHostBlocks), an acting program's KV counts against the pod's
	// capacity only for the share the host tier cannot hold, since the pod
	// copies evicted blocks there and back instead of recomputing them; so
	// fewer programs wait (ProgramAware mode). false counts it all.
	// +kubebuilder:default=true
	// +optional
	ActingOnHost *bool `json:"actingOnHost,omitempty"`

	// deviceOvercommitPercent: on a pod with a host KV tier, the programs
	// placed may be charged up to this percentage of the pod's device KV
	// capacity, the excess bounded by the host tier's room (ProgramAware
	// mode). What runs beyond the device is preempted by the pod's engine,
	// whose evicted blocks spill to the host tier and come back over the
	// host link instead of being recomputed; fewer programs wait paused.
	// 100 turns it off; pods without a host tier are never overcommitted.
	// The default, 400, lets a large host tier (128 GiB a GPU, 2.3× an
	// H100's KV) bound the excess instead of the percentage: at 200 such
	// pools paused programs the tier could hold and did 0.97–0.98× the
	// steps/min of the same pods without placement; at 400 they pause
	// none. With a small tier (25 GiB) the tier's room binds at either
	// value, and the results are the same (see docs/benchmarks.md, issue
	// 19).
	// +kubebuilder:default=400
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=800
	// +optional
	DeviceOvercommitPercent *int32 `json:"deviceOvercommitPercent,omitempty"`

	// maxPauseDuration is the longest a program stays paused; after it the
	// program's requests run wherever they fit.
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="maxPauseDuration must be between 1s and 24h"
	// +optional
	MaxPauseDuration *metav1.Duration `json:"maxPauseDuration,omitempty"`

	// fairness bounds how long a paused program waits while others run
	// (ProgramAware mode).
	// +kubebuilder:default={}
	// +optional
	Fairness Fairness `json:"fairness,omitempty"`

	// kvTransfer moves a program's KV between pods over the pod network,
	// when enabled: a program resumed on, or moved off a draining pod to,
	// a pod other than the one holding its KV has its blocks fetched from
	// there instead of recomputing its context, when that is faster.
	// +kubebuilder:default={}
	// +optional
	KVTransfer KVTransfer `json:"kvTransfer,omitempty"`

	// queue tunes each pod's request queue.
	// +optional
	Queue *QueueSpec `json:"queue,omitempty"`

	// completion holds the defaults a pod applies to requests that leave
	// them unset.
	// +optional
	Completion *CompletionDefaults `json:"completion,omitempty"`
}

// SchedulingMode is how programs are scheduled across pods.
// +kubebuilder:validation:Enum=Default;ProgramAware
type SchedulingMode string

const (
	// SchedulingModeDefault leaves scheduling to each pod.
	SchedulingModeDefault SchedulingMode = "Default"
	// SchedulingModeProgramAware places, pauses and resumes programs across
	// pods.
	SchedulingModeProgramAware SchedulingMode = "ProgramAware"
)

// ActingTokenDecay is an exponential decay of an acting program's weight.
type ActingTokenDecay struct {
	// enabled turns the decay on.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// halfLife is how long an acting program takes to lose half its weight.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="halfLife must be between 1s and 24h"
	// +optional
	HalfLife *metav1.Duration `json:"halfLife,omitempty"`
}

// Fairness is bounded waiting for paused programs.
type Fairness struct {
	// waitAging ages paused programs: for every waitAging a program has
	// waited, it moves one class ahead in resume order (programs with a
	// request waiting and past their first step come first, then new ones,
	// then idle ones). "0s" turns aging off.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="waitAging must be between 0s and 24h"
	// +optional
	WaitAging *metav1.Duration `json:"waitAging,omitempty"`

	// resumeFirstAfter bounds waiting without pausing anyone: within a
	// class, paused programs resume smallest first (the room runs the most
	// programs), so the largest would wait longest; one that has waited
	// longer than resumeFirstAfter resumes before the others of its class.
	// "0s" turns it off.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="resumeFirstAfter must be between 0s and 24h"
	// +optional
	ResumeFirstAfter *metav1.Duration `json:"resumeFirstAfter,omitempty"`

	// bound is time-sliced fairness between programs: a program with a
	// request waiting that has been paused longer than bound is resumed
	// first, and if it fits on no pod, the program that has run longest
	// since its last resume (at least bound) on the pod that then fits it
	// best is paused at its next tool call, never mid-request, to make room.
	// "0s" turns it off.
	// +kubebuilder:default="0s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="bound must be between 0s and 24h"
	// +optional
	Bound *metav1.Duration `json:"bound,omitempty"`

	// cacheAffinityWait is how long a paused program whose KV a pod's host
	// tier holds waits for room on that pod rather than being resumed on
	// another pod, where its whole context would be recomputed; an overdue
	// program (bound) makes room on that pod first. "0s" turns it off:
	// programs resume wherever they fit best.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="cacheAffinityWait must be between 0s and 24h"
	// +optional
	CacheAffinityWait *metav1.Duration `json:"cacheAffinityWait,omitempty"`
}

// KVTransfer is how the controller weighs moving a program's KV between
// pods against recomputing it.
type KVTransfer struct {
	// enabled turns transfers on. Off by default: on the simulated agent
	// scenarios they cut the tokens recomputed by a quarter but not the
	// steps/min, and lengthened the slowest steps on two of three
	// (docs/benchmarks.md).
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// bandwidthGbps is what one transfer between two pods gets of the pod
	// network, in Gb/s: the default is a node's two 200 Gb/s NICs. "0"
	// turns transfers off like enabled: false.
	// +kubebuilder:default=400
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	BandwidthGbps *int32 `json:"bandwidthGbps,omitempty"`

	// prefillTokensPerSecond is how fast a pod recomputes a context (its
	// prefill throughput): a transfer is asked for when it takes less than
	// recomputing, and a program waiting for room on the pod holding its
	// KV (fairness.cacheAffinityWait) moves once the transfer takes less
	// than the wait left.
	// +kubebuilder:default=20000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000000
	// +optional
	PrefillTokensPerSecond *int32 `json:"prefillTokensPerSecond,omitempty"`
}

// QueueSpec tunes a pod's request queue.
type QueueSpec struct {
	// agingRate is how many priority levels a waiting request gains per
	// second, so low-priority requests are not starved; "0" turns aging
	// off. A decimal number such as "0.5".
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,6}([.][0-9]{1,6})?$')",message="agingRate must be a non-negative decimal number such as \"0.5\""
	// +optional
	AgingRate string `json:"agingRate,omitempty"`
}

// CompletionDefaults are request defaults a pod applies.
type CompletionDefaults struct {
	// defaultMaxTokens caps the tokens generated for a request that sets no
	// max_tokens.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	DefaultMaxTokens *int32 `json:"defaultMaxTokens,omitempty"`

	// stop strings end generation for requests that set none.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	// +optional
	Stop []string `json:"stop,omitempty"`

	// maxResponseChars ends generation once a response is this many
	// characters long.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=67108864
	// +optional
	MaxResponseChars *int32 `json:"maxResponseChars,omitempty"`
}

// MaxPolicyPools bounds SchedulerPolicyStatus.Pools.
const MaxPolicyPools = 256

// SchedulerPolicyStatus is the observed state of a SchedulerPolicy.
type SchedulerPolicyStatus struct {
	// observedGeneration is the generation of the spec the controller last
	// acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Accepted.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// pools are the names of the InferencePools that use this policy, sorted;
	// at most 256 are listed while poolCount counts them all.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Pools []string `json:"pools,omitempty"`

	// poolCount is the number of InferencePools that use this policy,
	// always written, so zero shows as 0 in the print columns.
	// +kubebuilder:default=0
	// +optional
	PoolCount int32 `json:"poolCount"`
}

func init() {
	SchemeBuilder.Register(&SchedulerPolicy{}, &SchedulerPolicyList{})
}
