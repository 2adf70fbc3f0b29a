package controller_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/controller"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/fetch"
	"github.com/kvpilot/kvpilot/internal/util/testing/builders"
	"github.com/kvpilot/kvpilot/internal/util/testing/modelstore"
)

// managerGauges reads the manager's registry (the manager runs in this
// process) and returns the values of name's series in namespace, keyed by
// pool and kind.
func managerGauges(g Gomega, name, namespace string) map[string]float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] == namespace {
				out[l["pool"]+"/"+l["kind"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// storedStatus reads an object's status as the API server stores it, which
// is what kubectl's print columns read: a field left out prints <none>.
func storedStatus(g Gomega, ctx SpecContext, kind, namespace, name string) map[string]any {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(servingv1alpha1.GroupVersion.WithKind(kind))
	g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u)).To(Succeed())
	status, _, err := unstructured.NestedMap(u.Object, "status")
	g.Expect(err).NotTo(HaveOccurred())
	return status
}

var _ = Describe("InferencePool controller", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

	getDeployment := func(g Gomega, ctx SpecContext, name string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, key(name), d)).To(Succeed())
		return d
	}
	condition := func(g Gomega, ctx SpecContext, name, condType string) *metav1.Condition {
		pool := &servingv1alpha1.InferencePool{}
		g.Expect(k8sClient.Get(ctx, key(name), pool)).To(Succeed())
		c := meta.FindStatusCondition(pool.Status.Conditions, condType)
		g.Expect(c).NotTo(BeNil(), "condition %s not set yet", condType)
		g.Expect(c.ObservedGeneration).To(Equal(pool.Generation), "condition %s is stale", condType)
		return c
	}
	templateHash := func(d *appsv1.Deployment) string {
		return d.Spec.Template.Annotations[controller.AnnotationTemplateHash]
	}
	setDeploymentStatus := func(ctx SpecContext, name string, set func(*appsv1.Deployment)) {
		Eventually(func(g Gomega) {
			d := getDeployment(g, ctx, name)
			set(d)
			g.Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
	}

	It("runs a pool as a Deployment, a Service and a PodDisruptionBudget it owns", func(ctx SpecContext) {
		pool := builders.MakeInferencePool("chat", ns).Replicas(2).MaxNumSeqs(32).Obj()
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())

		isOwner := func(g Gomega, obj client.Object) {
			refs := obj.GetOwnerReferences()
			g.Expect(refs).To(HaveLen(1))
			g.Expect(refs[0].UID).To(Equal(pool.UID))
			g.Expect(refs[0].Kind).To(Equal("InferencePool"))
			g.Expect(ptr.Deref(refs[0].Controller, false)).To(BeTrue())
		}

		Eventually(func(g Gomega) {
			d := getDeployment(g, ctx, "chat")
			isOwner(g, d)
			g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{controller.LabelPool: "chat"}))
			g.Expect(templateHash(d)).NotTo(BeEmpty())

			spec := d.Spec.Template.Spec
			g.Expect(spec.Containers).To(HaveLen(1))
			c := spec.Containers[0]
			g.Expect(c.Name).To(Equal("runtime"))
			g.Expect(c.Image).To(Equal(defaultImage))
			g.Expect(c.Command).To(Equal([]string{"/kvpilot-runtime"}))
			g.Expect(c.Args).To(ContainElements("--model=builtin:tiny", "--served-model-name=tiny", "--executor=cpu",
				"--max-num-seqs=32", "--control-token-file=/var/run/kvpilot/control/token"))
			g.Expect(c.Ports).To(ContainElements(
				HaveField("Name", "http"), HaveField("Name", "control")))
			g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/ready"))
			g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/health"))
			g.Expect(ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false)).To(BeTrue())
			g.Expect(spec.TopologySpreadConstraints).To(HaveLen(1))
			// Endpoints go before the listener: the API server kept the
			// kubelet's preStop sleep, and the grace period covers it.
			g.Expect(c.Lifecycle).NotTo(BeNil())
			g.Expect(c.Lifecycle.PreStop).NotTo(BeNil())
			g.Expect(c.Lifecycle.PreStop.Sleep).To(HaveValue(HaveField("Seconds", BeEquivalentTo(5))))
			g.Expect(spec.TerminationGracePeriodSeconds).To(HaveValue(BeEquivalentTo(50)))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		Eventually(func(g Gomega) {
			svc := &corev1.Service{}
			g.Expect(k8sClient.Get(ctx, key("chat"), svc)).To(Succeed())
			isOwner(g, svc)
			g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
			g.Expect(svc.Spec.Selector).To(Equal(map[string]string{controller.LabelPool: "chat"}))
			g.Expect(svc.Spec.Ports).To(HaveLen(1))
			g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(8000))
			g.Expect(svc.Spec.Ports[0].TargetPort).To(Equal(intstr.FromString("http")))

			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(k8sClient.Get(ctx, key("chat"), pdb)).To(Succeed())
			isOwner(g, pdb)
			g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))

			secret := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, key(controller.ControlSecretName("chat")), secret)).To(Succeed())
			isOwner(g, secret)
			g.Expect(secret.Data["token"]).To(HaveLen(64), "32 random bytes, hex")
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("keeping the control token across reconciles")
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key(controller.ControlSecretName("chat")), secret)).To(Succeed())
		token := string(secret.Data["token"])
		Eventually(func(g Gomega) {
			p := &servingv1alpha1.InferencePool{}
			g.Expect(k8sClient.Get(ctx, key("chat"), p)).To(Succeed())
			p.Spec.Replicas = ptr.To[int32](3)
			g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getDeployment(g, ctx, "chat").Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Expect(k8sClient.Get(ctx, key(controller.ControlSecretName("chat")), secret)).To(Succeed())
		Expect(string(secret.Data["token"])).To(Equal(token))
	})

	It("writes zero replica counts as 0, so kubectl prints 0 ready", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("idle", ns).Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			condition(g, ctx, "idle", servingv1alpha1.PoolAvailable)
			st := storedStatus(g, ctx, "InferencePool", ns, "idle")
			for _, f := range []string{"replicas", "readyReplicas", "updatedReplicas"} {
				g.Expect(st).To(HaveKeyWithValue(f, BeEquivalentTo(0)), "status.%s", f)
			}
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})

	It("rolls the pods when the spec changes, and not when only replicas do", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("roll", ns).Obj())).To(Succeed())
		var before string
		Eventually(func(g Gomega) {
			before = templateHash(getDeployment(g, ctx, "roll"))
			g.Expect(before).NotTo(BeEmpty())
		}, reconcileTimeout, pollInterval).Should(Succeed())

		Eventually(func(g Gomega) {
			p := &servingv1alpha1.InferencePool{}
			g.Expect(k8sClient.Get(ctx, key("roll"), p)).To(Succeed())
			p.Spec.Replicas = ptr.To[int32](4)
			g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			d := getDeployment(g, ctx, "roll")
			g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(4)))
			g.Expect(templateHash(d)).To(Equal(before))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		Eventually(func(g Gomega) {
			p := &servingv1alpha1.InferencePool{}
			g.Expect(k8sClient.Get(ctx, key("roll"), p)).To(Succeed())
			p.Spec.Engine = &servingv1alpha1.EngineSpec{MaxNumSeqs: ptr.To[int32](8)}
			g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			d := getDeployment(g, ctx, "roll")
			g.Expect(templateHash(d)).NotTo(Equal(before))
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--max-num-seqs=8"))
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})

	It("scales through the scale subresource", func(ctx SpecContext) {
		pool := builders.MakeInferencePool("scaled", ns).Obj()
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())

		Eventually(func(g Gomega) {
			scale := &autoscalingv1.Scale{}
			g.Expect(k8sClient.SubResource("scale").Get(ctx, pool, scale)).To(Succeed())
			g.Expect(scale.Status.Selector).To(Equal(controller.LabelPool + "=scaled"))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		Eventually(func(g Gomega) {
			scale := &autoscalingv1.Scale{}
			g.Expect(k8sClient.SubResource("scale").Get(ctx, pool, scale)).To(Succeed())
			scale.Spec.Replicas = 5
			g.Expect(k8sClient.SubResource("scale").Update(ctx, pool, client.WithSubResourceBody(scale))).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())

		Eventually(func(g Gomega) {
			p := &servingv1alpha1.InferencePool{}
			g.Expect(k8sClient.Get(ctx, key("scaled"), p)).To(Succeed())
			g.Expect(p.Spec.Replicas).To(HaveValue(BeEquivalentTo(5)))
			g.Expect(getDeployment(g, ctx, "scaled").Spec.Replicas).To(HaveValue(BeEquivalentTo(5)))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("reporting the pods that exist as the scale's status")
		setDeploymentStatus(ctx, "scaled", builders.DeploymentRolledOut)
		Eventually(func(g Gomega) {
			scale := &autoscalingv1.Scale{}
			g.Expect(k8sClient.SubResource("scale").Get(ctx, pool, scale)).To(Succeed())
			g.Expect(scale.Status.Replicas).To(BeEquivalentTo(5))
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})

	It("runs with defaults while its policy is missing and picks the policy up when it appears", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("agents", ns).Policy("program-aware").Obj())).To(Succeed())

		Eventually(func(g Gomega) {
			c := condition(g, ctx, "agents", servingv1alpha1.PoolPolicyResolved)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(servingv1alpha1.ReasonPolicyNotFound))
			g.Expect(c.Message).To(ContainSubstring(`"program-aware"`))
			g.Expect(getDeployment(g, ctx, "agents").Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--default-max-tokens")))
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			events := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("Reason", servingv1alpha1.ReasonPolicyNotFound),
				HaveField("Type", corev1.EventTypeWarning),
				HaveField("Regarding.Name", "agents"))))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		policy := builders.MakeSchedulerPolicy("program-aware", ns).
			Mode(servingv1alpha1.SchedulingModeProgramAware).DefaultMaxTokens(512).Obj()
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())

		Eventually(func(g Gomega) {
			c := condition(g, ctx, "agents", servingv1alpha1.PoolPolicyResolved)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(servingv1alpha1.ReasonPolicyFound))
			g.Expect(getDeployment(g, ctx, "agents").Spec.Template.Spec.Containers[0].Args).To(ContainElement("--default-max-tokens=512"))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("rolling the pods when the policy's request defaults change")
		var before string
		Eventually(func(g Gomega) { before = templateHash(getDeployment(g, ctx, "agents")) }, reconcileTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			p := &servingv1alpha1.SchedulerPolicy{}
			g.Expect(k8sClient.Get(ctx, key("program-aware"), p)).To(Succeed())
			p.Spec.Completion.Stop = []string{"</answer>"}
			g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			d := getDeployment(g, ctx, "agents")
			g.Expect(templateHash(d)).NotTo(Equal(before))
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--stop=</answer>"))
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})

	It("follows the Deployment's readiness in its conditions", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("ready", ns).Replicas(2).Obj())).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(condition(g, ctx, "ready", servingv1alpha1.PoolAvailable).Status).To(Equal(metav1.ConditionFalse))
			g.Expect(condition(g, ctx, "ready", servingv1alpha1.PoolProgressing).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(g, ctx, "ready", servingv1alpha1.PoolDegraded).Status).To(Equal(metav1.ConditionFalse))
			g.Expect(condition(g, ctx, "ready", servingv1alpha1.PoolPolicyResolved).Reason).To(Equal(servingv1alpha1.ReasonNoPolicyReference))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		setDeploymentStatus(ctx, "ready", builders.DeploymentRolledOut)
		Eventually(func(g Gomega) {
			g.Expect(condition(g, ctx, "ready", servingv1alpha1.PoolAvailable).Status).To(Equal(metav1.ConditionTrue))
			progressing := condition(g, ctx, "ready", servingv1alpha1.PoolProgressing)
			g.Expect(progressing.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(progressing.Reason).To(Equal(servingv1alpha1.ReasonRolloutComplete))
			pool := &servingv1alpha1.InferencePool{}
			g.Expect(k8sClient.Get(ctx, key("ready"), pool)).To(Succeed())
			g.Expect(pool.Status.ReadyReplicas).To(BeEquivalentTo(2))
			g.Expect(pool.Status.ObservedGeneration).To(Equal(pool.Generation))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("writing the status only when it changes")
		pool := &servingv1alpha1.InferencePool{}
		Expect(k8sClient.Get(ctx, key("ready"), pool)).To(Succeed())
		steady := pool.ResourceVersion
		// A change to the Deployment that is not the controller's requeues
		// the pool; its status must stay as it is. (A label: a Deployment's
		// annotations are copied to its ReplicaSets, so changing them bumps
		// its generation and would truly start a rollout.)
		Eventually(func(g Gomega) {
			d := getDeployment(g, ctx, "ready")
			d.Labels["example.com/touched"] = "yes"
			g.Expect(k8sClient.Update(ctx, d)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Consistently(func(g Gomega) {
			p := &servingv1alpha1.InferencePool{}
			g.Expect(k8sClient.Get(ctx, key("ready"), p)).To(Succeed())
			g.Expect(p.ResourceVersion).To(Equal(steady))
		}, quietPeriod, pollInterval).Should(Succeed())

		By("reporting a stalled rollout as Degraded")
		setDeploymentStatus(ctx, "ready", builders.DeploymentStalled)
		Eventually(func(g Gomega) {
			degraded := condition(g, ctx, "ready", servingv1alpha1.PoolDegraded)
			g.Expect(degraded.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(degraded.Reason).To(Equal(servingv1alpha1.ReasonProgressDeadlineExceeded))
			g.Expect(condition(g, ctx, "ready", servingv1alpha1.PoolAvailable).Status).To(Equal(metav1.ConditionFalse))
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})

	It("reports a url pool's fetches in its ModelReady condition", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("fetched", ns).URLModel("hf://acme/m-GGUF:Q4_K_M", nil).Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "fetched", servingv1alpha1.PoolModelReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(c.Reason).To(Equal(servingv1alpha1.ReasonNoPods))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("failing with the fetch's own message")
		// envtest runs no Deployment controller or kubelet: the pod and its
		// status are written here as they would be.
		tmpl := getDeployment(Default, ctx, "fetched").Spec.Template
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fetched-0", Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		setFetch := func(st corev1.ContainerStatus) {
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, key("fetched-0"), pod)).To(Succeed())
				st.Name, st.Image = "fetch-model", pod.Spec.InitContainers[0].Image
				pod.Status.InitContainerStatuses = []corev1.ContainerStatus{st}
				g.Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
			}, reconcileTimeout, pollInterval).Should(Succeed())
		}
		setFetch(corev1.ContainerStatus{
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
				Message: `level=ERROR msg="fetch failed" err="hf://acme/m-GGUF@main/m-Q4_K_M.gguf: 401 Unauthorized: the repository is gated"`}},
		})
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "fetched", servingv1alpha1.PoolModelReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(servingv1alpha1.ReasonModelFetchFailed))
			g.Expect(c.Message).To(ContainSubstring("fetched-0: "))
			g.Expect(c.Message).To(ContainSubstring("401 Unauthorized"))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("showing a running fetch's progress, refreshed while the pod's status stays the same")
		// A real fetch from a store on loopback that sends half of the
		// model and holds the rest, its progress served as the init
		// container serves it, where the pod's control API will be.
		model := bytes.Repeat([]byte("GGUF"), 1<<18)
		store := modelstore.Start(model, len(model)/2)
		DeferCleanup(store.Close)
		tracker := new(fetch.Tracker)
		mux := http.NewServeMux()
		mux.Handle(wire.FetchProgressPath, tracker)
		progress := httptest.NewServer(mux)
		DeferCleanup(progress.Close)
		loopbackPods.Store(ns+"/fetched-0", &fakeRuntimePod{controlAddr: strings.TrimPrefix(progress.URL, "http://")})
		DeferCleanup(func() { loopbackPods.Delete(ns + "/fetched-0") })
		fetched := make(chan error, 1)
		go func() {
			_, err := fetch.Fetch(context.Background(), store.URL, fetch.Options{CacheDir: GinkgoT().TempDir(), Tracker: tracker})
			fetched <- err
		}()
		setFetch(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "fetched", servingv1alpha1.PoolModelReady)
			g.Expect(c.Reason).To(Equal(servingv1alpha1.ReasonModelFetching))
			g.Expect(c.Message).To(Equal("1 of 1 pods fetching the model; fetched-0 downloading: 512.0 KiB of 1.0 MiB (50%)"))
		}, reconcileTimeout, pollInterval).Should(Succeed())
		By("counting the bytes in status.model and the manager's download gauge")
		Eventually(func(g Gomega) {
			g.Expect(storedStatus(g, ctx, "InferencePool", ns, "fetched")).To(HaveKeyWithValue("model", Equal(map[string]any{
				"podsFetched": int64(0), "podsFetching": int64(1), "podsFailed": int64(0), "podsDownloading": int64(1),
				"bytesDone": int64(len(model) / 2), "bytesTotal": int64(len(model)), "downloadPercent": int64(50),
			})))
			g.Expect(managerGauges(g, "kvpilot_pool_model_download_bytes", ns)).To(Equal(map[string]float64{
				"fetched/done": float64(len(model) / 2), "fetched/total": float64(len(model)),
			}))
		}, reconcileTimeout, pollInterval).Should(Succeed())
		store.Release()
		Expect(<-fetched).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "fetched", servingv1alpha1.PoolModelReady)
			g.Expect(c.Message).To(Equal("1 of 1 pods fetching the model; fetched-0 downloaded 1.0 MiB"))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("turning True once the fetch is done")
		setFetch(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}})
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "fetched", servingv1alpha1.PoolModelReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(servingv1alpha1.ReasonModelFetched))
			g.Expect(storedStatus(g, ctx, "InferencePool", ns, "fetched")).To(HaveKeyWithValue("model", Equal(map[string]any{
				"podsFetched": int64(1), "podsFetching": int64(0), "podsFailed": int64(0),
			})))
			g.Expect(managerGauges(g, "kvpilot_pool_model_download_bytes", ns)).To(BeEmpty())
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})

	It("gives accelerator pools GPUs, the product's nodes and a one-at-a-time rollout", func(ctx SpecContext) {
		pool := builders.MakeInferencePool("gpu", ns).PVCModel("weights", "llama-3.1-8b/model.gguf").
			Accelerators(1, "NVIDIA-L4").Obj()
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		Eventually(func(g Gomega) {
			d := getDeployment(g, ctx, "gpu")
			spec := d.Spec.Template.Spec
			g.Expect(spec.Containers[0].Resources.Limits).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
			g.Expect(spec.NodeSelector).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-L4"))
			g.Expect(spec.Containers[0].Args).To(ContainElement("--model=/models/llama-3.1-8b/model.gguf"))
			g.Expect(slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
				return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "weights"
			})).To(BeTrue())
			g.Expect(d.Spec.Strategy.RollingUpdate.MaxSurge).To(HaveValue(Equal(intstr.FromInt32(0))))
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})
})

