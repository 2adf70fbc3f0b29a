package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// InferencePoolReconciler runs each InferencePool as a Deployment of
// runtime pods, a Service and a PodDisruptionBudget, plus the Secret that
// holds the pods' control-API token.
type InferencePoolReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly. Secrets are read with
	// it so the manager never caches (or needs to list) every Secret.
	APIReader client.Reader
	// Recorder records events on pools.
	Recorder events.EventRecorder
	// DefaultImage is the runtime image of pools that set none.
	DefaultImage string
	// Addresses maps a pod to its control address, where a fetching pod
	// serves its download's progress (nil: PodIPAddresses).
	Addresses PodAddresses
	// HTTPClient reads the progress (nil: one that follows no redirect;
	// each read is bounded by fetchProgressTimeout).
	HTTPClient *http.Client
	// FetchProgressInterval is how often a pool whose pods download its
	// model is reconciled to refresh their progress (default 10s).
	FetchProgressInterval time.Duration
}

// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=inferencepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=inferencepools/status,verbs=get;patch
// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=inferencepools/finalizers,verbs=update
// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=schedulerpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one pool's children to its spec and writes its status.
func (r *InferencePoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &servingv1alpha1.InferencePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		// Garbage collection removes the children through their owner
		// references.
		return ctrl.Result{}, nil
	}

	before := pool.DeepCopy()
	obs, pending, err := r.reconcile(ctx, pool)
	setPoolStatus(pool, obs)
	if !equality.Semantic.DeepEqual(before.Status, pool.Status) {
		// A merge patch of only what changed: the fleet loop writes the
		// capacity fields of the same status concurrently.
		if perr := r.Client.Status().Patch(ctx, pool, client.MergeFrom(before)); perr != nil {
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("write status: %w", perr))
		}
	}
	pending = append(pending, conditionEvents(before.Status.Conditions, pool.Status.Conditions)...)
	for _, e := range pending {
		r.Recorder.Eventf(pool, nil, e.eventType, e.reason, e.action, "%s", e.message)
	}
	if err == nil && obs.modelReady.Reason == servingv1alpha1.ReasonModelFetching {
		// Nothing about the pods changes while they download: look again.
		interval := r.FetchProgressInterval
		if interval <= 0 {
			interval = defaultFetchProgressInterval
		}
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	return ctrl.Result{}, err
}

// reconcile applies the children and returns what it observed, the events
// to record once the status is written, and the error to retry on.
func (r *InferencePoolReconciler) reconcile(ctx context.Context, pool *servingv1alpha1.InferencePool) (observation, []pendingEvent, error) {
	var obs observation
	var pending []pendingEvent

	policy, cond, err := r.resolvePolicy(ctx, pool)
	if err != nil {
		obs.applyErr = err
		return obs, nil, err
	}
	obs.policy = cond

	created, err := r.ensureControlSecret(ctx, pool)
	if err != nil {
		obs.applyErr = err
		return obs, nil, err
	}
	if created {
		pending = append(pending, pendingEvent{corev1.EventTypeNormal, servingv1alpha1.ReasonControlSecretCreated, "Create",
			fmt.Sprintf("created Secret %s with the control-API token", ControlSecretName(pool.Name))})
	}

	deploy, err := desiredDeployment(pool, podTemplate(pool, policy, r.DefaultImage))
	if err != nil {
		obs.applyErr = err
		return obs, pending, err
	}
	if err := r.Client.Apply(ctx, deploy, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		obs.applyErr = fmt.Errorf("apply Deployment %s: %w", pool.Name, err)
		return obs, pending, obs.applyErr
	}
	if obs.deployment, err = fromApplied[appsv1.Deployment](deploy); err != nil {
		obs.applyErr = fmt.Errorf("read applied Deployment %s: %w", pool.Name, err)
		return obs, pending, obs.applyErr
	}
	if err := r.Client.Apply(ctx, desiredService(pool), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		obs.applyErr = fmt.Errorf("apply Service %s: %w", pool.Name, err)
		return obs, pending, obs.applyErr
	}
	if err := r.Client.Apply(ctx, desiredPodDisruptionBudget(pool), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		obs.applyErr = fmt.Errorf("apply PodDisruptionBudget %s: %w", pool.Name, err)
		return obs, pending, obs.applyErr
	}
	if pool.Spec.Model.Source.URL != "" {
		pods := &corev1.PodList{}
		if err := r.Client.List(ctx, pods, client.InNamespace(pool.Namespace), client.MatchingLabels(podSelector(pool.Name))); err != nil {
			return obs, pending, fmt.Errorf("list pods: %w", err)
		}
		progress := r.fetchProgress(ctx, pods.Items)
		obs.modelReady = modelReadyCondition(pods.Items, progress)
		obs.model = modelStatus(pods.Items, progress)
	}
	log.FromContext(ctx).V(1).Info("applied children", "templateHash", obs.deployment.Spec.Template.Annotations[AnnotationTemplateHash])
	return obs, pending, nil
}

