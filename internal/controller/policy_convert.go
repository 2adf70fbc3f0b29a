package controller

import (
	"fmt"
	"math"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// The SchedulerPolicy API's defaults. The API server fills them in on
// create, so they matter only for objects written before a default existed
// and for pools without a policy.
const (
	defaultFleetInterval     = 5 * time.Second
	defaultActingDecayHalf   = placement.DefaultDecayHalfLife
	defaultMaxPauseDuration  = placement.DefaultMaxPauseDuration
	defaultBufferPerProgram  = placement.DefaultBufferTokensPerProgram
	defaultActingTokenWeight = placement.DefaultActingTokenWeight
	defaultWaitAging         = placement.DefaultWaitAging
	defaultResumeFirstAfter  = placement.DefaultResumeFirstAfter
	defaultFairnessBound     = 0
	defaultCacheAffinityWait = placement.DefaultCacheAffinityWait
)

// fleetPolicy is what the fleet loop runs one pool with.
type fleetPolicy struct {
	placement placement.Policy
	// interval is how often the pool's pods are read and re-placed.
	interval time.Duration
}

// noPolicy is the fleet policy of a pool without a (resolvable)
// SchedulerPolicy: the pods run with the runtime's defaults, so the loop
// keeps programs where they are and never pauses one.
func noPolicy() fleetPolicy {
	p := placement.DefaultPolicy()
	p.Mode = placement.ModeDefault
	return fleetPolicy{placement: p, interval: defaultFleetInterval}
}

// convertPolicy turns a SchedulerPolicy's spec into the placement
// algorithm's policy. Unset fields take the API's defaults; the result is
// validated, so an error means the spec got past the API server's schema
// (or was written before a rule existed) and the caller should fall back
// to noPolicy.
func convertPolicy(spec *servingv1alpha1.SchedulerPolicySpec) (fleetPolicy, error) {
	out := noPolicy()
	p := &out.placement
	switch spec.Mode {
	case "", servingv1alpha1.SchedulingModeDefault:
		p.Mode = placement.ModeDefault
	case servingv1alpha1.SchedulingModeProgramAware:
		p.Mode = placement.ModeProgramAware
	default:
		return fleetPolicy{}, fmt.Errorf("mode %q: want %s or %s", spec.Mode,
			servingv1alpha1.SchedulingModeDefault, servingv1alpha1.SchedulingModeProgramAware)
	}
	out.interval = durationOr(spec.Interval, defaultFleetInterval)
	if out.interval <= 0 {
		return fleetPolicy{}, fmt.Errorf("interval %v: must be positive", out.interval)
	}

	p.ActingTokenWeight = defaultActingTokenWeight
	if spec.ActingTokenWeight != "" {
		w, err := parseFraction(spec.ActingTokenWeight)
		if err != nil {
			return fleetPolicy{}, fmt.Errorf("actingTokenWeight: %w", err)
		}
		p.ActingTokenWeight = w
	}
	p.BufferTokensPerProgram = defaultBufferPerProgram
	if spec.BufferTokensPerProgram != nil {
		p.BufferTokensPerProgram = int64(*spec.BufferTokensPerProgram)
	}
	p.ActingDecay = placement.Decay{
		Enabled:  spec.ActingTokenDecay.Enabled,
		HalfLife: durationOr(spec.ActingTokenDecay.HalfLife, defaultActingDecayHalf),
	}
	p.ActingOnHost = spec.ActingOnHost == nil || *spec.ActingOnHost
	p.DeviceOvercommit = placement.DefaultPolicy().DeviceOvercommit
	if spec.DeviceOvercommitPercent != nil {
		p.DeviceOvercommit = float64(*spec.DeviceOvercommitPercent) / 100
	}
	p.MaxPauseDuration = durationOr(spec.MaxPauseDuration, defaultMaxPauseDuration)
	p.WaitAging = durationOr(spec.Fairness.WaitAging, defaultWaitAging)
	p.ResumeFirstAfter = durationOr(spec.Fairness.ResumeFirstAfter, defaultResumeFirstAfter)
	p.FairnessBound = durationOr(spec.Fairness.Bound, defaultFairnessBound)
	p.CacheAffinityWait = durationOr(spec.Fairness.CacheAffinityWait, defaultCacheAffinityWait)
	if kt := spec.KVTransfer; kt.Enabled {
		p.KVTransferBandwidth = placement.DefaultKVTransferBandwidth
		if kt.BandwidthGbps != nil {
			p.KVTransferBandwidth = float64(*kt.BandwidthGbps) * 1e9 / 8
		}
		if kt.PrefillTokensPerSecond != nil {
			p.PrefillTokensPerSecond = float64(*kt.PrefillTokensPerSecond)
		}
	}
	if err := p.Validate(); err != nil {
		return fleetPolicy{}, err
	}
	return out, nil
}

// parseFraction reads a Fraction ("0.9"). The API's pattern admits only
// decimals from 0 to 1; the range is checked again for objects that
// predate it.
func parseFraction(f servingv1alpha1.Fraction) (float64, error) {
	v, err := strconv.ParseFloat(string(f), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a decimal number", string(f))
	}
	if math.IsNaN(v) || v < 0 || v > 1 {
		return 0, fmt.Errorf("%q is outside [0, 1]", string(f))
	}
	return v, nil
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}
