package placement

import (
	"testing"
	"time"
)

func TestDraining(t *testing.T) {
	ago := t0.Add(-time.Minute)
	for _, mode := range []Mode{ModeProgramAware, ModeDefault} {
		t.Run(string(mode), func(t *testing.T) {
			setMode := func(p *Policy) { p.Mode = mode }
			runRounds(t, []roundCase{{
				name:   "ACTING programs move: paused on the draining pod, placed on another",
				policy: setMode,
				pods:   []Pod{drainingPod("a", 10_000), pod("b", 10_000)},
				progs:  []*programBuilder{prog("a1", 500).on("a").acting(ago)},
				want:   outcome{Pause: onPod("a", "a1"), Place: onPod("b", "a1")},
			}, {
				name:   "REASONING programs are marked, to pause when their request ends",
				policy: setMode,
				pods:   []Pod{drainingPod("a", 10_000), pod("b", 10_000)},
				progs: []*programBuilder{
					prog("r1", 500).on("a"),
					prog("r2", 500).on("a").marked(),
				},
				want: outcome{Mark: onPod("a", "r1")},
			}, {
				name:   "a draining pod gets nothing new",
				policy: setMode,
				pods:   []Pod{drainingPod("a", 10_000)},
				progs:  []*programBuilder{prog("p1", 10).paused(ago), prog("n1", 10).steps(1)},
				want:   outcome{Paused: ids("n1", "p1")},
			}, {
				name:   "a draining pod that is not ready is still emptied",
				policy: setMode,
				pods:   []Pod{{Name: "a", Draining: true, CapacityTokens: 10_000}, pod("b", 10_000)},
				progs:  []*programBuilder{prog("a1", 500).on("a").acting(ago), prog("r1", 500).on("a")},
				want:   outcome{Pause: onPod("a", "a1"), Place: onPod("b", "a1"), Mark: onPod("a", "r1")},
			}})
		})
	}
	runRounds(t, []roundCase{{
		name:  "ProgramAware: no room elsewhere, the program waits; it is never lost",
		pods:  []Pod{drainingPod("a", 10_000), pod("b", 100)},
		progs: []*programBuilder{prog("a1", 500).on("a").acting(ago)},
		want:  outcome{Pause: onPod("a", "a1"), Paused: ids("a1")},
	}, {
		name: "ProgramAware: moved programs are idle, behind held ones",
		pods: []Pod{drainingPod("a", 10_000), pod("b", 1000)},
		progs: []*programBuilder{
			prog("a1", 500).on("a").acting(ago),
			prog("held", 800).paused(ago),
		},
		want: outcome{Pause: onPod("a", "a1"), Place: onPod("b", "held"), Paused: ids("a1")},
	}})
}
