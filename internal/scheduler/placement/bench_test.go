package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchNow is the time of benchmark rounds.
var benchNow = t0

// rngFor returns a fixed-seed source, so that failures reproduce.
func rngFor(testing.TB) *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// benchSnapshot is a heavily loaded pool: three quarters of the programs
// placed, a fifth waiting (a quarter of those overdue), a few new and
// terminated; pod capacity is set so that pods are full on average, so
// about half of them are over capacity and pause or mark, and one pod
// drains while another is not ready.
func benchSnapshot(r *rand.Rand, nPrograms, nPods int) Snapshot {
	snap := Snapshot{Pods: make([]Pod, nPods), Programs: make([]Program, nPrograms)}
	for i := range snap.Pods {
		snap.Pods[i] = Pod{Name: fmt.Sprintf("pool-%02d", i), Ready: true}
	}
	snap.Pods[nPods-1].Draining = true
	if nPods > 2 {
		snap.Pods[nPods-2].Ready = false
	}
	var placed int64
	for i := range snap.Programs {
		p := &snap.Programs[i]
		p.ID = fmt.Sprintf("program-%05d", i)
		p.ContextTokens = 2000 + r.Int64N(38_000)
		p.Steps = 2 + r.IntN(40)
		p.Status = StatusReasoning
		if r.IntN(100) < 55 {
			p.Status = StatusActing
			p.LastTransition = benchNow.Add(-time.Duration(r.IntN(120_000)) * time.Millisecond)
		}
		switch k := r.IntN(100); {
		case k < 75:
			p.State = StateActive
			p.Pod = snap.Pods[r.IntN(nPods)].Name
			p.SharedTokens = r.Int64N(p.ContextTokens / 4)
			p.MarkedForPause = p.Status == StatusReasoning && r.IntN(100) < 5
			placed += p.ContextTokens - p.SharedTokens
		case k < 95:
			p.State = StatePaused
			p.PausedSince = benchNow.Add(-time.Duration(r.IntN(40*60)) * time.Second)
			p.HasHeldRequest = r.IntN(2) == 0
		case k < 98:
			p.State, p.Steps, p.Status = StateActive, 1, StatusReasoning
		default:
			p.State = StateTerminated
		}
	}
	for i := range snap.Pods {
		snap.Pods[i].CapacityTokens = placed / int64(nPods)
	}
	return snap
}

func benchmarkDecide(b *testing.B, edit func(*Policy)) {
	snap := benchSnapshot(rngFor(b), 10_000, 64)
	s, err := New(policyWith(edit))
	if err != nil {
		b.Fatal(err)
	}
	d, err := s.Decide(snap, benchNow)
	if err != nil {
		b.Fatal(err)
	}
	var place, pause, mark int
	for _, p := range d.Pods {
		place, pause, mark = place+len(p.Place), pause+len(p.Pause), mark+len(p.Mark)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Decide(snap, benchNow); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(place), "placed/op")
	b.ReportMetric(float64(pause), "paused/op")
	b.ReportMetric(float64(mark), "marked/op")
	b.ReportMetric(float64(len(d.Paused)), "waiting/op")
}

// BenchmarkDecide_10kPrograms_64Pods is one ProgramAware round with decay on
// (the most work: decayed and undecayed views, force-resume, resume, pauses
// and marks on about half the pods).
func BenchmarkDecide_10kPrograms_64Pods(b *testing.B) {
	benchmarkDecide(b, func(p *Policy) { p.ActingDecay.Enabled = true })
}

func BenchmarkDecide_10kPrograms_64Pods_DecayOff(b *testing.B) {
	benchmarkDecide(b, nil)
}

func BenchmarkDecide_10kPrograms_64Pods_DefaultMode(b *testing.B) {
	benchmarkDecide(b, defaultMode)
}
