package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// unusablePolicy got past the API server (written before a rule existed)
// but cannot be converted: decay on with a zero half-life.
func unusablePolicy() *servingv1alpha1.SchedulerPolicy {
	return &servingv1alpha1.SchedulerPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "ns", Generation: 3},
		Spec: servingv1alpha1.SchedulerPolicySpec{
			Mode:             servingv1alpha1.SchedulingModeProgramAware,
			ActingTokenDecay: servingv1alpha1.ActingTokenDecay{Enabled: true, HalfLife: &metav1.Duration{Duration: 0}},
		},
	}
}

// A policy the fleet loop cannot use is not Accepted: its status says why,
// as the loop falls back to the defaults.
func TestPolicyThatFailsConversionIsNotAccepted(t *testing.T) {
	p := unusablePolicy()
	setPolicyStatus(p, nil)
	c := meta.FindStatusCondition(p.Status.Conditions, servingv1alpha1.PolicyAccepted)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != servingv1alpha1.ReasonInvalid || c.ObservedGeneration != 3 {
		t.Fatalf("Accepted: %+v; want False, %s", c, servingv1alpha1.ReasonInvalid)
	}
	good := unusablePolicy()
	good.Spec.ActingTokenDecay.HalfLife = &metav1.Duration{Duration: time.Minute}
	setPolicyStatus(good, nil)
	if c := meta.FindStatusCondition(good.Status.Conditions, servingv1alpha1.PolicyAccepted); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("a usable policy: %+v", c)
	}
}

// A pool naming a policy that cannot be used does not report it resolved,
// and its pods get no flags from it.
func TestPoolNamingAnUnusablePolicyIsNotResolved(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := servingv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := &InferencePoolReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(unusablePolicy()).Build()}
	pool := &servingv1alpha1.InferencePool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns"}}
	pool.Spec.SchedulerPolicyRef = &servingv1alpha1.SchedulerPolicyReference{Name: "old"}
	policy, cond, err := r.resolvePolicy(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if policy != nil || cond.Status != metav1.ConditionFalse || cond.Reason != servingv1alpha1.ReasonPolicyInvalid {
		t.Fatalf("policy %v, PolicyResolved %+v; want no policy and False, %s", policy != nil, cond, servingv1alpha1.ReasonPolicyInvalid)
	}
}
