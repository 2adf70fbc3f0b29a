// Package builders holds builders of kvpilot API objects for tests, in the
// style of kueue's: MakeInferencePool("p", ns).Replicas(2).Policy("fast").Obj().
// Each builder starts from the smallest valid object and every method
// returns the builder, so a test states only what it is about.
package builders

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// InferencePoolWrapper builds an InferencePool.
type InferencePoolWrapper struct{ servingv1alpha1.InferencePool }

// MakeInferencePool returns a one-replica CPU pool serving the built-in tiny
// model.
func MakeInferencePool(name, namespace string) *InferencePoolWrapper {
	return &InferencePoolWrapper{servingv1alpha1.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: servingv1alpha1.InferencePoolSpec{
			Replicas: ptr.To[int32](1),
			Model: servingv1alpha1.ModelSpec{
				Name:   "tiny",
				Source: servingv1alpha1.ModelSource{Builtin: servingv1alpha1.BuiltinModelTiny},
			},
		},
	}}
}

// Obj returns the built pool.
func (w *InferencePoolWrapper) Obj() *servingv1alpha1.InferencePool { return &w.InferencePool }

// Replicas sets spec.replicas.
func (w *InferencePoolWrapper) Replicas(n int32) *InferencePoolWrapper {
	w.Spec.Replicas = ptr.To(n)
	return w
}

// ServedModelName sets spec.model.name.
func (w *InferencePoolWrapper) ServedModelName(name string) *InferencePoolWrapper {
	w.Spec.Model.Name = name
	return w
}

// ModelSource replaces spec.model.source.
func (w *InferencePoolWrapper) ModelSource(src servingv1alpha1.ModelSource) *InferencePoolWrapper {
	w.Spec.Model.Source = src
	return w
}

// PVCModel serves the GGUF file at path in the claim.
func (w *InferencePoolWrapper) PVCModel(claim, path string) *InferencePoolWrapper {
	return w.ModelSource(servingv1alpha1.ModelSource{PersistentVolumeClaim: &servingv1alpha1.PVCModelSource{
		ClaimName: claim, Path: servingv1alpha1.RelativePath(path),
	}})
}

// URLModel serves the model fetched from url (hf://, s3://, https://)
// with the fetch settings f (nil: none).
func (w *InferencePoolWrapper) URLModel(url string, f *servingv1alpha1.ModelFetch) *InferencePoolWrapper {
	w.Spec.Model.Fetch = f
	return w.ModelSource(servingv1alpha1.ModelSource{URL: url})
}

// HostPathModel serves the GGUF file at path on the node.
func (w *InferencePoolWrapper) HostPathModel(path string) *InferencePoolWrapper {
	return w.ModelSource(servingv1alpha1.ModelSource{HostPath: &servingv1alpha1.HostPathModelSource{Path: path}})
}

// ImageModel serves the GGUF file at path in an image volume.
func (w *InferencePoolWrapper) ImageModel(reference, path string) *InferencePoolWrapper {
	return w.ModelSource(servingv1alpha1.ModelSource{Image: &servingv1alpha1.ImageModelSource{
		Reference: reference, Path: servingv1alpha1.RelativePath(path),
	}})
}

// Sim selects the Sim executor with an accelerator and model profile.
func (w *InferencePoolWrapper) Sim(accelerator, model string) *InferencePoolWrapper {
	w.Spec.Executor = servingv1alpha1.ExecutorSpec{
		Type: servingv1alpha1.ExecutorSim,
		Sim:  &servingv1alpha1.SimExecutorSpec{Accelerator: accelerator, Model: model},
	}
	return w
}

// Executor sets spec.executor.
func (w *InferencePoolWrapper) Executor(e servingv1alpha1.ExecutorSpec) *InferencePoolWrapper {
	w.Spec.Executor = e
	return w
}

// Accelerators asks for n GPUs per pod, of a product when product is set.
func (w *InferencePoolWrapper) Accelerators(n int32, product string) *InferencePoolWrapper {
	w.resources().Accelerators = ptr.To(n)
	w.resources().AcceleratorProduct = product
	return w
}

