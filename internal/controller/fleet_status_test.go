package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/fleet"
)

func TestPoolCapacity(t *testing.T) {
	tests := []struct {
		name string
		sum  fleet.Summary
		want *servingv1alpha1.PoolCapacity
	}{
		{
			name: "no pod read",
			sum:  fleet.Summary{Pods: []fleet.PodSummary{{Name: "a"}}, RecommendedReplicas: 1},
			want: nil,
		},
		{
			name: "totals over reachable pods, busiest first",
			sum: fleet.Summary{
				Pods: []fleet.PodSummary{
					{Name: "a", Reachable: true, CapacityTokens: 16000, KVUsedTokens: 4000, PlacedTokens: 5100, Programs: 1},
					{Name: "b", Reachable: true, CapacityTokens: 16000, KVUsedTokens: 12000, PlacedTokens: 15300, Programs: 3},
					{Name: "c", CapacityTokens: 0},
				},
				ProgramsActive: 4, ProgramsPaused: 1, RecommendedReplicas: 3,
			},
			want: &servingv1alpha1.PoolCapacity{
				TotalKVTokens: 32000, UsedKVTokens: 16000, UsedKVPercent: 50,
				ProgramsActive: 4, ProgramsPaused: 1, RecommendedReplicas: ptr.To[int32](3),
				Pods: []servingv1alpha1.PodCapacity{
					{Name: "b", TotalKVTokens: 16000, UsedKVTokens: 12000, ProgramsActive: 3},
					{Name: "a", TotalKVTokens: 16000, UsedKVTokens: 4000, ProgramsActive: 1},
				},
			},
		},
		{
			name: "host tier counted apart from device capacity; the oldest wait in seconds",
			sum: fleet.Summary{
				Pods: []fleet.PodSummary{
					{Name: "a", Reachable: true, CapacityTokens: 16000, KVUsedTokens: 8000, HostTokens: 64000, HostUsedTokens: 20000},
				},
				ProgramsPaused: 2, OldestWait: 95*time.Second + 500*time.Millisecond,
			},
			want: &servingv1alpha1.PoolCapacity{
				TotalKVTokens: 16000, UsedKVTokens: 8000, UsedKVPercent: 50, HostKVTokens: 64000, HostUsedKVTokens: 20000,
				ProgramsPaused: 2, OldestWaitSeconds: 95, RecommendedReplicas: ptr.To[int32](0),
				Pods: []servingv1alpha1.PodCapacity{
					{Name: "a", TotalKVTokens: 16000, UsedKVTokens: 8000, HostKVTokens: 64000, HostUsedKVTokens: 20000},
				},
			},
		},
		{
			name: "percent rounds down; zero capacity reports zero",
			sum: fleet.Summary{Pods: []fleet.PodSummary{
				{Name: "a", Reachable: true, CapacityTokens: 3, KVUsedTokens: 2},
				{Name: "b", Reachable: true},
			}},
			want: &servingv1alpha1.PoolCapacity{
				TotalKVTokens: 3, UsedKVTokens: 2, UsedKVPercent: 66, RecommendedReplicas: ptr.To[int32](0),
				Pods: []servingv1alpha1.PodCapacity{
					{Name: "a", TotalKVTokens: 3, UsedKVTokens: 2},
					{Name: "b"},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, poolCapacity(&tt.sum)); diff != "" {
				t.Errorf("poolCapacity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPoolCapacityBoundsPodList(t *testing.T) {
	var sum fleet.Summary
	for i := range 100 {
		sum.Pods = append(sum.Pods, fleet.PodSummary{Name: fmt.Sprintf("pod-%03d", i), Reachable: true,
			CapacityTokens: 1000, KVUsedTokens: int64(i)})
	}
	c := poolCapacity(&sum)
	if len(c.Pods) != servingv1alpha1.MaxPodCapacities {
		t.Fatalf("%d pods listed, want %d", len(c.Pods), servingv1alpha1.MaxPodCapacities)
	}
	if c.Pods[0].Name != "pod-099" || c.TotalKVTokens != 100_000 {
		t.Errorf("first %s, total %d: want the busiest pod first and totals over every pod", c.Pods[0].Name, c.TotalKVTokens)
	}
}

func TestCapacityWriteDue(t *testing.T) {
	base := &servingv1alpha1.PoolCapacity{TotalKVTokens: 100, UsedKVTokens: 10, ProgramsActive: 2, RecommendedReplicas: ptr.To[int32](1)}
	with := func(f func(*servingv1alpha1.PoolCapacity)) *servingv1alpha1.PoolCapacity {
		c := base.DeepCopy()
		f(c)
		return c
	}
	now := time.Unix(1000, 0)
	recent, old := now.Add(-time.Second), now.Add(-time.Minute)
	tests := []struct {
		name             string
		current, desired *servingv1alpha1.PoolCapacity
		last             time.Time
		want             bool
	}{
		{"unchanged", base, base.DeepCopy(), old, false},
		{"both empty", nil, nil, old, false},
		{"first capacity", nil, base, recent, true},
		{"capacity gone", base, nil, recent, true},
		{"tokens changed, recently written", base, with(func(c *servingv1alpha1.PoolCapacity) { c.UsedKVTokens = 20 }), recent, false},
		{"tokens changed, written long ago", base, with(func(c *servingv1alpha1.PoolCapacity) { c.UsedKVTokens = 20 }), old, true},
		{"paused changed", base, with(func(c *servingv1alpha1.PoolCapacity) { c.ProgramsPaused = 1 }), recent, true},
		{"active changed", base, with(func(c *servingv1alpha1.PoolCapacity) { c.ProgramsActive = 3 }), recent, true},
		{"recommendation changed", base, with(func(c *servingv1alpha1.PoolCapacity) { c.RecommendedReplicas = ptr.To[int32](2) }), recent, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := capacityWriteDue(tt.current, tt.desired, tt.last, now, 10*time.Second); got != tt.want {
				t.Errorf("capacityWriteDue = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeletionCosts(t *testing.T) {
	annotated := func(name, cost string) corev1.Pod {
		p := runtimePod(name, "10.0.0.1", true)
		if cost != "" {
			p.Annotations = map[string]string{AnnotationPodDeletionCost: cost}
		}
		return p
	}
	terminating := annotated("e", "")
	terminating.DeletionTimestamp = &metav1.Time{}
	pods := []corev1.Pod{annotated("a", ""), annotated("b", "5"), annotated("c", "100"), annotated("d", ""), terminating, annotated("f", "")}
	sum := &fleet.Summary{Pods: []fleet.PodSummary{
		{Name: "a", Reachable: true, DeletionCost: 0},
		{Name: "b", Reachable: true, DeletionCost: 7},
		{Name: "c", Reachable: true, DeletionCost: 100},
		{Name: "d"}, // unreachable: unknown load
		{Name: "e", Reachable: true, DeletionCost: 3},
		{Name: "f", Reachable: true, DeletionCost: 1 << 40},
	}}
	costs := deletionCosts(pods, sum)
	wantCosts := map[string]string{"a": "0", "b": "7", "c": "100", "f": "2147483647"}
	if diff := cmp.Diff(wantCosts, costs); diff != "" {
		t.Fatalf("deletionCosts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a": "0", "f": "2147483647"}, costPatches(pods, costs, false)); diff != "" {
		t.Errorf("patches before due: only pods without the annotation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a": "0", "b": "7", "f": "2147483647"}, costPatches(pods, costs, true)); diff != "" {
		t.Errorf("patches when due: every changed cost (-want +got):\n%s", diff)
	}
}
