package controller

import (
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

const (
	deploymentRevisionHistoryLimit = 3
	// deploymentProgressDeadline is the startup probe's budget for loading
	// the model plus the time to schedule the pod and pull its image: a
	// rollout is reported stalled only once a pod has overrun both.
	deploymentProgressDeadline = int32((modelLoadBudget + imagePullAllowance) / time.Second)
	// modelFetchAllowance extends the progress deadline of a pool whose
	// model is downloaded by an init container (source.url): tens of GB
	// take tens of minutes, during which the pod is rightly not ready.
	modelFetchAllowance = 2 * time.Hour
)

// progressDeadline is the Deployment's progress deadline for a pool.
func progressDeadline(pool *servingv1alpha1.InferencePool) int32 {
	if pool.Spec.Model.Source.URL != "" {
		return deploymentProgressDeadline + int32(modelFetchAllowance/time.Second)
	}
	return deploymentProgressDeadline
}

// ownerReference makes a child belong to its pool: it is deleted with the
// pool, and its changes requeue the pool.
func ownerReference(pool *servingv1alpha1.InferencePool) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(servingv1alpha1.GroupVersion.String()).
		WithKind("InferencePool").
		WithName(pool.Name).
		WithUID(pool.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// desiredDeployment is the Deployment of a pool's runtime pods.
func desiredDeployment(pool *servingv1alpha1.InferencePool, tmpl corev1.PodTemplateSpec) (*appsv1ac.DeploymentApplyConfiguration, error) {
	tmplAC, err := toApplyConfiguration[corev1ac.PodTemplateSpecApplyConfiguration](&tmpl)
	if err != nil {
		return nil, fmt.Errorf("pod template: %w", err)
	}
	// An accelerator pool rarely has a spare GPU to surge onto: replace
	// pods one at a time instead. A CPU pool surges so it never serves
	// with fewer pods than asked for.
	strategy := appsv1ac.RollingUpdateDeployment().
		WithMaxSurge(intstr.FromInt32(1)).
		WithMaxUnavailable(intstr.FromInt32(0))
	if res := pool.Spec.Resources; res != nil && ptr.Deref(res.Accelerators, 0) > 0 {
		strategy = appsv1ac.RollingUpdateDeployment().
			WithMaxSurge(intstr.FromInt32(0)).
			WithMaxUnavailable(intstr.FromInt32(1))
	}
	return appsv1ac.Deployment(pool.Name, pool.Namespace).
		WithLabels(poolLabels(pool.Name)).
		WithOwnerReferences(ownerReference(pool)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(ptr.Deref(pool.Spec.Replicas, 1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(podSelector(pool.Name))).
			WithTemplate(tmplAC).
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(strategy)).
			WithRevisionHistoryLimit(deploymentRevisionHistoryLimit).
			WithProgressDeadlineSeconds(progressDeadline(pool))), nil
}

// desiredService is the Service in front of a pool's pods. It exposes only
// the OpenAI-compatible API: the control port is for the controller, which
// talks to each pod directly.
func desiredService(pool *servingv1alpha1.InferencePool) *corev1ac.ServiceApplyConfiguration {
	svc := pool.Spec.Service
	port := svc.Port
	if port == 0 {
		port = httpPort
	}
	svcType := svc.Type
	if svcType == "" {
		svcType = corev1.ServiceTypeClusterIP
	}
	return corev1ac.Service(pool.Name, pool.Namespace).
		WithLabels(poolLabels(pool.Name)).
		WithOwnerReferences(ownerReference(pool)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(svcType).
			WithSelector(podSelector(pool.Name)).
			WithPorts(corev1ac.ServicePort().
				WithName(httpPortName).
				WithProtocol(corev1.ProtocolTCP).
				WithAppProtocol("http").
				WithPort(port).
				WithTargetPort(intstr.FromString(httpPortName))))
}

// desiredPodDisruptionBudget lets voluntary disruptions (node drains) take
// one pod of a pool at a time. Pods that are not ready may always be
// evicted, so a broken pod never blocks a drain.
func desiredPodDisruptionBudget(pool *servingv1alpha1.InferencePool) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(pool.Name, pool.Namespace).
		WithLabels(poolLabels(pool.Name)).
		WithOwnerReferences(ownerReference(pool)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(podSelector(pool.Name))).
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow))
}

// toApplyConfiguration converts a typed object (or part of one) into its
// apply configuration. Apply configurations have the same JSON shape as the
// types, with every field optional, so a JSON round trip keeps exactly the
// fields the typed value sets; typed values are much easier to build and to
// compare in tests.
func toApplyConfiguration[AC any](v any) (*AC, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	ac := new(AC)
	if err := json.Unmarshal(b, ac); err != nil {
		return nil, err
	}
	return ac, nil
}

// fromApplied reads the object the API server returned into an apply
// configuration back as its typed form.
func fromApplied[T any](ac any) (*T, error) {
	return toApplyConfiguration[T](ac)
}
