package placement

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecisionPodAndChanged(t *testing.T) {
	snap := Snapshot{
		Pods:     []Pod{pod("b", 10_000), pod("a", 10_000)},
		Programs: programs(prog("p1", 10).steps(1)),
	}
	d := decide(t, DefaultPolicy(), snap, t0)
	if got := d.Pod("a"); got == nil || !got.Changed() || got.Place[0] != "p1" {
		t.Errorf(`Pod("a") = %+v, want p1 placed`, got)
	}
	if got := d.Pod("b"); got == nil || got.Changed() {
		t.Errorf(`Pod("b") = %+v, want no change`, got)
	}
	if got := d.Pod("c"); got != nil {
		t.Errorf(`Pod("c") = %+v, want nil`, got)
	}
}

func TestDecisionCloneSurvivesTheNextRound(t *testing.T) {
	s, err := New(DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	first := Snapshot{
		Pods:     []Pod{pod("a", 10_000)},
		Programs: programs(prog("p1", 10).steps(1)),
	}
	d, err := s.Decide(first, t0)
	if err != nil {
		t.Fatal(err)
	}
	kept := d.Clone()
	want := d.Clone()
	second := Snapshot{
		Pods:     []Pod{pod("a", 10_000)},
		Programs: programs(prog("p2", 20).steps(1)),
	}
	if _, err := s.Decide(second, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, kept); diff != "" {
		t.Errorf("clone changed by the next round (-want +got):\n%s", diff)
	}
}

func TestDecideSteadyStateAllocatesNothing(t *testing.T) {
	snap := benchSnapshot(rngFor(t), 2000, 16)
	for _, mode := range []Mode{ModeProgramAware, ModeDefault} {
		s, err := New(policyWith(func(p *Policy) {
			p.Mode = mode
			p.ActingDecay.Enabled = true
		}))
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(5, func() {
			if _, err := s.Decide(snap, benchNow); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: Decide allocates %v times per round in steady state, want 0", mode, allocs)
		}
	}
}