// CPUMemory sets the per-pod CPU and memory requests.
func (w *InferencePoolWrapper) CPUMemory(cpu, memory string) *InferencePoolWrapper {
	w.resources().CPU = ptr.To(resource.MustParse(cpu))
	w.resources().Memory = ptr.To(resource.MustParse(memory))
	return w
}

func (w *InferencePoolWrapper) resources() *servingv1alpha1.PodResources {
	if w.Spec.Resources == nil {
		w.Spec.Resources = &servingv1alpha1.PodResources{}
	}
	return w.Spec.Resources
}

// Engine replaces spec.engine.
func (w *InferencePoolWrapper) Engine(e servingv1alpha1.EngineSpec) *InferencePoolWrapper {
	w.Spec.Engine = &e
	return w
}

// MaxNumSeqs sets spec.engine.maxNumSeqs.
func (w *InferencePoolWrapper) MaxNumSeqs(n int32) *InferencePoolWrapper {
	w.engine().MaxNumSeqs = ptr.To(n)
	return w
}

// KVCacheMemory sets spec.engine.kvCacheMemory.
func (w *InferencePoolWrapper) KVCacheMemory(q string) *InferencePoolWrapper {
	w.engine().KVCacheMemory = ptr.To(resource.MustParse(q))
	return w
}

// DrainTimeout sets spec.engine.drainTimeout.
func (w *InferencePoolWrapper) DrainTimeout(d time.Duration) *InferencePoolWrapper {
	w.engine().DrainTimeout = &metav1.Duration{Duration: d}
	return w
}

func (w *InferencePoolWrapper) engine() *servingv1alpha1.EngineSpec {
	if w.Spec.Engine == nil {
		w.Spec.Engine = &servingv1alpha1.EngineSpec{}
	}
	return w.Spec.Engine
}

// Policy sets spec.schedulerPolicyRef.
func (w *InferencePoolWrapper) Policy(name string) *InferencePoolWrapper {
	w.Spec.SchedulerPolicyRef = &servingv1alpha1.SchedulerPolicyReference{Name: name}
	return w
}

// APIKey sets spec.apiKeySecretRef.
func (w *InferencePoolWrapper) APIKey(secret, key string) *InferencePoolWrapper {
	w.Spec.APIKeySecretRef = &servingv1alpha1.SecretKeyReference{Name: secret, Key: key}
	return w
}

// MaxProgramsPerKey sets spec.maxProgramsPerKey.
func (w *InferencePoolWrapper) MaxProgramsPerKey(n int32) *InferencePoolWrapper {
	w.Spec.MaxProgramsPerKey = &n
	return w
}

// EnablePromptTokensDetails sets spec.enablePromptTokensDetails.
func (w *InferencePoolWrapper) EnablePromptTokensDetails() *InferencePoolWrapper {
	w.Spec.EnablePromptTokensDetails = true
	return w
}

// SharePrefixCacheAcrossKeys sets spec.sharePrefixCacheAcrossKeys.
func (w *InferencePoolWrapper) SharePrefixCacheAcrossKeys() *InferencePoolWrapper {
	w.Spec.SharePrefixCacheAcrossKeys = true
	return w
}

// Image sets spec.image.
func (w *InferencePoolWrapper) Image(image string) *InferencePoolWrapper {
	w.Spec.Image = image
	return w
}

// Service sets spec.service.
func (w *InferencePoolWrapper) Service(t corev1.ServiceType, port int32) *InferencePoolWrapper {
	w.Spec.Service = servingv1alpha1.ServiceSpec{Type: t, Port: port}
	return w
}

// NodeSelector adds a node selector label.
func (w *InferencePoolWrapper) NodeSelector(key, value string) *InferencePoolWrapper {
	if w.Spec.NodeSelector == nil {
		w.Spec.NodeSelector = map[string]string{}
	}
	w.Spec.NodeSelector[key] = value
	return w
}

