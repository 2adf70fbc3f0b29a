package controller

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// crdDefault reads a field's default from the generated SchedulerPolicy CRD.
func crdDefault(t *testing.T, field string) time.Duration {
	t.Helper()
	b, err := os.ReadFile("../../config/crd/bases/serving.kvpilot.dev_schedulerpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+` + field + `:\n\s+default: (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no default for %s in the CRD", field)
	}
	d, err := time.ParseDuration(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// One default per setting: what a pod or the placement package assumes
// without a SchedulerPolicy is what the API server fills in, and turning
// decay on with it satisfies the CRD's own rules (halfLife ≥ interval).
func TestPlacementDefaultsAreTheCRDs(t *testing.T) {
	p := placement.DefaultPolicy()
	interval, half := crdDefault(t, "interval"), crdDefault(t, "halfLife")
	if p.ActingDecay.HalfLife != half || defaultActingDecayHalf != half {
		t.Errorf("acting-decay half-life: placement %v, controller %v, CRD %v", p.ActingDecay.HalfLife, defaultActingDecayHalf, half)
	}
	if p.ActingDecay.HalfLife < interval || p.ActingDecay.HalfLife < time.Second || p.ActingDecay.HalfLife > 24*time.Hour {
		t.Errorf("default half-life %v breaks the CRD's rules (≥ interval %v, 1s–24h)", p.ActingDecay.HalfLife, interval)
	}
	if defaultFleetInterval != interval {
		t.Errorf("interval: controller %v, CRD %v", defaultFleetInterval, interval)
	}
	if got := crdDefault(t, "maxPauseDuration"); p.MaxPauseDuration != got {
		t.Errorf("max pause: placement %v, CRD %v", p.MaxPauseDuration, got)
	}
	b, err := os.ReadFile("../../config/crd/bases/serving.kvpilot.dev_schedulerpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^\s+actingOnHost:\n\s+default: (\S+)$`).FindSubmatch(b); m == nil || string(m[1]) != "true" || !p.ActingOnHost {
		t.Errorf("acting KV on host: placement %v, CRD default %q", p.ActingOnHost, m)
	}
	m := regexp.MustCompile(`(?m)^\s+deviceOvercommitPercent:\n\s+default: (\d+)$`).FindSubmatch(b)
	if m == nil || float64(atoi(t, string(m[1])))/100 != p.DeviceOvercommit {
		t.Errorf("device overcommit: placement %v, CRD default %q", p.DeviceOvercommit, m)
	}
	if got := crdDefault(t, "cacheAffinityWait"); p.CacheAffinityWait != got || defaultCacheAffinityWait != got {
		t.Errorf("cache affinity wait: placement %v, controller %v, CRD %v", p.CacheAffinityWait, defaultCacheAffinityWait, got)
	}
	if got := crdDefault(t, "waitAging"); p.WaitAging != got || defaultWaitAging != got {
		t.Errorf("wait aging: placement %v, controller %v, CRD %v", p.WaitAging, defaultWaitAging, got)
	}
	if got := crdDefault(t, "resumeFirstAfter"); p.ResumeFirstAfter != got || defaultResumeFirstAfter != got {
		t.Errorf("resume first after: placement %v, controller %v, CRD %v", p.ResumeFirstAfter, defaultResumeFirstAfter, got)
	}
	if got := crdDefault(t, "bound"); p.FairnessBound != got || defaultFairnessBound != got {
		t.Errorf("fairness bound: placement %v, controller %v, CRD %v", p.FairnessBound, defaultFairnessBound, got)
	}
}

// A ProgramAware SchedulerPolicy with nothing else set runs exactly
// placement.DefaultPolicy(): what the agent benchmark calls "the shipped
// defaults" is what a user gets.
func TestEmptyProgramAwarePolicyIsTheDefaultPolicy(t *testing.T) {
	got, err := convertPolicy(&servingv1alpha1.SchedulerPolicySpec{Mode: servingv1alpha1.SchedulingModeProgramAware})
	if err != nil {
		t.Fatal(err)
	}
	if want := placement.DefaultPolicy(); got.placement != want {
		t.Errorf("converted %+v\nDefaultPolicy %+v", got.placement, want)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