// resolvePolicy finds the pool's SchedulerPolicy. A missing policy is not
// an error: the pool runs with the runtime's defaults, says so in its
// PolicyResolved condition, and is reconciled again when the policy
// appears (see SetupWithManager).
func (r *InferencePoolReconciler) resolvePolicy(ctx context.Context, pool *servingv1alpha1.InferencePool) (*servingv1alpha1.SchedulerPolicy, metav1.Condition, error) {
	cond := metav1.Condition{Type: servingv1alpha1.PoolPolicyResolved}
	ref := pool.Spec.SchedulerPolicyRef
	if ref == nil {
		cond.Status, cond.Reason = metav1.ConditionTrue, servingv1alpha1.ReasonNoPolicyReference
		cond.Message = "no schedulerPolicyRef: the pods run with the runtime's defaults"
		return nil, cond, nil
	}
	policy := &servingv1alpha1.SchedulerPolicy{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: ref.Name}, policy)
	switch {
	case apierrors.IsNotFound(err):
		cond.Status, cond.Reason = metav1.ConditionFalse, servingv1alpha1.ReasonPolicyNotFound
		cond.Message = fmt.Sprintf("SchedulerPolicy %q not found in namespace %q: the pods run with the runtime's defaults until it is created", ref.Name, pool.Namespace)
		return nil, cond, nil
	case err != nil:
		return nil, cond, fmt.Errorf("get SchedulerPolicy %s: %w", ref.Name, err)
	}
	if _, err := convertPolicy(&policy.Spec); err != nil {
		// The fleet loop cannot use it either: say so, and run the pods as
		// without a policy, as the loop does.
		cond.Status, cond.Reason = metav1.ConditionFalse, servingv1alpha1.ReasonPolicyInvalid
		cond.Message = fmt.Sprintf("SchedulerPolicy %q cannot be used (%v): the pods run with the runtime's defaults", ref.Name, err)
		return nil, cond, nil
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, servingv1alpha1.ReasonPolicyFound
	cond.Message = fmt.Sprintf("using SchedulerPolicy %q", ref.Name)
	return policy, cond, nil
}

// SetupWithManager registers the reconciler and its watches: the pool
// itself (spec changes only: the fleet loop's status writes must not
// trigger reconciles), its children, and the SchedulerPolicies pools name.
func (r *InferencePoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&servingv1alpha1.InferencePool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// Pods with a fetch-model init container move their pool's
		// ModelReady condition; other pods' changes are the fleet loop's.
		Watches(&corev1.Pod{},
			handler.EnqueueRequestsFromMapFunc(poolOfPod),
			builder.WithPredicates(predicate.NewPredicateFuncs(hasFetchContainer))).
		Watches(&servingv1alpha1.SchedulerPolicy{},
			handler.EnqueueRequestsFromMapFunc(r.poolsUsingPolicy),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("inferencepool").
		Complete(r)
}

// poolOfPod maps a runtime pod to its pool by the pool label.
func poolOfPod(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[LabelPool]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

func hasFetchContainer(obj client.Object) bool {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return false
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == fetchContainerName {
			return true
		}
	}
	return false
}

// poolsUsingPolicy maps a SchedulerPolicy to the pools that name it, by
// the IndexPoolPolicy field index.
func (r *InferencePoolReconciler) poolsUsingPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	pools := &servingv1alpha1.InferencePoolList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(obj.GetNamespace()), client.MatchingFields{IndexPoolPolicy: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list pools of SchedulerPolicy", "schedulerPolicy", client.ObjectKeyFromObject(obj))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pools.Items))
	for i := range pools.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pools.Items[i])})
	}
	return reqs
}
