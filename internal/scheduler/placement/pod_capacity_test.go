package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// PodCapacity is what a round that changes nothing reports for each pod:
// random pools of placed ACTING and REASONING programs with shared tokens,
// and paused programs whose KV a pod keeps (too large to resume anywhere),
// on pods with and without a host tier, under random capacity models.
func TestPodCapacityIsTheRoundsCapacity(t *testing.T) {
	now := time.Unix(50_000, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		policy := DefaultPolicy()
		policy.ActingTokenWeight = []float64{1, 0.5, 0}[rng.IntN(3)]
		policy.ActingOnHost = rng.IntN(2) == 0
		policy.DeviceOvercommit = 1 + float64(rng.IntN(3))
		var snap Snapshot
		for i := range 1 + rng.IntN(4) {
			snap.Pods = append(snap.Pods, Pod{Name: fmt.Sprintf("pod-%d", i), Ready: true,
				CapacityTokens: 100_000, HostTokens: int64(rng.IntN(3)) * 20_000})
		}
		for k := range rng.IntN(12) {
			pod := snap.Pods[rng.IntN(len(snap.Pods))].Name
			p := Program{ID: fmt.Sprintf("p%d", k), State: StateActive, Pod: pod, Status: StatusActing,
				ContextTokens: int64(rng.IntN(9000)), Steps: 1 + rng.IntN(5), LastTransition: now.Add(-time.Minute)}
			p.SharedTokens = int64(rng.IntN(int(p.ContextTokens) + 1))
			if rng.IntN(3) == 0 {
				p.Status = StatusReasoning
			}
			if rng.IntN(4) == 0 {
				// Paused, its KV kept where it ran; too large to fit
				// anywhere, so the round leaves it waiting.
				p.State, p.Pod, p.CachedOn, p.PausedSince = StatePaused, "", pod, now
				p.ContextTokens, p.HasHeldRequest = 10_000_000, true
			}
			snap.Programs = append(snap.Programs, p)
		}
		s, err := New(policy)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := s.Decide(snap, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, pd := range dec.Pods {
			if pd.Changed() {
				t.Fatalf("trial %d: the round changed %s: %+v", trial, pd.Pod, pd)
			}
			got, err := PodCapacity(policy.CapacityModel(), *podNamed(snap, pd.Pod), snap.Programs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(pd.Capacity, got); diff != "" {
				t.Errorf("trial %d, %s: PodCapacity differs from the round's (-round +PodCapacity):\n%s", trial, pd.Pod, diff)
			}
		}
	}
}

func podNamed(snap Snapshot, name string) *Pod {
	for i := range snap.Pods {
		if snap.Pods[i].Name == name {
			return &snap.Pods[i]
		}
	}
	return nil
}

// A pod's gate asks PodCapacity on every new program: it must not
// allocate, and it refuses what a round refuses.
func TestPodCapacityAllocatesNothingAndValidates(t *testing.T) {
	m := DefaultPolicy().CapacityModel()
	m.ActingOnHost, m.DeviceOvercommit = true, 2
	pod := Pod{Name: "pod-0", Ready: true, CapacityTokens: 100_000, HostTokens: 40_000}
	progs := []Program{
		{ID: "a", State: StateActive, Pod: "pod-0", Status: StatusActing, ContextTokens: 30_000, Steps: 2},
		{ID: "r", State: StateActive, Pod: "pod-0", Status: StatusReasoning, ContextTokens: 20_000, Steps: 1},
		{ID: "w", State: StatePaused, CachedOn: "pod-0", Status: StatusActing, ContextTokens: 25_000, Steps: 3},
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = PodCapacity(m, pod, progs) }); n != 0 {
		t.Errorf("PodCapacity allocates %v times a call", n)
	}
	bad := m
	bad.DeviceOvercommit = 0
	if _, err := PodCapacity(bad, pod, progs); err == nil {
		t.Error("a model Policy.Validate refuses was accepted")
	}
	if _, err := PodCapacity(m, pod, append(progs[:2:2], Program{ID: "x", State: StateActive, Pod: "pod-0"})); !errors.Is(err, ErrInvalidSnapshot) {
		t.Errorf("a program with no status: %v, want ErrInvalidSnapshot", err)
	}
}
