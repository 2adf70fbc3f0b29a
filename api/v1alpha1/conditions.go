package v1alpha1

// Condition types of InferencePool.
const (
	// PoolAvailable is True while at least one runtime pod is ready and the
	// Deployment has its minimum availability.
	PoolAvailable = "Available"
	// PoolProgressing is True while pods are being created, replaced or
	// scaled; False once the rollout is complete or has stalled.
	PoolProgressing = "Progressing"
	// PoolDegraded is True when the controller cannot bring the pool to its
	// spec: its children cannot be applied, or the rollout has stalled.
	PoolDegraded = "Degraded"
	// PoolPolicyResolved is True when the pool has no schedulerPolicyRef or
	// the policy it names exists; False while the policy is missing (the
	// pods then run with the runtime's defaults).
	PoolPolicyResolved = "PolicyResolved"
	// PoolModelReady, on pools whose model has a source.url, is True once
	// every pod's init container has fetched the model; False while one
	// fetches or after one failed (the message says why).
	PoolModelReady = "ModelReady"
)

// Condition types of SchedulerPolicy.
const (
	// PolicyAccepted is True once the controller has read the policy's
	// current generation and serves it to the pools that use it.
	PolicyAccepted = "Accepted"
)

// Reasons of conditions and events. Each is a CamelCase constant so
// alerts and scripts can match on it.
const (
	// ReasonMinimumReplicasAvailable: Available=True.
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// ReasonMinimumReplicasUnavailable: Available=False, pods not ready yet.
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// ReasonScaledToZero: Available=False because spec.replicas is 0.
	ReasonScaledToZero = "ScaledToZero"

	// ReasonRollingOut: Progressing=True while pods run an older template.
	ReasonRollingOut = "RollingOut"
	// ReasonScaling: Progressing=True while the pod count differs from
	// spec.replicas.
	ReasonScaling = "Scaling"
	// ReasonPodsNotReady: Progressing=True while every pod is current but
	// some are not ready yet.
	ReasonPodsNotReady = "PodsNotReady"
	// ReasonRolloutComplete: Progressing=False, every pod current and ready.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonProgressDeadlineExceeded: the Deployment stopped progressing.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"

	// ReasonAsExpected: Degraded=False.
	ReasonAsExpected = "AsExpected"
	// ReasonApplyFailed: Degraded=True, a child object could not be applied.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonReplicaFailure: Degraded=True, the Deployment cannot create pods
	// (quota, admission, a missing volume claim...).
	ReasonReplicaFailure = "ReplicaFailure"

	// ReasonNoPolicyReference: PolicyResolved=True, the pool names no policy.
	ReasonNoPolicyReference = "NoPolicyReference"
	// ReasonPolicyFound: PolicyResolved=True, the named policy exists.
	ReasonPolicyFound = "PolicyFound"
	// ReasonPolicyNotFound: PolicyResolved=False, the named policy does not
	// exist in the pool's namespace.
	ReasonPolicyNotFound = "PolicyNotFound"
	// ReasonPolicyInvalid: PolicyResolved=False, the named policy exists but
	// cannot be used (it got past the API's validation, e.g. written before
	// a rule existed): the pool runs with the runtime's defaults.
	ReasonPolicyInvalid = "PolicyInvalid"

	// ReasonControlSecretCreated: event, the pool's control-API token Secret
	// was created.
	ReasonControlSecretCreated = "ControlSecretCreated"

	// ReasonModelFetched: ModelReady=True, every pod has the model.
	ReasonModelFetched = "ModelFetched"
	// ReasonModelFetching: ModelReady=False while pods fetch the model.
	ReasonModelFetching = "ModelFetching"
	// ReasonModelFetchFailed: ModelReady=False, a pod's fetch failed (a
	// missing file, a refused token, a full volume...); it retries with
	// the kubelet's back-off.
	ReasonModelFetchFailed = "ModelFetchFailed"
	// ReasonNoPods: ModelReady=Unknown while the pool has no pods.
	ReasonNoPods = "NoPods"

	// ReasonAccepted: Accepted=True.
	ReasonAccepted = "Accepted"
	// ReasonInvalid: Accepted=False, the policy cannot be used; the pools
	// naming it run with the defaults.
	ReasonInvalid = "Invalid"
)
