package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure the controllers.
type Options struct {
	// DefaultImage is the runtime image of pools that set none.
	DefaultImage string
	// PodAddresses maps a runtime pod to its API and control addresses for
	// the fleet loop; nil means PodIPAddresses (tests serve the pods'
	// control APIs on loopback).
	PodAddresses PodAddresses
	// FetchProgressInterval is how often pools whose pods download their
	// model refresh the progress in their ModelReady condition (default
	// 10s).
	FetchProgressInterval time.Duration
}

// SetupWithManager registers the field indexes and every reconciler of this
// package with a manager.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("field indexes: %w", err)
	}
	pools := &InferencePoolReconciler{
		Client:                mgr.GetClient(),
		APIReader:             mgr.GetAPIReader(),
		Recorder:              mgr.GetEventRecorder("kvpilot-controller"),
		DefaultImage:          opts.DefaultImage,
		Addresses:             opts.PodAddresses,
		FetchProgressInterval: opts.FetchProgressInterval,
	}
	if err := pools.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("InferencePool controller: %w", err)
	}
	if err := (&SchedulerPolicyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("SchedulerPolicy controller: %w", err)
	}
	loop := &FleetLoop{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Log:       mgr.GetLogger().WithName("fleet"),
		Addresses: opts.PodAddresses,
	}
	if err := mgr.Add(loop); err != nil {
		return fmt.Errorf("fleet loop: %w", err)
	}
	return nil
}

// CacheByObject narrows the manager's cache of the kinds the controllers
// own to the objects they made (labelled app.kubernetes.io/managed-by:
// kvpilot), so the manager does not hold every Deployment, Service and
// PodDisruptionBudget of the cluster in memory. A child that loses the label
// gets it back from the next apply. Of the pods, the fleet loop needs only
// the pools' runtime pods, which carry LabelPool.
func CacheByObject() map[client.Object]cache.ByObject {
	managed := labels.SelectorFromSet(labels.Set{labelManagedBy: managedByValue})
	runtimePods, err := labels.Parse(LabelPool)
	if err != nil {
		panic(fmt.Sprintf("selector of runtime pods: %v", err))
	}
	return map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:            {Label: managed},
		&corev1.Service{}:               {Label: managed},
		&policyv1.PodDisruptionBudget{}: {Label: managed},
		&corev1.Pod{}:                   {Label: runtimePods},
	}
}
