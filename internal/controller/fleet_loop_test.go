package controller_test

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/controller"
	"github.com/kvpilot/kvpilot/internal/runtime/control"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/util/testing/builders"
)

// loopbackPods maps the Pod objects of envtest (which runs no kubelet) to
// control APIs served in this process, keyed by namespace/name. The
// suite's manager resolves pods' addresses with loopbackAddresses.
var loopbackPods sync.Map

func loopbackAddresses(pod *corev1.Pod) (apiAddr, controlAddr string) {
	v, ok := loopbackPods.Load(pod.Namespace + "/" + pod.Name)
	if !ok {
		return "", ""
	}
	fp := v.(*fakeRuntimePod)
	return fp.apiAddr, fp.controlAddr
}

// fakeRuntimePod is a runtime pod's program table behind the real control
// API on loopback, with a fixed KV cache.
type fakeRuntimePod struct {
	table                *programs.Table
	apiAddr, controlAddr string
}

func startFakeRuntimePod(ns, name, token string, kv wire.KVReport) *fakeRuntimePod {
	fp := &fakeRuntimePod{apiAddr: name + ".pods.test:8000"}
	fp.table = programs.New(programs.Config{Pod: name, Addr: fp.apiAddr, KV: func() wire.KVReport { return kv }})
	srv := httptest.NewServer(control.Handler(fp.table, token))
	fp.controlAddr = strings.TrimPrefix(srv.URL, "http://")
	key := ns + "/" + name
	loopbackPods.Store(key, fp)
	DeferCleanup(func() {
		loopbackPods.Delete(key)
		srv.Close()
	})
	return fp
}

// run has a program take one step on the pod and go ACTING with a context
// of tokens.
func (fp *fakeRuntimePod) run(id string, tokens int64) {
	r := fp.table.Route(id, false)
	Expect(r.Kind).To(Equal(programs.Local), "program %s runs locally", id)
	fp.table.End(r.Ticket, tokens, 0, nil)
}

