package placement

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Policy)
		wantErr string // empty: valid
	}{
		{name: "defaults"},
		{name: "default mode", edit: defaultMode},
		{name: "weight 0", edit: func(p *Policy) { p.ActingTokenWeight = 0 }},
		{name: "no buffer", edit: noBuffer},
		{name: "decay", edit: withDecay},
		{name: "unknown mode", edit: func(p *Policy) { p.Mode = "tr" }, wantErr: "mode"},
		{name: "empty mode", edit: func(p *Policy) { p.Mode = "" }, wantErr: "mode"},
		{name: "weight above 1", edit: func(p *Policy) { p.ActingTokenWeight = 1.5 }, wantErr: "weight"},
		{name: "negative weight", edit: func(p *Policy) { p.ActingTokenWeight = -0.1 }, wantErr: "weight"},
		{name: "NaN weight", edit: func(p *Policy) { p.ActingTokenWeight = math.NaN() }, wantErr: "weight"},
		{name: "negative buffer", edit: func(p *Policy) { p.BufferTokensPerProgram = -1 }, wantErr: "buffer"},
		{name: "decay without half-life", edit: func(p *Policy) { p.ActingDecay = Decay{Enabled: true} }, wantErr: "half-life"},
		{name: "half-life unused when decay is off", edit: func(p *Policy) { p.ActingDecay = Decay{} }},
		{name: "no pause limit", edit: func(p *Policy) { p.MaxPauseDuration = 0 }, wantErr: "max pause"},
		{name: "negative pause limit", edit: func(p *Policy) { p.MaxPauseDuration = -time.Second }, wantErr: "max pause"},
		{name: "device overcommit 2", edit: func(p *Policy) { p.DeviceOvercommit = 2 }},
		{name: "device overcommit below 1", edit: func(p *Policy) { p.DeviceOvercommit = 0.5 }, wantErr: "overcommit"},
		{name: "device overcommit unset", edit: func(p *Policy) { p.DeviceOvercommit = 0 }, wantErr: "overcommit"},
		{name: "device overcommit NaN", edit: func(p *Policy) { p.DeviceOvercommit = math.NaN() }, wantErr: "overcommit"},
		{name: "device overcommit above the max", edit: func(p *Policy) { p.DeviceOvercommit = MaxDeviceOvercommit + 1 }, wantErr: "overcommit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policyWith(tt.edit)
			err := p.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := New(p); err != nil {
					t.Fatalf("New() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want an error about %q", err, tt.wantErr)
			}
			if _, err := New(p); err == nil {
				t.Fatal("New() accepted an invalid policy")
			}
		})
	}
}

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	if p.Mode != ModeProgramAware || p.ActingTokenWeight != 1 || p.BufferTokensPerProgram != 100 ||
		p.ActingDecay.Enabled || p.ActingDecay.HalfLife != time.Minute || p.MaxPauseDuration != 30*time.Minute {
		t.Errorf("DefaultPolicy() = %+v", p)
	}
}
