package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/fleet"
)

// FleetFieldOwner is the server-side apply field manager of the fleet
// loop's writes: it owns status.capacity and nothing else, so its writes
// and the InferencePool reconciler's never overwrite each other.
const FleetFieldOwner = "kvpilot-fleet"

// poolCapacity aggregates a round into the pool's status.capacity. Pods
// whose state could not be read count for nothing: their numbers are
// unknown, not zero. It returns nil when no pod could be read.
func poolCapacity(sum *fleet.Summary) *servingv1alpha1.PoolCapacity {
	c := &servingv1alpha1.PoolCapacity{
		ProgramsActive:      clampInt32(int64(sum.ProgramsActive)),
		ProgramsPaused:      clampInt32(int64(sum.ProgramsPaused)),
		RecommendedReplicas: ptr.To(clampInt32(int64(sum.RecommendedReplicas))),
		OldestWaitSeconds:   int64(sum.OldestWait / time.Second),
	}
	for i := range sum.Pods {
		p := &sum.Pods[i]
		if !p.Reachable {
			continue
		}
		c.TotalKVTokens += p.CapacityTokens
		c.UsedKVTokens += p.KVUsedTokens
		c.HostKVTokens += p.HostTokens
		c.HostUsedKVTokens += p.HostUsedTokens
		c.Pods = append(c.Pods, servingv1alpha1.PodCapacity{
			Name:             p.Name,
			TotalKVTokens:    p.CapacityTokens,
			UsedKVTokens:     p.KVUsedTokens,
			ProgramsActive:   clampInt32(int64(p.Programs)),
			ProgramsPaused:   clampInt32(int64(p.Paused)),
			HostKVTokens:     p.HostTokens,
			HostUsedKVTokens: p.HostUsedTokens,
		})
	}
	if len(c.Pods) == 0 {
		return nil
	}
	if c.TotalKVTokens > 0 {
		c.UsedKVPercent = int32(min(max(c.UsedKVTokens*100/c.TotalKVTokens, 0), 100))
	}
	// The busiest pods first, so the bounded list shows the ones that matter.
	slices.SortFunc(c.Pods, func(a, b servingv1alpha1.PodCapacity) int {
		return cmp.Or(cmp.Compare(b.UsedKVTokens, a.UsedKVTokens), cmp.Compare(a.Name, b.Name))
	})
	c.Pods = c.Pods[:min(len(c.Pods), servingv1alpha1.MaxPodCapacities)]
	return c
}

// capacityWriteDue says whether to write desired over current. Only a
// change is written, and at most once per minInterval after the last
// write, so a busy pool's token counts do not churn its status; a change
// in what an operator or autoscaler acts on (programs paused or active,
// recommended replicas, capacity appearing or going) is written at once.
func capacityWriteDue(current, desired *servingv1alpha1.PoolCapacity, lastWrite, now time.Time, minInterval time.Duration) bool {
	if equality.Semantic.DeepEqual(current, desired) {
		return false
	}
	if current == nil || desired == nil ||
		current.ProgramsActive != desired.ProgramsActive ||
		current.ProgramsPaused != desired.ProgramsPaused ||
		!ptr.Equal(current.RecommendedReplicas, desired.RecommendedReplicas) {
		return true
	}
	return now.Sub(lastWrite) >= minInterval
}

// applyCapacity writes status.capacity with server-side apply as
// FleetFieldOwner: the whole capacity is the desired state, so a field
// left out (a zero, a pod that went away, capacity itself when nil) is
// removed, whatever the cache last showed.
func applyCapacity(ctx context.Context, c client.Client, pool *servingv1alpha1.InferencePool, capacity *servingv1alpha1.PoolCapacity) error {
	status := map[string]any{}
	if capacity != nil {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(capacity)
		if err != nil {
			return fmt.Errorf("encode capacity: %w", err)
		}
		status["capacity"] = obj
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": servingv1alpha1.GroupVersion.String(),
		"kind":       "InferencePool",
		"metadata":   map[string]any{"name": pool.Name, "namespace": pool.Namespace},
		"status":     status,
	}}
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(FleetFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply status.capacity: %w", err)
	}
	return nil
}

func clampInt32(v int64) int32 {
	return int32(min(max(v, -1<<31), 1<<31-1))
}
