package controller

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// observation is what one reconcile learned about a pool's world.
type observation struct {
	// deployment is the pool's Deployment as the API server returned it
	// from the apply; nil when it could not be applied.
	deployment *appsv1.Deployment
	// policy is the PolicyResolved condition (without ObservedGeneration).
	policy metav1.Condition
	// applyErr is the first error applying a child, if any.
	applyErr error
	// modelReady is the ModelReady condition of a url-source pool (empty
	// Type for other sources, whose pools carry no such condition).
	modelReady metav1.Condition
	// model is the fetch's progress of a url-source pool; nil when the
	// pods could not be read (or the pool has another source).
	model *servingv1alpha1.ModelStatus
}

// setPoolStatus writes an observation into the pool's status. It leaves
// the fleet loop's capacity alone and only moves a condition's
// LastTransitionTime when the condition's status changes, so the same
// observation twice leaves the status unchanged.
func setPoolStatus(pool *servingv1alpha1.InferencePool, obs observation) {
	st := &pool.Status
	gen := pool.Generation
	desired := ptr.Deref(pool.Spec.Replicas, 1)
	st.ObservedGeneration = gen
	st.Selector = labels.SelectorFromSet(podSelector(pool.Name)).String()

	set := func(c metav1.Condition) {
		c.ObservedGeneration = gen
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if obs.policy.Type != "" {
		set(obs.policy)
	}
	if obs.modelReady.Type != "" {
		set(obs.modelReady)
		st.Model = obs.model
	} else if pool.Spec.Model.Source.URL == "" {
		meta.RemoveStatusCondition(&st.Conditions, servingv1alpha1.PoolModelReady)
		st.Model = nil
	}

	d := obs.deployment
	if d == nil {
		// Without the Deployment nothing is known about the pods: keep
		// Available and Progressing as they were and report why.
		set(metav1.Condition{Type: servingv1alpha1.PoolDegraded, Status: metav1.ConditionTrue,
			Reason: servingv1alpha1.ReasonApplyFailed, Message: errorMessage(obs.applyErr)})
		return
	}
	ds := d.Status
	st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = ds.Replicas, ds.ReadyReplicas, ds.UpdatedReplicas

	set(availableCondition(desired, d))
	set(progressingCondition(desired, d))
	set(degradedCondition(d, obs.applyErr))
}

func availableCondition(desired int32, d *appsv1.Deployment) metav1.Condition {
	c := metav1.Condition{Type: servingv1alpha1.PoolAvailable}
	ready := d.Status.ReadyReplicas
	switch {
	case desired == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, servingv1alpha1.ReasonScaledToZero, "spec.replicas is 0"
	case ready > 0 && deploymentCondition(d, appsv1.DeploymentAvailable, corev1.ConditionTrue) != nil:
		c.Status, c.Reason = metav1.ConditionTrue, servingv1alpha1.ReasonMinimumReplicasAvailable
		c.Message = fmt.Sprintf("%d of %d runtime pods are ready", ready, desired)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, servingv1alpha1.ReasonMinimumReplicasUnavailable
		c.Message = fmt.Sprintf("%d of %d runtime pods are ready", ready, desired)
	}
	return c
}

func progressingCondition(desired int32, d *appsv1.Deployment) metav1.Condition {
	c := metav1.Condition{Type: servingv1alpha1.PoolProgressing, Status: metav1.ConditionTrue}
	ds := d.Status
	switch {
	case deploymentStalled(d) != nil:
		c.Status, c.Reason = metav1.ConditionFalse, servingv1alpha1.ReasonProgressDeadlineExceeded
		c.Message = deploymentStalled(d).Message
	case ds.ObservedGeneration < d.Generation || ds.UpdatedReplicas < desired || ds.Replicas > ds.UpdatedReplicas:
		c.Reason = servingv1alpha1.ReasonRollingOut
		c.Message = fmt.Sprintf("%d of %d runtime pods run the current template", ds.UpdatedReplicas, desired)
	case ds.Replicas != desired:
		c.Reason = servingv1alpha1.ReasonScaling
		c.Message = fmt.Sprintf("scaling from %d to %d runtime pods", ds.Replicas, desired)
	case ds.ReadyReplicas < desired:
		c.Reason = servingv1alpha1.ReasonPodsNotReady
		c.Message = fmt.Sprintf("%d of %d runtime pods are ready", ds.ReadyReplicas, desired)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, servingv1alpha1.ReasonRolloutComplete
		c.Message = fmt.Sprintf("all %d runtime pods are current and ready", desired)
	}
	return c
}

func degradedCondition(d *appsv1.Deployment, applyErr error) metav1.Condition {
	c := metav1.Condition{Type: servingv1alpha1.PoolDegraded, Status: metav1.ConditionTrue}
	switch {
	case applyErr != nil:
		c.Reason, c.Message = servingv1alpha1.ReasonApplyFailed, errorMessage(applyErr)
	case deploymentStalled(d) != nil:
		c.Reason, c.Message = servingv1alpha1.ReasonProgressDeadlineExceeded, deploymentStalled(d).Message
	case deploymentCondition(d, appsv1.DeploymentReplicaFailure, corev1.ConditionTrue) != nil:
		c.Reason = servingv1alpha1.ReasonReplicaFailure
		c.Message = deploymentCondition(d, appsv1.DeploymentReplicaFailure, corev1.ConditionTrue).Message
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, servingv1alpha1.ReasonAsExpected, "the pool's children match its spec"
	}
	return c
}

// deploymentStalled returns the Deployment's Progressing condition when the
// Deployment controller gave up on the rollout.
func deploymentStalled(d *appsv1.Deployment) *appsv1.DeploymentCondition {
	c := deploymentCondition(d, appsv1.DeploymentProgressing, corev1.ConditionFalse)
	if c == nil || c.Reason != "ProgressDeadlineExceeded" {
		return nil
	}
	return c
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType, s corev1.ConditionStatus) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if c := &d.Status.Conditions[i]; c.Type == t && c.Status == s {
			return c
		}
	}
	return nil
}

// maxConditionMessage keeps a condition message within the API's limit.
const maxConditionMessage = 32 * 1024

func errorMessage(err error) string {
	if err == nil {
		err = errors.New("unknown error")
	}
	msg := err.Error()
	if len(msg) > maxConditionMessage {
		msg = msg[:maxConditionMessage]
	}
	return msg
}
