package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kvpilot/kvpilot/internal/fleet"
)

// AnnotationPodDeletionCost is the annotation a ReplicaSet reads to pick
// which of its ready pods to remove first on scale-down: the lowest cost.
const AnnotationPodDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// deletionCosts returns the pod-deletion-cost each pod should carry, from
// a round: its program load, so a scale-down removes the emptiest pod and
// moves the fewest programs. Pods whose state could not be read, and pods
// already terminating, are left as they are.
func deletionCosts(pods []corev1.Pod, sum *fleet.Summary) map[string]string {
	load := make(map[string]int64, len(sum.Pods))
	for i := range sum.Pods {
		if p := &sum.Pods[i]; p.Reachable {
			load[p.Name] = p.DeletionCost
		}
	}
	out := map[string]string{}
	for i := range pods {
		pod := &pods[i]
		cost, ok := load[pod.Name]
		if !ok || pod.DeletionTimestamp != nil {
			continue
		}
		out[pod.Name] = strconv.FormatInt(int64(clampInt32(cost)), 10)
	}
	return out
}

// costPatches picks the pods whose annotation to write. The Kubernetes
// documentation warns against updating the annotation on every metric
// change (each write is a pod update every watcher of pods sees), so a
// changed cost waits until due, while a pod without the annotation gets
// it at once.
func costPatches(pods []corev1.Pod, want map[string]string, due bool) map[string]string {
	out := map[string]string{}
	for i := range pods {
		pod := &pods[i]
		cost, ok := want[pod.Name]
		if !ok {
			continue
		}
		cur, has := pod.Annotations[AnnotationPodDeletionCost]
		if cur == cost || (has && !due) {
			continue
		}
		out[pod.Name] = cost
	}
	return out
}

// patchDeletionCosts writes the annotations with a merge patch of that one
// key: the Deployment controller owns the rest of the pod's metadata.
func patchDeletionCosts(ctx context.Context, c client.Client, namespace string, costs map[string]string) error {
	var errs []error
	for name, cost := range costs {
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{AnnotationPodDeletionCost: cost}},
		})
		if err != nil {
			return err
		}
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = namespace, name
		if err := c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FleetFieldOwner)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("annotate pod %s with its deletion cost: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
