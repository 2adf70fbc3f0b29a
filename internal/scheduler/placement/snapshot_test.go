package placement

import (
	"errors"
	"strings"
	"testing"
)

func TestDecideRejectsInvalidSnapshots(t *testing.T) {
	tests := []struct {
		name    string
		snap    Snapshot
		wantErr string
	}{{
		name:    "pod with no name",
		snap:    Snapshot{Pods: []Pod{{Ready: true}}},
		wantErr: "pod with no name",
	}, {
		name:    "negative capacity",
		snap:    Snapshot{Pods: []Pod{pod("a", -1)}},
		wantErr: `pod "a": negative capacity`,
	}, {
		name:    "duplicate pod",
		snap:    Snapshot{Pods: []Pod{pod("b", 1), pod("a", 1), pod("b", 2)}},
		wantErr: `duplicate pod "b"`,
	}, {
		name:    "program with no id",
		snap:    Snapshot{Programs: programs(prog("", 1))},
		wantErr: "program with no id",
	}, {
		name:    "duplicate program",
		snap:    Snapshot{Programs: programs(prog("p1", 1), prog("p1", 2).terminated())},
		wantErr: `duplicate program "p1"`,
	}, {
		name:    "unknown state",
		snap:    Snapshot{Programs: []Program{{ID: "p1", Status: StatusReasoning}}},
		wantErr: `program "p1": unknown state`,
	}, {
		name:    "unknown status",
		snap:    Snapshot{Programs: []Program{{ID: "p1", State: StatePaused}}},
		wantErr: `program "p1": unknown status`,
	}, {
		name:    "negative context",
		snap:    Snapshot{Programs: programs(prog("p1", -1))},
		wantErr: `program "p1": negative context tokens`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := New(DefaultPolicy())
			d, err := s.Decide(tt.snap, t0)
			if !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decide() error = %v, want ErrInvalidSnapshot about %q", err, tt.wantErr)
			}
			if d != nil {
				t.Error("Decide() returned a decision with its error")
			}
		})
	}
}

func TestTerminatedProgramsNeedNoStatus(t *testing.T) {
	snap := Snapshot{
		Pods:     []Pod{pod("a", 100)},
		Programs: []Program{{ID: "p1", State: StateTerminated, Pod: "a", ContextTokens: 1 << 40}},
	}
	d := decide(t, DefaultPolicy(), snap, t0)
	if diff := diffOutcome(outcome{}, d); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
	if got := d.Pod("a").Capacity.Programs; got != 0 {
		t.Errorf("programs on a = %d, want 0", got)
	}
}

func TestEnumStrings(t *testing.T) {
	for v, want := range map[interface{ String() string }]string{
		StatusReasoning: "REASONING", StatusActing: "ACTING", StatusUnknown: "Status(0)",
		StateActive: "ACTIVE", StatePaused: "PAUSED", StateTerminated: "TERMINATED", StateUnknown: "State(0)",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
