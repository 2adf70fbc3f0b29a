package placement

import (
	"testing"
	"time"
)

func TestForceResume(t *testing.T) {
	limit := DefaultMaxPauseDuration
	runRounds(t, []roundCase{{
		name: "an overdue program is placed whether it fits or not, and the pod pauses to make room",
		pods: []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("a0", 1000).on("a").acting(t0.Add(-time.Minute)),
			prog("r0", 500).on("a"),
			prog("late", 1000).held().paused(t0.Add(-limit - time.Minute)),
		},
		// 1100 + 600 + 1100 = 2800 > 2000: a0 (1100) is paused, late stays.
		want: outcome{
			Place:        onPod("a", "late"),
			Pause:        onPod("a", "a0"),
			Paused:       ids("a0"),
			ForceResumed: ids("late"),
		},
	}, {
		name: "waiting exactly the limit is not overdue",
		pods: []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r0", 1500).on("a"),
			prog("p1", 1000).paused(t0.Add(-limit)),
		},
		want: outcome{Paused: ids("p1")},
	}, {
		name: "an unknown pause time never forces a resume",
		pods: []Pod{pod("a", 2000)},
		progs: []*programBuilder{
			prog("r0", 1500).on("a"),
			prog("p1", 1000).paused(time.Time{}),
		},
		want: outcome{Paused: ids("p1")},
	}, {
		name:   "longest waiting first, each onto the pod then least loaded",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000), pod("b", 1000)},
		progs: []*programBuilder{
			prog("w3", 2000).paused(t0.Add(-35 * time.Minute)),
			prog("w1", 2000).paused(t0.Add(-50 * time.Minute)),
			prog("w2", 2000).paused(t0.Add(-40 * time.Minute)),
		},
		want: outcome{
			Place:        map[string][]string{"a": {"w1", "w3"}, "b": {"w2"}},
			ForceResumed: ids("w1", "w2", "w3"),
		},
	}, {
		name:   "least loaded is the most remaining capacity",
		policy: noBuffer,
		pods:   []Pod{pod("a", 1000), pod("b", 3000)},
		progs: []*programBuilder{
			prog("ra", 100).on("a"),
			prog("rb", 1500).on("b"),
			prog("late", 5000).paused(t0.Add(-time.Hour)),
		},
		want: outcome{Place: onPod("b", "late"), Mark: onPod("b", "rb"), ForceResumed: ids("late")},
	}, {
		name:  "no serving pod: the overdue program keeps waiting",
		pods:  []Pod{notReadyPod("a", 1000), drainingPod("b", 1000)},
		progs: []*programBuilder{prog("late", 10).paused(t0.Add(-time.Hour))},
		want:  outcome{Paused: ids("late")},
	}})
}
