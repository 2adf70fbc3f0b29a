package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

func TestConvertPolicy(t *testing.T) {
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	// defaults is what the API server's defaulting makes of an empty spec.
	defaults := placement.Policy{
		Mode:                   placement.ModeDefault,
		ActingTokenWeight:      1,
		BufferTokensPerProgram: 100,
		ActingDecay:            placement.Decay{HalfLife: time.Minute},
		MaxPauseDuration:       30 * time.Minute,
		WaitAging:              time.Minute,
		ResumeFirstAfter:       5 * time.Minute,
		CacheAffinityWait:      time.Minute,
		ActingOnHost:           true,
		DeviceOvercommit:       4,
		PrefillTokensPerSecond: 20000,
	}
	with := func(f func(*placement.Policy)) placement.Policy {
		p := defaults
		f(&p)
		return p
	}
	tests := []struct {
		name         string
		spec         servingv1alpha1.SchedulerPolicySpec
		want         placement.Policy
		wantInterval time.Duration
		wantErr      bool
	}{
		{
			name:         "empty spec takes the API defaults",
			want:         defaults,
			wantInterval: 5 * time.Second,
		},
		{
			name: "defaulted spec as the API server stores it",
			spec: servingv1alpha1.SchedulerPolicySpec{
				Mode: servingv1alpha1.SchedulingModeDefault, Interval: dur(5 * time.Second), ActingTokenWeight: "1",
				BufferTokensPerProgram: ptr.To[int32](100), MaxPauseDuration: dur(30 * time.Minute),
				ActingTokenDecay: servingv1alpha1.ActingTokenDecay{HalfLife: dur(time.Minute)},
			},
			want:         defaults,
			wantInterval: 5 * time.Second,
		},
		{
			name: "program-aware with every field set",
			spec: servingv1alpha1.SchedulerPolicySpec{
				Mode: servingv1alpha1.SchedulingModeProgramAware, Interval: dur(2 * time.Second), ActingTokenWeight: "0.25",
				BufferTokensPerProgram: ptr.To[int32](64), MaxPauseDuration: dur(90 * time.Second),
				ActingTokenDecay: servingv1alpha1.ActingTokenDecay{Enabled: true, HalfLife: dur(10 * time.Second)},
				Fairness: servingv1alpha1.Fairness{WaitAging: dur(20 * time.Second), Bound: dur(45 * time.Second),
					ResumeFirstAfter: dur(3 * time.Minute)},
			},
			want: placement.Policy{
				Mode: placement.ModeProgramAware, ActingTokenWeight: 0.25, BufferTokensPerProgram: 64,
				ActingDecay:      placement.Decay{Enabled: true, HalfLife: 10 * time.Second},
				MaxPauseDuration: 90 * time.Second,
				WaitAging:        20 * time.Second, FairnessBound: 45 * time.Second, ResumeFirstAfter: 3 * time.Minute,
				CacheAffinityWait: placement.DefaultCacheAffinityWait,
				ActingOnHost:      true,
				DeviceOvercommit:  4,

				PrefillTokensPerSecond: placement.DefaultPrefillTokensPerSecond,
			},
			wantInterval: 2 * time.Second,
		},
		{
			name:         "aging off",
			spec:         servingv1alpha1.SchedulerPolicySpec{Fairness: servingv1alpha1.Fairness{WaitAging: dur(0)}},
			want:         with(func(p *placement.Policy) { p.WaitAging = 0 }),
			wantInterval: 5 * time.Second,
		},
		{
			name:    "negative fairness bound (an object older than the schema rule)",
			spec:    servingv1alpha1.SchedulerPolicySpec{Fairness: servingv1alpha1.Fairness{Bound: dur(-time.Second)}},
			wantErr: true,
		},
		{
			name:         "zero acting weight is a weight, not unset",
			spec:         servingv1alpha1.SchedulerPolicySpec{ActingTokenWeight: "0"},
			want:         with(func(p *placement.Policy) { p.ActingTokenWeight = 0 }),
			wantInterval: 5 * time.Second,
		},
		{
			name:         "six decimal places",
			spec:         servingv1alpha1.SchedulerPolicySpec{ActingTokenWeight: "0.123456"},
			want:         with(func(p *placement.Policy) { p.ActingTokenWeight = 0.123456 }),
			wantInterval: 5 * time.Second,
		},
		{
			name:         "acting KV on host off",
			spec:         servingv1alpha1.SchedulerPolicySpec{ActingOnHost: ptr.To(false)},
			want:         with(func(p *placement.Policy) { p.ActingOnHost = false }),
			wantInterval: 5 * time.Second,
		},
		{
			name:         "device overcommit 250%",
			spec:         servingv1alpha1.SchedulerPolicySpec{DeviceOvercommitPercent: ptr.To[int32](250)},
			want:         with(func(p *placement.Policy) { p.DeviceOvercommit = 2.5 }),
			wantInterval: 5 * time.Second,
		},
		{
			name: "KV transfers at 100 Gb/s, prefill at 5,000 tokens/s",
			spec: servingv1alpha1.SchedulerPolicySpec{KVTransfer: servingv1alpha1.KVTransfer{Enabled: true,
				BandwidthGbps: ptr.To[int32](100), PrefillTokensPerSecond: ptr.To[int32](5000)}},
			want:         with(func(p *placement.Policy) { p.KVTransferBandwidth, p.PrefillTokensPerSecond = 12.5e9, 5000 }),
			wantInterval: 5 * time.Second,
		},
		{
			name:         "KV transfers enabled at the default bandwidth",
			spec:         servingv1alpha1.SchedulerPolicySpec{KVTransfer: servingv1alpha1.KVTransfer{Enabled: true}},
			want:         with(func(p *placement.Policy) { p.KVTransferBandwidth = placement.DefaultKVTransferBandwidth }),
			wantInterval: 5 * time.Second,
		},
		{
			name:         "KV transfers enabled at 0 Gb/s are off",
			spec:         servingv1alpha1.SchedulerPolicySpec{KVTransfer: servingv1alpha1.KVTransfer{Enabled: true, BandwidthGbps: ptr.To[int32](0)}},
			want:         defaults,
			wantInterval: 5 * time.Second,
		},
		{
			name:         "a bandwidth without enabled changes nothing",
			spec:         servingv1alpha1.SchedulerPolicySpec{KVTransfer: servingv1alpha1.KVTransfer{BandwidthGbps: ptr.To[int32](100)}},
			want:         defaults,
			wantInterval: 5 * time.Second,
		},
		{
			name:    "device overcommit below 100% (written past the schema)",
			spec:    servingv1alpha1.SchedulerPolicySpec{DeviceOvercommitPercent: ptr.To[int32](50)},
			wantErr: true,
		},
		{
			name:         "zero buffer",
			spec:         servingv1alpha1.SchedulerPolicySpec{BufferTokensPerProgram: ptr.To[int32](0)},
			want:         with(func(p *placement.Policy) { p.BufferTokensPerProgram = 0 }),
			wantInterval: 5 * time.Second,
		},
		{
			name:         "decay enabled with the default half-life",
			spec:         servingv1alpha1.SchedulerPolicySpec{ActingTokenDecay: servingv1alpha1.ActingTokenDecay{Enabled: true}},
			want:         with(func(p *placement.Policy) { p.ActingDecay.Enabled = true }),
			wantInterval: 5 * time.Second,
		},
		{name: "weight not a number", spec: servingv1alpha1.SchedulerPolicySpec{ActingTokenWeight: "lots"}, wantErr: true},
		{name: "weight NaN", spec: servingv1alpha1.SchedulerPolicySpec{ActingTokenWeight: "NaN"}, wantErr: true},
		{name: "weight above one", spec: servingv1alpha1.SchedulerPolicySpec{ActingTokenWeight: "1.5"}, wantErr: true},
		{name: "weight below zero", spec: servingv1alpha1.SchedulerPolicySpec{ActingTokenWeight: "-0.1"}, wantErr: true},
		{name: "unknown mode", spec: servingv1alpha1.SchedulerPolicySpec{Mode: "Clever"}, wantErr: true},
		{name: "zero interval", spec: servingv1alpha1.SchedulerPolicySpec{Interval: dur(0)}, wantErr: true},
		{name: "zero pause limit", spec: servingv1alpha1.SchedulerPolicySpec{MaxPauseDuration: dur(0)}, wantErr: true},
		{
			name:    "decay with a zero half-life",
			spec:    servingv1alpha1.SchedulerPolicySpec{ActingTokenDecay: servingv1alpha1.ActingTokenDecay{Enabled: true, HalfLife: dur(0)}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := convertPolicy(&tt.spec)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("convertPolicy() = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("convertPolicy(): %v", err)
			}
			if diff := cmp.Diff(tt.want, got.placement); diff != "" {
				t.Errorf("placement policy (-want +got):\n%s", diff)
			}
			if got.interval != tt.wantInterval {
				t.Errorf("interval %v, want %v", got.interval, tt.wantInterval)
			}
		})
	}
}

func TestNoPolicyRunsDefaultMode(t *testing.T) {
	p := noPolicy()
	if p.placement.Mode != placement.ModeDefault {
		t.Errorf("mode %q, want %q: pods without a policy run with the defaults", p.placement.Mode, placement.ModeDefault)
	}
	if err := p.placement.Validate(); err != nil {
		t.Error(err)
	}
	if p.interval != 5*time.Second {
		t.Errorf("interval %v, want 5s", p.interval)
	}
}