var _ = Describe("SchedulerPolicy controller", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	policyStatus := func(g Gomega, ctx SpecContext, name string) servingv1alpha1.SchedulerPolicyStatus {
		p := &servingv1alpha1.SchedulerPolicy{}
		g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
		accepted := meta.FindStatusCondition(p.Status.Conditions, servingv1alpha1.PolicyAccepted)
		g.Expect(accepted).NotTo(BeNil())
		g.Expect(accepted.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(accepted.ObservedGeneration).To(Equal(p.Generation))
		return p.Status
	}

	It("accepts a policy and lists the pools that use it", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, builders.MakeSchedulerPolicy("a", ns).Obj())).To(Succeed())
		Expect(k8sClient.Create(ctx, builders.MakeSchedulerPolicy("b", ns).Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(policyStatus(g, ctx, "a").Pools).To(BeEmpty())
			g.Expect(storedStatus(g, ctx, "SchedulerPolicy", ns, "a")).To(HaveKeyWithValue("poolCount", BeEquivalentTo(0)),
				"an unused policy's poolCount is stored, so kubectl prints 0")
		}, reconcileTimeout, pollInterval).Should(Succeed())

		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("p1", ns).Policy("a").Obj())).To(Succeed())
		Expect(k8sClient.Create(ctx, builders.MakeInferencePool("p2", ns).Policy("a").Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			st := policyStatus(g, ctx, "a")
			g.Expect(st.Pools).To(Equal([]string{"p1", "p2"}))
			g.Expect(st.PoolCount).To(BeEquivalentTo(2))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("following a pool that switches policies")
		Eventually(func(g Gomega) {
			p := &servingv1alpha1.InferencePool{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "p2"}, p)).To(Succeed())
			p.Spec.SchedulerPolicyRef.Name = "b"
			g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		}, reconcileTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(policyStatus(g, ctx, "a").Pools).To(Equal([]string{"p1"}))
			g.Expect(policyStatus(g, ctx, "b").Pools).To(Equal([]string{"p2"}))
		}, reconcileTimeout, pollInterval).Should(Succeed())

		By("following a pool that goes away")
		Expect(k8sClient.Delete(ctx, builders.MakeInferencePool("p1", ns).Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			st := policyStatus(g, ctx, "a")
			g.Expect(st.Pools).To(BeEmpty())
			g.Expect(st.PoolCount).To(BeZero())
		}, reconcileTimeout, pollInterval).Should(Succeed())
	})
})
