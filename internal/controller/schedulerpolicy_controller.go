package controller

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// SchedulerPolicyReconciler keeps each SchedulerPolicy's status: Accepted,
// and the pools that use it.
type SchedulerPolicyReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
}

// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=schedulerpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=schedulerpolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=inferencepools,verbs=get;list;watch

// Reconcile writes one policy's status.
func (r *SchedulerPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	policy := &servingv1alpha1.SchedulerPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, policy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := policy.DeepCopy()

	pools := &servingv1alpha1.InferencePoolList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(policy.Namespace), client.MatchingFields{IndexPoolPolicy: policy.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list pools of SchedulerPolicy %s: %w", policy.Name, err)
	}
	setPolicyStatus(policy, pools.Items)

	if equality.Semantic.DeepEqual(before.Status, policy.Status) {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Status().Patch(ctx, policy, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("write status: %w", err)
	}
	return ctrl.Result{}, nil
}

// setPolicyStatus writes the pools using a policy and its Accepted
// condition. The API server validates the spec (schema and CEL), but an
// object written before a rule existed can still fail conversion: it is
// then Accepted=False, since the fleet loop runs its pools without it.
func setPolicyStatus(policy *servingv1alpha1.SchedulerPolicy, pools []servingv1alpha1.InferencePool) {
	names := make([]string, 0, len(pools))
	for i := range pools {
		names = append(names, pools[i].Name)
	}
	slices.Sort(names)
	st := &policy.Status
	st.PoolCount = int32(len(names))
	st.Pools = names[:min(len(names), servingv1alpha1.MaxPolicyPools)]
	if len(st.Pools) == 0 {
		st.Pools = nil
	}
	st.ObservedGeneration = policy.Generation
	cond := metav1.Condition{
		Type:               servingv1alpha1.PolicyAccepted,
		Status:             metav1.ConditionTrue,
		Reason:             servingv1alpha1.ReasonAccepted,
		Message:            fmt.Sprintf("%s mode, every %s", policy.Spec.Mode, durationString(policy.Spec.Interval)),
		ObservedGeneration: policy.Generation,
	}
	if _, err := convertPolicy(&policy.Spec); err != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, servingv1alpha1.ReasonInvalid
		cond.Message = fmt.Sprintf("cannot be used: %v; pools naming it run with the defaults", err)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

func durationString(d *metav1.Duration) string {
	if d == nil {
		return "default interval"
	}
	return d.Duration.String()
}

// SetupWithManager registers the reconciler. A pool event requeues the
// policies it named before and after the event, so a policy's pool list
// follows pools that switch policies or go away.
func (r *SchedulerPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&servingv1alpha1.SchedulerPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&servingv1alpha1.InferencePool{},
			handler.EnqueueRequestsFromMapFunc(policyOfPool),
			builder.WithPredicates(policyRefChanged())).
		Named("schedulerpolicy").
		Complete(r)
}

func policyOfPool(_ context.Context, obj client.Object) []reconcile.Request {
	names := poolPolicyName(obj)
	if len(names) == 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: names[0]}}}
}

// policyRefChanged passes pool creations and deletions and the updates
// that change which policy a pool names.
func policyRefChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !slices.Equal(poolPolicyName(e.ObjectOld), poolPolicyName(e.ObjectNew))
		},
	}
}
