package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/fleet"
)

// The fleet loop's metrics, served with the manager's own on its metrics
// endpoint. kvpilot_pool_recommended_replicas is the autoscaling signal:
// an HPA (through prometheus-adapter) or KEDA scales a pool on it.
var (
	fleetPrograms = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_programs",
		Help: "Agent programs of a pool by state: active (placed on a pod) or paused (waiting for room).",
	}, []string{"namespace", "pool", "state"})
	fleetPauses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvpilot_program_pauses_total",
		Help: "Programs the fleet loop paused to keep a pod from thrashing its KV cache.",
	}, []string{"namespace", "pool"})
	fleetResumes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvpilot_program_resumes_total",
		Help: "Paused or new programs the fleet loop placed on a pod.",
	}, []string{"namespace", "pool"})
	fleetPodCapacity = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_pod_kv_capacity_tokens",
		Help: "A runtime pod's KV-cache size in tokens (blocks × block size).",
	}, []string{"namespace", "pool", "pod"})
	fleetPodPlaced = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_pod_kv_placed_tokens",
		Help: "Tokens the placement charges a runtime pod with: its programs' KV caches plus per-program headroom.",
	}, []string{"namespace", "pool", "pod"})
	fleetFairnessPauses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvpilot_program_fairness_pauses_total",
		Help: "Programs paused or marked for pause by the fairness bound, to resume a program that waited past it.",
	}, []string{"namespace", "pool"})
	fleetOldestWait = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_program_oldest_wait_seconds",
		Help: "How long the longest-waiting paused program of a pool has waited.",
	}, []string{"namespace", "pool"})
	fleetRoundDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kvpilot_fleet_round_duration_seconds",
		Help:    "Duration of one fleet round of a pool: read every pod, decide, push placements.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"namespace", "pool"})
	fleetRoundErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvpilot_fleet_round_errors_total",
		Help: "Fleet rounds of a pool that failed, or in which a pod could not be read or sent its placement.",
	}, []string{"namespace", "pool"})
	fleetRecommendedReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_pool_recommended_replicas",
		Help: "Replicas the fleet loop estimates would run every program of a pool without pausing.",
	}, []string{"namespace", "pool"})
	// The pool's status as gauges, so a dashboard shows it next to the
	// rest without kube-state-metrics (which cannot read custom
	// resources' status unless configured for them).
	poolReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_pool_replicas",
		Help: "Runtime pods of a pool: desired (spec.replicas) and ready (status.readyReplicas).",
	}, []string{"namespace", "pool", "state"})
	poolModelReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_pool_model_ready",
		Help: "1 when a pool's ModelReady condition is True (every pod has fetched the model of its source.url), 0 while pods fetch it or a fetch failed; absent for pools without a source.url.",
	}, []string{"namespace", "pool"})
	poolModelDownload = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_pool_model_download_bytes",
		Help: "Bytes of a pool's model of source.url its downloading pods have (kind=done) and will have when they finish (kind=total), summed over the pods that report progress (status.model); absent while none downloads, total absent while the store has not said the size.",
	}, []string{"namespace", "pool", "kind"})
)

func init() {
	metrics.Registry.MustRegister(fleetPrograms, fleetPauses, fleetResumes, fleetFairnessPauses, fleetOldestWait, fleetPodCapacity, fleetPodPlaced,
		fleetRoundDuration, fleetRoundErrors, fleetRecommendedReplicas, poolReplicas, poolModelReady, poolModelDownload)
}

// poolMetrics writes one pool's series. It remembers which pods it
// exported so a pod that goes away stops being reported.
type poolMetrics struct {
	namespace, pool string
	pods            map[string]struct{}
}

func newPoolMetrics(namespace, pool string) *poolMetrics {
	return &poolMetrics{namespace: namespace, pool: pool, pods: map[string]struct{}{}}
}

// status records the pool's replicas and ModelReady condition, as the
// reconciler last wrote them.
func (m *poolMetrics) status(pool *servingv1alpha1.InferencePool) {
	poolReplicas.WithLabelValues(m.namespace, m.pool, "desired").Set(float64(ptr.Deref(pool.Spec.Replicas, 1)))
	poolReplicas.WithLabelValues(m.namespace, m.pool, "ready").Set(float64(pool.Status.ReadyReplicas))
	c := meta.FindStatusCondition(pool.Status.Conditions, servingv1alpha1.PoolModelReady)
	switch {
	case c == nil:
		poolModelReady.DeleteLabelValues(m.namespace, m.pool)
	case c.Status == metav1.ConditionTrue:
		poolModelReady.WithLabelValues(m.namespace, m.pool).Set(1)
	default:
		poolModelReady.WithLabelValues(m.namespace, m.pool).Set(0)
	}
	m.download(pool.Status.Model)
}