// SchedulerPolicyWrapper builds a SchedulerPolicy.
type SchedulerPolicyWrapper struct {
	servingv1alpha1.SchedulerPolicy
}

// MakeSchedulerPolicy returns a policy that sets nothing, so the API
// server's defaults apply.
func MakeSchedulerPolicy(name, namespace string) *SchedulerPolicyWrapper {
	return &SchedulerPolicyWrapper{servingv1alpha1.SchedulerPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
	}}
}

// Obj returns the built policy.
func (w *SchedulerPolicyWrapper) Obj() *servingv1alpha1.SchedulerPolicy { return &w.SchedulerPolicy }

// Mode sets spec.mode.
func (w *SchedulerPolicyWrapper) Mode(m servingv1alpha1.SchedulingMode) *SchedulerPolicyWrapper {
	w.Spec.Mode = m
	return w
}

// Interval sets spec.interval.
func (w *SchedulerPolicyWrapper) Interval(d time.Duration) *SchedulerPolicyWrapper {
	w.Spec.Interval = &metav1.Duration{Duration: d}
	return w
}

// MaxPauseDuration sets spec.maxPauseDuration.
func (w *SchedulerPolicyWrapper) MaxPauseDuration(d time.Duration) *SchedulerPolicyWrapper {
	w.Spec.MaxPauseDuration = &metav1.Duration{Duration: d}
	return w
}

// Fairness sets spec.fairness: wait aging and the fairness bound.
func (w *SchedulerPolicyWrapper) Fairness(waitAging, bound time.Duration) *SchedulerPolicyWrapper {
	w.Spec.Fairness = servingv1alpha1.Fairness{
		WaitAging: &metav1.Duration{Duration: waitAging}, Bound: &metav1.Duration{Duration: bound},
	}
	return w
}

// ActingTokenWeight sets spec.actingTokenWeight.
func (w *SchedulerPolicyWrapper) ActingTokenWeight(f string) *SchedulerPolicyWrapper {
	w.Spec.ActingTokenWeight = servingv1alpha1.Fraction(f)
	return w
}

// AgingRate sets spec.queue.agingRate.
func (w *SchedulerPolicyWrapper) AgingRate(rate string) *SchedulerPolicyWrapper {
	w.Spec.Queue = &servingv1alpha1.QueueSpec{AgingRate: rate}
	return w
}

// DefaultMaxTokens sets spec.completion.defaultMaxTokens.
func (w *SchedulerPolicyWrapper) DefaultMaxTokens(n int32) *SchedulerPolicyWrapper {
	w.completion().DefaultMaxTokens = ptr.To(n)
	return w
}

// Stop sets spec.completion.stop.
func (w *SchedulerPolicyWrapper) Stop(stop ...string) *SchedulerPolicyWrapper {
	w.completion().Stop = stop
	return w
}

// MaxResponseChars sets spec.completion.maxResponseChars.
func (w *SchedulerPolicyWrapper) MaxResponseChars(n int32) *SchedulerPolicyWrapper {
	w.completion().MaxResponseChars = ptr.To(n)
	return w
}

func (w *SchedulerPolicyWrapper) completion() *servingv1alpha1.CompletionDefaults {
	if w.Spec.Completion == nil {
		w.Spec.Completion = &servingv1alpha1.CompletionDefaults{}
	}
	return w.Spec.Completion
}

// DeploymentRolledOut sets a Deployment's status as the Deployment
// controller would once every replica runs the current template and is
// ready: envtest runs no built-in controllers, so tests play their part.
func DeploymentRolledOut(d *appsv1.Deployment) {
	n := ptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            n,
		UpdatedReplicas:     n,
		ReadyReplicas:       n,
		AvailableReplicas:   n,
		UnavailableReplicas: 0,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		},
	}
}

// DeploymentStalled sets a Deployment's status as the Deployment controller
// would once its rollout passed the progress deadline with no pod ready.
func DeploymentStalled(d *appsv1.Deployment) {
	n := ptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            n,
		UpdatedReplicas:     n,
		UnavailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
				Message:        "ReplicaSet has timed out progressing.",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		},
	}
}