func (fp *fakeRuntimePod) programsIn(state string) []string {
	var ids []string
	for _, p := range fp.table.Report().Programs {
		if p.Placed && p.State == state {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// metricValue reads one series from the manager's registry.
func metricValue(g Gomega, name string, labels map[string]string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue series
				}
			}
			// A histogram reads as its count of observations.
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	g.Expect(name).To(BeEmpty(), "no series %s%v", name, labels)
	return 0
}

var _ = Describe("Fleet loop", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

	controlToken := func(ctx SpecContext, pool string) string {
		secret := &corev1.Secret{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(controller.ControlSecretName(pool)), secret)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		return string(secret.Data["token"])
	}
	// createReadyPod plays the Deployment controller and the kubelet: a
	// pod of the pool, running and ready.
	createReadyPod := func(ctx SpecContext, pool, name string) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{controller.LabelPool: pool}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runtime", Image: defaultImage}}},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.Now()}},
		}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	}
	getPool := func(g Gomega, ctx SpecContext, name string) *servingv1alpha1.InferencePool {
		pool := &servingv1alpha1.InferencePool{}
		g.Expect(k8sClient.Get(ctx, key(name), pool)).To(Succeed())
		return pool
	}

	It("places programs across the pool's pods and reports their capacity", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeSchedulerPolicy("agents", ns).
			Mode(servingv1alpha1.SchedulingModeProgramAware).Interval(time.Second).Obj())).To(Succeed())
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("agents", ns).Replicas(2).Policy("agents").Obj())).To(Succeed())
		token := controlToken(ctx, "agents")

		// Pod a runs four programs of 5,000 tokens: 20,400 tokens charged
		// (with the 100-token buffer each) on a 16,000-token KV cache.
		a := startFakeRuntimePod(ns, "agents-a", token, wire.KVReport{BlockSize: 16, TotalBlocks: 1000, UsedBlocks: 800})
		b := startFakeRuntimePod(ns, "agents-b", token, wire.KVReport{BlockSize: 16, TotalBlocks: 1000})
		for _, id := range []string{"p1", "p2", "p3", "p4"} {
			a.run(id, 5000)
		}
		createReadyPod(ctx, "agents", "agents-a")
		createReadyPod(ctx, "agents", "agents-b")

		By("filling status.capacity next to the InferencePool controller's status")
		Eventually(func(g Gomega) {
			pool := getPool(g, ctx, "agents")
			c := pool.Status.Capacity
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.TotalKVTokens).To(BeEquivalentTo(32000))
			g.Expect(c.UsedKVTokens).To(BeEquivalentTo(12800))
			g.Expect(c.UsedKVPercent).To(BeEquivalentTo(40))
			g.Expect(c.ProgramsActive).To(BeEquivalentTo(4))
			g.Expect(c.RecommendedReplicas).NotTo(BeNil())
			g.Expect(c.Pods).To(HaveLen(2))
			g.Expect(c.Pods[0].Name).To(Equal("agents-a"), "the busiest pod first")
			g.Expect(meta.FindStatusCondition(pool.Status.Conditions, servingv1alpha1.PoolPolicyResolved)).NotTo(BeNil())
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("pausing a program on the pod over capacity and resuming it where it fits")
		pool := map[string]string{"namespace": ns, "pool": "agents"}
		Eventually(func(g Gomega) {
			g.Expect(metricValue(g, "kvpilot_program_pauses_total", pool)).To(BeNumerically(">=", 1))
			g.Expect(a.programsIn("ACTIVE")).To(HaveLen(3))
			g.Expect(b.programsIn("ACTIVE")).To(HaveLen(1))
			g.Expect(metricValue(g, "kvpilot_program_resumes_total", pool)).To(BeNumerically(">=", 1))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("annotating each pod with its program load as its deletion cost")
		cost := func(g Gomega, name string) int {
			pod := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, key(name), pod)).To(Succeed())
			v, ok := pod.Annotations[controller.AnnotationPodDeletionCost]
			g.Expect(ok).To(BeTrue(), "pod %s has no deletion cost", name)
			n, err := strconv.Atoi(v)
			g.Expect(err).NotTo(HaveOccurred())
			return n
		}
		Eventually(func(g Gomega) {
			g.Expect(cost(g, "agents-a")).To(BeNumerically(">", cost(g, "agents-b")), "scale-down removes the emptiest pod")
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("exporting the recommended replicas and the pods' capacity to Prometheus")
		Eventually(func(g Gomega) {
			c := getPool(g, ctx, "agents").Status.Capacity
			g.Expect(c).NotTo(BeNil())
			g.Expect(metricValue(g, "kvpilot_pool_recommended_replicas", pool)).To(BeEquivalentTo(*c.RecommendedReplicas))
			g.Expect(metricValue(g, "kvpilot_pod_kv_capacity_tokens", map[string]string{"namespace": ns, "pool": "agents", "pod": "agents-b"})).To(BeEquivalentTo(16000))
			g.Expect(metricValue(g, "kvpilot_programs", map[string]string{"namespace": ns, "pool": "agents", "state": "active"})).To(BeEquivalentTo(4))
			g.Expect(metricValue(g, "kvpilot_fleet_round_duration_seconds", pool)).To(BeNumerically(">=", 2))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("forgetting the pool's series once the pool is gone")
		Expect(k8sClient.Delete(ctx, getPool(Default, ctx, "agents"))).To(Succeed())
		Eventually(func(g Gomega) {
			families, err := ctrlmetrics.Registry.Gather()
			g.Expect(err).NotTo(HaveOccurred())
			for _, f := range families {
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						g.Expect(l.GetName() == "namespace" && l.GetValue() == ns).To(BeFalse(), "%s still has a series of the pool", f.GetName())
					}
				}
			}
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})

	It("moves the programs of a terminating pod to the others", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeSchedulerPolicy("drain", ns).
			Mode(servingv1alpha1.SchedulingModeProgramAware).Interval(time.Second).Obj())).To(Succeed())
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("drain", ns).Replicas(2).Policy("drain").Obj())).To(Succeed())
		token := controlToken(ctx, "drain")
		a := startFakeRuntimePod(ns, "drain-a", token, wire.KVReport{BlockSize: 16, TotalBlocks: 1000})
		b := startFakeRuntimePod(ns, "drain-b", token, wire.KVReport{BlockSize: 16, TotalBlocks: 1000})
		a.run("p1", 1000)
		a.run("p2", 2000)
		createReadyPod(ctx, "drain", "drain-a")
		createReadyPod(ctx, "drain", "drain-b")
		Eventually(func(g Gomega) {
			c := getPool(g, ctx, "drain").Status.Capacity
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Pods).To(HaveLen(2))
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Expect(a.programsIn("ACTIVE")).To(ConsistOf("p1", "p2"), "sticky while pod a serves")

		By("scaling pod a down: a finalizer keeps it terminating, as a draining runtime would")
		pod := &corev1.Pod{}
		// The fleet loop writes the pod's deletion cost meanwhile: retry on
		// a conflict.
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key("drain-a"), pod)).To(Succeed())
			pod.Finalizers = append(pod.Finalizers, "kvpilot.test/draining")
			g.Expect(k8sClient.Update(ctx, pod)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			p := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, key("drain-a"), p)).To(Succeed())
			p.Finalizers = nil
			Expect(k8sClient.Update(ctx, p)).To(Succeed())
		})
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(b.programsIn("ACTIVE")).To(ConsistOf("p1", "p2"))
			g.Expect(a.programsIn("ACTIVE")).To(BeEmpty())
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})

	It("runs a pool without a policy in Default mode: nothing is paused", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("plain", ns).Obj())).To(Succeed())
		token := controlToken(ctx, "plain")
		a := startFakeRuntimePod(ns, "plain-a", token, wire.KVReport{BlockSize: 16, TotalBlocks: 100})
		a.run("big", 5000) // far over the pod's 1,600 tokens
		createReadyPod(ctx, "plain", "plain-a")

		Eventually(func(g Gomega) {
			c := getPool(g, ctx, "plain").Status.Capacity
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.ProgramsActive).To(BeEquivalentTo(1))
			g.Expect(c.ProgramsPaused).To(BeZero())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Expect(a.programsIn("ACTIVE")).To(ConsistOf("big"))
	})
})
