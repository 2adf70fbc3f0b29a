package controller

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/util/testing/builders"
)

type condSummary struct{ Type, Status, Reason string }

func summarize(conds []metav1.Condition) []condSummary {
	out := make([]condSummary, 0, len(conds))
	for _, c := range conds {
		out = append(out, condSummary{c.Type, string(c.Status), c.Reason})
	}
	return out
}

func TestSetPoolStatus(t *testing.T) {
	policyFound := metav1.Condition{Type: servingv1alpha1.PoolPolicyResolved, Status: metav1.ConditionTrue, Reason: servingv1alpha1.ReasonPolicyFound}
	deployment := func(replicas int32, mutate func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		d.Generation = 2
		d.Spec.Replicas = &replicas
		mutate(d)
		return d
	}
	cases := map[string]struct {
		replicas int32
		obs      observation
		want     []condSummary
	}{
		"rolled out": {
			replicas: 2,
			obs:      observation{policy: policyFound, deployment: deployment(2, builders.DeploymentRolledOut)},
			want: []condSummary{
				{"PolicyResolved", "True", "PolicyFound"},
				{"Available", "True", "MinimumReplicasAvailable"},
				{"Progressing", "False", "RolloutComplete"},
				{"Degraded", "False", "AsExpected"},
			},
		},
		"new pool, nothing ready": {
			replicas: 2,
			obs:      observation{policy: policyFound, deployment: deployment(2, func(*appsv1.Deployment) {})},
			want: []condSummary{
				{"PolicyResolved", "True", "PolicyFound"},
				{"Available", "False", "MinimumReplicasUnavailable"},
				{"Progressing", "True", "RollingOut"},
				{"Degraded", "False", "AsExpected"},
			},
		},
		"stalled": {
			replicas: 1,
			obs:      observation{policy: policyFound, deployment: deployment(1, builders.DeploymentStalled)},
			want: []condSummary{
				{"PolicyResolved", "True", "PolicyFound"},
				{"Available", "False", "MinimumReplicasUnavailable"},
				{"Progressing", "False", "ProgressDeadlineExceeded"},
				{"Degraded", "True", "ProgressDeadlineExceeded"},
			},
		},
		"scaled to zero": {
			replicas: 0,
			obs:      observation{policy: policyFound, deployment: deployment(0, builders.DeploymentRolledOut)},
			want: []condSummary{
				{"PolicyResolved", "True", "PolicyFound"},
				{"Available", "False", "ScaledToZero"},
				{"Progressing", "False", "RolloutComplete"},
				{"Degraded", "False", "AsExpected"},
			},
		},
		"scaling up": {
			replicas: 3,
			obs: observation{policy: policyFound, deployment: deployment(3, func(d *appsv1.Deployment) {
				builders.DeploymentRolledOut(d)
				d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas = 2, 3, 2
			})},
			want: []condSummary{
				{"PolicyResolved", "True", "PolicyFound"},
				{"Available", "True", "MinimumReplicasAvailable"},
				{"Progressing", "True", "Scaling"},
				{"Degraded", "False", "AsExpected"},
			},
		},
		"apply failed": {
			replicas: 1,
			obs:      observation{policy: policyFound, applyErr: errors.New("apply Deployment p: forbidden")},
			want: []condSummary{
				{"PolicyResolved", "True", "PolicyFound"},
				{"Degraded", "True", "ApplyFailed"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pool := builders.MakeInferencePool("p", "ns").Replicas(tc.replicas).Obj()
			pool.Generation = 5
			setPoolStatus(pool, tc.obs)
			if diff := cmp.Diff(tc.want, summarize(pool.Status.Conditions)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			for _, c := range pool.Status.Conditions {
				if c.ObservedGeneration != 5 {
					t.Errorf("%s: observedGeneration %d, want 5", c.Type, c.ObservedGeneration)
				}
			}
			if pool.Status.ObservedGeneration != 5 || pool.Status.Selector != LabelPool+"=p" {
				t.Errorf("status header: %+v", pool.Status)
			}

			// The same observation again changes nothing: no status write.
			again := pool.DeepCopy()
			setPoolStatus(again, tc.obs)
			if diff := cmp.Diff(pool.Status, again.Status); diff != "" {
				t.Errorf("second identical observation changed the status (-first +second):\n%s", diff)
			}
		})
	}
}

func TestConditionEvents(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason}
	}
	before := []metav1.Condition{
		cond("Available", metav1.ConditionFalse, "MinimumReplicasUnavailable"),
		cond("PolicyResolved", metav1.ConditionTrue, "PolicyFound"),
		cond("Degraded", metav1.ConditionFalse, "AsExpected"),
	}
	after := []metav1.Condition{
		cond("Available", metav1.ConditionTrue, "MinimumReplicasAvailable"),
		cond("PolicyResolved", metav1.ConditionFalse, "PolicyNotFound"),
		cond("Degraded", metav1.ConditionFalse, "AsExpected"),
		cond("Progressing", metav1.ConditionTrue, "RollingOut"),
	}
	want := []pendingEvent{
		{eventType: "Normal", reason: "MinimumReplicasAvailable", action: "Available", message: "MinimumReplicasAvailable"},
		{eventType: "Warning", reason: "PolicyNotFound", action: "PolicyResolved", message: "PolicyNotFound"},
	}
	if diff := cmp.Diff(want, conditionEvents(before, after), cmp.AllowUnexported(pendingEvent{})); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := conditionEvents(after, after); len(got) != 0 {
		t.Errorf("a steady pool records no events, got %+v", got)
	}
}

func TestSetPolicyStatus(t *testing.T) {
	policy := builders.MakeSchedulerPolicy("pol", "ns").Mode(servingv1alpha1.SchedulingModeProgramAware).Obj()
	policy.Generation = 3
	var pools []servingv1alpha1.InferencePool
	for _, n := range []string{"c", "a", "b"} {
		pools = append(pools, *builders.MakeInferencePool(n, "ns").Policy("pol").Obj())
	}
	setPolicyStatus(policy, pools)
	want := servingv1alpha1.SchedulerPolicyStatus{
		ObservedGeneration: 3,
		Pools:              []string{"a", "b", "c"},
		PoolCount:          3,
		Conditions: []metav1.Condition{{
			Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 3,
			Message: "ProgramAware mode, every default interval",
		}},
	}
	if diff := cmp.Diff(want, policy.Status, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}
