package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/fleet"
)

// gaugeValue is the value of vec's child with labels, or false when there
// is none.
func gaugeValue(t *testing.T, vec *prometheus.GaugeVec, labels prometheus.Labels) (float64, bool) {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	vec.Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, l := range d.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)
		for k, v := range labels {
			match = match && got[k] == v
		}
		if match {
			return d.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestPoolStatusMetrics(t *testing.T) {
	m := newPoolMetrics("ns-status", "p")
	t.Cleanup(m.forget)
	pool := &servingv1alpha1.InferencePool{}
	pool.Status.ReadyReplicas = 2

	readyLabels := prometheus.Labels{"namespace": "ns-status", "pool": "p"}
	check := func(step string, desired, ready float64, model float64, modelPresent bool) {
		t.Helper()
		for state, want := range map[string]float64{"desired": desired, "ready": ready} {
			got, ok := gaugeValue(t, poolReplicas, prometheus.Labels{"namespace": "ns-status", "pool": "p", "state": state})
			if !ok || got != want {
				t.Errorf("%s: kvpilot_pool_replicas{state=%q} = %v (present %v), want %v", step, state, got, ok, want)
			}
		}
		got, ok := gaugeValue(t, poolModelReady, readyLabels)
		if ok != modelPresent || got != model {
			t.Errorf("%s: kvpilot_pool_model_ready = %v (present %v), want %v (present %v)", step, got, ok, model, modelPresent)
		}
	}

	// No source.url: no ModelReady condition, no series; replicas
	// default to 1 as the reconciler's.
	m.status(pool)
	check("no condition", 1, 2, 0, false)

	pool.Spec.Replicas = ptr.To[int32](3)
	pool.Status.Conditions = []metav1.Condition{{Type: servingv1alpha1.PoolModelReady, Status: metav1.ConditionFalse, Reason: servingv1alpha1.ReasonModelFetching}}
	m.status(pool)
	check("fetching", 3, 2, 0, true)

	pool.Status.Conditions[0].Status = metav1.ConditionTrue
	m.status(pool)
	check("fetched", 3, 2, 1, true)

	// The source.url removed: the condition goes, and so does the series.
	pool.Status.Conditions = nil
	m.status(pool)
	check("removed", 3, 2, 0, false)

	m.forget()
	if _, ok := gaugeValue(t, poolReplicas, prometheus.Labels{"namespace": "ns-status", "pool": "p", "state": "desired"}); ok {
		t.Error("forget left kvpilot_pool_replicas behind")
	}
}

func TestPoolDownloadMetrics(t *testing.T) {
	m := newPoolMetrics("ns-download", "p")
	t.Cleanup(m.forget)
	pool := &servingv1alpha1.InferencePool{}
	check := func(step string, want map[string]float64) {
		t.Helper()
		for _, kind := range []string{"done", "total"} {
			got, ok := gaugeValue(t, poolModelDownload, prometheus.Labels{"namespace": "ns-download", "pool": "p", "kind": kind})
			w, present := want[kind]
			if ok != present || got != w {
				t.Errorf("%s: kvpilot_pool_model_download_bytes{kind=%q} = %v (present %v), want %v (present %v)", step, kind, got, ok, w, present)
			}
		}
	}
	m.status(pool)
	check("no source.url", nil)

	pool.Status.Model = &servingv1alpha1.ModelStatus{PodsFetching: 1}
	m.status(pool)
	check("fetching, none downloading", nil)

	pool.Status.Model = &servingv1alpha1.ModelStatus{PodsFetching: 1, PodsDownloading: 1, BytesDone: 5}
	m.status(pool)
	check("size unknown", map[string]float64{"done": 5})

	pool.Status.Model.BytesDone, pool.Status.Model.BytesTotal = 6, ptr.To[int64](10)
	m.status(pool)
	check("downloading", map[string]float64{"done": 6, "total": 10})

	pool.Status.Model = &servingv1alpha1.ModelStatus{PodsFetched: 1}
	m.status(pool)
	check("fetched", nil)
}

// TestRoundErrorsExistAtZero: a pool whose rounds never failed still has
// its error counter, at 0, so the dashboard's rate of it shows the pool.
func TestRoundErrorsExistAtZero(t *testing.T) {
	m := newPoolMetrics("ns-errors", "p")
	t.Cleanup(m.forget)
	m.round(&fleet.Summary{}, nil)
	ch := make(chan prometheus.Metric, 16)
	fleetRoundErrors.Collect(ch)
	close(ch)
	found := false
	for metric := range ch {
		var d dto.Metric
		if err := metric.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "namespace" && l.GetValue() == "ns-errors" {
				found = true
				if v := d.GetCounter().GetValue(); v != 0 {
					t.Errorf("kvpilot_fleet_round_errors_total = %v after a good round, want 0", v)
				}
			}
		}
	}
	if !found {
		t.Error("no kvpilot_fleet_round_errors_total series after a good round")
	}
}