// download records the bytes of the downloads in progress, and drops the
// series once none is (a finished download's init container no longer
// reports).
func (m *poolMetrics) download(st *servingv1alpha1.ModelStatus) {
	if st == nil || st.PodsDownloading == 0 {
		poolModelDownload.DeletePartialMatch(prometheus.Labels{"namespace": m.namespace, "pool": m.pool})
		return
	}
	poolModelDownload.WithLabelValues(m.namespace, m.pool, "done").Set(float64(st.BytesDone))
	if st.BytesTotal == nil {
		poolModelDownload.DeleteLabelValues(m.namespace, m.pool, "total")
		return
	}
	poolModelDownload.WithLabelValues(m.namespace, m.pool, "total").Set(float64(*st.BytesTotal))
}

// round records a round's outcome; sum may be nil when the round failed
// before deciding.
func (m *poolMetrics) round(sum *fleet.Summary, err error) {
	// The error counter exists from the first round, at 0, so a query of
	// its rate returns series for a pool that never failed.
	errs := fleetRoundErrors.WithLabelValues(m.namespace, m.pool)
	if err != nil {
		errs.Inc()
	}
	if sum == nil {
		return
	}
	fleetRoundDuration.WithLabelValues(m.namespace, m.pool).Observe(sum.Duration.Seconds())
	fleetPrograms.WithLabelValues(m.namespace, m.pool, "active").Set(float64(sum.ProgramsActive))
	fleetPrograms.WithLabelValues(m.namespace, m.pool, "paused").Set(float64(sum.ProgramsPaused))
	fleetPauses.WithLabelValues(m.namespace, m.pool).Add(float64(sum.Pauses))
	fleetResumes.WithLabelValues(m.namespace, m.pool).Add(float64(sum.Resumes))
	fleetFairnessPauses.WithLabelValues(m.namespace, m.pool).Add(float64(sum.FairnessPauses))
	fleetOldestWait.WithLabelValues(m.namespace, m.pool).Set(sum.OldestWait.Seconds())
	fleetRecommendedReplicas.WithLabelValues(m.namespace, m.pool).Set(float64(sum.RecommendedReplicas))

	seen := make(map[string]struct{}, len(sum.Pods))
	for i := range sum.Pods {
		p := &sum.Pods[i]
		if !p.Reachable {
			continue
		}
		seen[p.Name] = struct{}{}
		fleetPodCapacity.WithLabelValues(m.namespace, m.pool, p.Name).Set(float64(p.CapacityTokens))
		fleetPodPlaced.WithLabelValues(m.namespace, m.pool, p.Name).Set(float64(p.PlacedTokens))
	}
	for name := range m.pods {
		if _, ok := seen[name]; !ok {
			m.forgetPod(name)
		}
	}
	m.pods = seen
}

// empty records a pool with no pods to ask: nothing runs, nothing is
// recommended beyond what exists.
func (m *poolMetrics) empty() {
	fleetPrograms.WithLabelValues(m.namespace, m.pool, "active").Set(0)
	fleetPrograms.WithLabelValues(m.namespace, m.pool, "paused").Set(0)
	fleetRecommendedReplicas.WithLabelValues(m.namespace, m.pool).Set(0)
	fleetOldestWait.WithLabelValues(m.namespace, m.pool).Set(0)
	for name := range m.pods {
		m.forgetPod(name)
	}
	clear(m.pods)
}

func (m *poolMetrics) forgetPod(name string) {
	fleetPodCapacity.DeleteLabelValues(m.namespace, m.pool, name)
	fleetPodPlaced.DeleteLabelValues(m.namespace, m.pool, name)
}

// forget deletes every series of the pool, once the pool is gone.
func (m *poolMetrics) forget() {
	labels := prometheus.Labels{"namespace": m.namespace, "pool": m.pool}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		fleetPrograms, fleetPauses, fleetResumes, fleetFairnessPauses, fleetOldestWait, fleetPodCapacity, fleetPodPlaced,
		fleetRoundDuration, fleetRoundErrors, fleetRecommendedReplicas, poolReplicas, poolModelReady, poolModelDownload,
	} {
		v.DeletePartialMatch(labels)
	}
}
