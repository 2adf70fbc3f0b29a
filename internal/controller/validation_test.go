package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/util/testing/builders"
)

// The API server itself validates kvpilot objects, from the CRDs' schema
// and CEL rules; these tests send it real objects.
var _ = Describe("API validation", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	pool := func(name string) *builders.InferencePoolWrapper { return builders.MakeInferencePool(name, ns) }
	policy := func() *builders.SchedulerPolicyWrapper { return builders.MakeSchedulerPolicy("p", ns) }
	engine := func(e servingv1alpha1.EngineSpec) *servingv1alpha1.InferencePool { return pool("p").Engine(e).Obj() }

	DescribeTable("rejects an invalid object with a message a person understands",
		func(ctx SpecContext, build func() client.Object, message string) {
			err := k8sClient.Create(ctx, build())
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a pool name that cannot name a Service", func() client.Object { return pool("1-pool").Obj() },
			"metadata.name must be at most 63 lowercase letters"),
		Entry("no model source", func() client.Object {
			return pool("p").ModelSource(servingv1alpha1.ModelSource{}).Obj()
		}, "set exactly one of builtin, persistentVolumeClaim, hostPath, image or url"),
		Entry("two model sources", func() client.Object {
			return pool("p").ModelSource(servingv1alpha1.ModelSource{
				Builtin:  servingv1alpha1.BuiltinModelTiny,
				HostPath: &servingv1alpha1.HostPathModelSource{Path: "/m.gguf"},
			}).Obj()
		}, "set exactly one of builtin, persistentVolumeClaim, hostPath, image or url"),
		Entry("a URL beside another model source", func() client.Object {
			return pool("p").ModelSource(servingv1alpha1.ModelSource{
				Image: &servingv1alpha1.ImageModelSource{Reference: "models/llama:1", Path: "m.gguf"},
				URL:   "hf://Qwen/Qwen3-GGUF:Q4_K_M",
			}).Obj()
		}, "set exactly one of builtin, persistentVolumeClaim, hostPath, image or url"),
		Entry("a model URL of an unsupported scheme", func() client.Object { return pool("p").URLModel("ftp://host/m.gguf", nil).Obj() },
			"url must be hf://ORG/REPO[@REVISION]/PATH"),
		Entry("a model URL escaping its repository", func() client.Object { return pool("p").URLModel("hf://Qwen/Qwen3-GGUF/../x.gguf", nil).Obj() },
			"url must not contain '..'"),
		Entry("fetch settings without a URL", func() client.Object {
			w := pool("p").PVCModel("c", "m.gguf")
			w.Spec.Model.Fetch = &servingv1alpha1.ModelFetch{HFTokenSecretRef: &servingv1alpha1.TokenSecretReference{Name: "hf"}}
			return w.Obj()
		}, "model.fetch configures the download of a source.url"),
		Entry("a size limit on a claim cache", func() client.Object {
			return pool("p").URLModel("s3://models/m.gguf", &servingv1alpha1.ModelFetch{Cache: &servingv1alpha1.ModelCache{
				PersistentVolumeClaim: &servingv1alpha1.CacheClaim{ClaimName: "cache"}, SizeLimit: ptr.To(resource.MustParse("10Gi")),
			}}).Obj()
		}, "cache.sizeLimit bounds the per-pod emptyDir"),
		Entry("an S3 endpoint that is no URL", func() client.Object {
			return pool("p").URLModel("s3://models/m.gguf", &servingv1alpha1.ModelFetch{S3: &servingv1alpha1.S3Fetch{Endpoint: "minio:9000"}}).Obj()
		}, "spec.model.fetch.s3.endpoint"),
		Entry("a model path escaping its volume", func() client.Object { return pool("p").PVCModel("c", "../etc/passwd").Obj() },
			"path must not contain '..'"),
		Entry("an absolute model path in a volume", func() client.Object { return pool("p").PVCModel("c", "/m.gguf").Obj() },
			"path must be relative to the root of the volume"),
		Entry("a relative host path", func() client.Object { return pool("p").HostPathModel("models/m.gguf").Obj() },
			"hostPath.path must be an absolute path"),
		Entry("an unknown executor", func() client.Object {
			return pool("p").Executor(servingv1alpha1.ExecutorSpec{Type: "TPU"}).Obj()
		}, `Unsupported value: "TPU"`),
		Entry("sim settings on the CPU executor", func() client.Object {
			return pool("p").Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorCPU, Sim: &servingv1alpha1.SimExecutorSpec{}}).Obj()
		}, "executor.sim may be set only when executor.type is Sim"),
		Entry("an unknown sim accelerator", func() client.Object { return pool("p").Sim("TPUv5", "llama-3.1-8b").Obj() },
			`Unsupported value: "TPUv5"`),
		Entry("negative replicas", func() client.Object { return pool("p").Replicas(-1).Obj() },
			"spec.replicas: Invalid value: -1"),
		Entry("an accelerator product without accelerators", func() client.Object { return pool("p").Accelerators(0, "NVIDIA-L4").Obj() },
			"acceleratorProduct needs accelerators above zero"),
		Entry("tensor parallelism on the CPU executor", func() client.Object {
			return pool("p").Accelerators(2, "").Engine(servingv1alpha1.EngineSpec{TensorParallelSize: ptr.To[int32](2)}).Obj()
		}, "engine.tensorParallelSize above 1 needs the Sim executor"),
		Entry("tensor parallelism on the GGML executor, with the accelerators for it", func() client.Object {
			return pool("p").Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorGGML}).Accelerators(2, "").
				Engine(servingv1alpha1.EngineSpec{TensorParallelSize: ptr.To[int32](2)}).Obj()
		}, "engine.tensorParallelSize above 1 needs the Sim executor"),
		Entry("two KV cache sizes", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{KVCacheBlocks: ptr.To[int32](10), KVCacheMemory: ptr.To(resource.MustParse("1Gi"))})
		}, "set at most one of kvCacheBlocks, kvCacheMemory and kvCacheMemoryFraction"),
		Entry("a KV cache fraction above 1", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("1.5"))})
		}, "must be a decimal number from 0 to 1"),
		Entry("a KV cache fraction of 0", func() client.Object {
			return pool("p").Sim("H100-SXM", "llama-3.1-8b").Engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("0"))}).Obj()
		}, "kvCacheMemoryFraction must be above 0"),
		Entry("a KV cache fraction of 0.000", func() client.Object {
			return pool("p").Sim("H100-SXM", "llama-3.1-8b").Engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("0.000"))}).Obj()
		}, "kvCacheMemoryFraction must be above 0"),
		Entry("a KV cache fraction on the CPU executor", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("0.5"))})
		}, "engine.kvCacheMemoryFraction sizes the KV cache from a GPU's memory"),
		Entry("a KV cache fraction on the GGML executor without accelerators", func() client.Object {
			return pool("p").Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorGGML}).
				Engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("0.9"))}).Obj()
		}, "engine.kvCacheMemoryFraction sizes the KV cache from a GPU's memory"),
		Entry("a KV cache fraction on the GGML executor with zero accelerators", func() client.Object {
			return pool("p").Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorGGML}).Accelerators(0, "").
				Engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("0.9"))}).Obj()
		}, "engine.kvCacheMemoryFraction sizes the KV cache from a GPU's memory"),
		Entry("a negative KV cache size", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{KVCacheMemory: ptr.To(resource.MustParse("-1Gi"))})
		}, "kvCacheMemory must be positive"),
		Entry("fewer batched tokens than sequences", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{MaxNumSeqs: ptr.To[int32](64), MaxNumBatchedTokens: ptr.To[int32](32)})
		}, "maxNumBatchedTokens must be at least maxNumSeqs"),
		Entry("more sequences than the runtime's default batched tokens", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{MaxNumSeqs: ptr.To[int32](4096)})
		}, "maxNumBatchedTokens must be at least maxNumSeqs"),
		Entry("fewer batched tokens than the runtime's default sequences", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{MaxNumBatchedTokens: ptr.To[int32](128)})
		}, "maxNumBatchedTokens must be at least maxNumSeqs"),
		Entry("more long partial prefills than partial prefills", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{MaxNumPartialPrefills: ptr.To[int32](2), MaxLongPartialPrefills: ptr.To[int32](3)})
		}, "maxLongPartialPrefills must be at most maxNumPartialPrefills"),
		Entry("more long partial prefills than the runtime's default partial prefills", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{MaxLongPartialPrefills: ptr.To[int32](5)})
		}, "maxLongPartialPrefills must be at most maxNumPartialPrefills"),
		Entry("a long-prefill threshold below -1", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{LongPrefillTokenThreshold: ptr.To[int32](-2)})
		}, "spec.engine.longPrefillTokenThreshold"),
		Entry("an unknown tool-call parser", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{ToolCallParser: "llama4"})
		}, "spec.engine.toolCallParser: Unsupported value: \"llama4\""),
		Entry("harmony reasoning with another tool-call format", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{ToolCallParser: "hermes", ReasoningParser: "harmony"})
		}, "reasoningParser harmony goes only with toolCallParser harmony"),
		Entry("harmony calls with think reasoning", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{ToolCallParser: "harmony", ReasoningParser: "think"})
		}, "reasoningParser harmony goes only with toolCallParser harmony"),
		Entry("an unsupported block size", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{BlockSize: ptr.To[int32](12)})
		}, "spec.engine.blockSize: Unsupported value: 12"),
		Entry("an unknown KV cache dtype", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{KVCacheDType: "fp8"})
		}, `spec.engine.kvCacheDType: Unsupported value: "fp8"`),
		Entry("an f16 KV cache on the CPU executor", func() client.Object {
			return engine(servingv1alpha1.EngineSpec{KVCacheDType: "f16"})
		}, "the CPU executor keeps its KV cache in f32"),
		Entry("an unknown service type", func() client.Object { return pool("p").Service("ExternalName", 80).Obj() },
			`Unsupported value: "ExternalName"`),

		Entry("an unknown scheduling mode", func() client.Object { return policy().Mode("Greedy").Obj() },
			`Unsupported value: "Greedy"`),
		Entry("an interval under a second", func() client.Object { return policy().Interval(100 * time.Millisecond).Obj() },
			"interval must be between 1s and 5m"),
		Entry("an acting token weight above 1", func() client.Object { return policy().ActingTokenWeight("2").Obj() },
			"must be a decimal number from 0 to 1"),
		Entry("a pause limit shorter than the interval", func() client.Object {
			return policy().Interval(time.Minute).MaxPauseDuration(30 * time.Second).Obj()
		}, "maxPauseDuration must be longer than interval"),
		Entry("a fairness bound shorter than the interval", func() client.Object {
			return policy().Interval(10*time.Second).Fairness(time.Minute, 5*time.Second).Obj()
		}, "fairness.bound must be 0s (off), or at least interval and shorter than maxPauseDuration"),
		Entry("a fairness bound as long as the pause limit", func() client.Object {
			return policy().MaxPauseDuration(10*time.Minute).Fairness(time.Minute, 10*time.Minute).Obj()
		}, "fairness.bound must be 0s (off), or at least interval and shorter than maxPauseDuration"),
		Entry("a negative wait aging", func() client.Object { return policy().Fairness(-time.Second, 0).Obj() },
			"waitAging must be between 0s and 24h"),
		Entry("a negative resume-first-after", func() client.Object {
			sp := policy().Obj()
			sp.Spec.Fairness.ResumeFirstAfter = &metav1.Duration{Duration: -time.Second}
			return sp
		}, "resumeFirstAfter must be between 0s and 24h"),
		Entry("a negative aging rate", func() client.Object { return policy().AgingRate("-1").Obj() },
			"agingRate must be a non-negative decimal number"),
		Entry("a negative KV transfer bandwidth", func() client.Object {
			sp := policy().Obj()
			sp.Spec.KVTransfer = servingv1alpha1.KVTransfer{Enabled: true, BandwidthGbps: ptr.To[int32](-1)}
			return sp
		}, "spec.kvTransfer.bandwidthGbps: Invalid value: -1"),
		Entry("a zero prefill rate for KV transfers", func() client.Object {
			sp := policy().Obj()
			sp.Spec.KVTransfer = servingv1alpha1.KVTransfer{Enabled: true, PrefillTokensPerSecond: ptr.To[int32](0)}
			return sp
		}, "spec.kvTransfer.prefillTokensPerSecond: Invalid value: 0"),
		Entry("too many stop strings", func() client.Object {
			return policy().Stop("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17").Obj()
		}, "must have at most 16 items"),
	)

	It("fills in defaults", func(ctx SpecContext) {
		p := pool("defaults").Obj()
		p.Spec.Replicas = nil
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
		Expect(p.Spec.Executor.Type).To(Equal(servingv1alpha1.ExecutorCPU))
		Expect(p.Spec.Model.Format).To(Equal(servingv1alpha1.ModelFormatGGUF))
		Expect(p.Spec.Service).To(Equal(servingv1alpha1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Port: 8000}))

		sp := policy().Obj()
		Expect(k8sClient.Create(ctx, sp)).To(Succeed())
		Expect(sp.Spec.Mode).To(Equal(servingv1alpha1.SchedulingModeDefault))
		Expect(sp.Spec.Interval).To(HaveValue(Equal(metav1.Duration{Duration: 5 * time.Second})))
		Expect(sp.Spec.ActingTokenWeight).To(BeEquivalentTo("1"))
		Expect(sp.Spec.BufferTokensPerProgram).To(HaveValue(BeEquivalentTo(100)))
		Expect(sp.Spec.MaxPauseDuration).To(HaveValue(Equal(metav1.Duration{Duration: 30 * time.Minute})))
		Expect(sp.Spec.ActingTokenDecay.HalfLife).To(HaveValue(Equal(metav1.Duration{Duration: time.Minute})))
		Expect(sp.Spec.Fairness.WaitAging).To(HaveValue(Equal(metav1.Duration{Duration: time.Minute})))
		Expect(sp.Spec.Fairness.Bound).To(HaveValue(Equal(metav1.Duration{Duration: 0})))
		Expect(sp.Spec.Fairness.ResumeFirstAfter).To(HaveValue(Equal(metav1.Duration{Duration: 5 * time.Minute})))
		Expect(sp.Spec.KVTransfer.Enabled).To(BeFalse(), "KV transfers are off by default")
		Expect(sp.Spec.KVTransfer.BandwidthGbps).To(HaveValue(BeEquivalentTo(400)))
		Expect(sp.Spec.KVTransfer.PrefillTokensPerSecond).To(HaveValue(BeEquivalentTo(20000)))

		fair := builders.MakeSchedulerPolicy("fair", ns).Fairness(30*time.Second, 2*time.Minute).Obj()
		Expect(k8sClient.Create(ctx, fair)).To(Succeed(), "a bound between interval and maxPauseDuration is valid")
	})

	It("accepts the engine settings the runtime runs", func(ctx SpecContext) {
		ggml := func(name string) *builders.InferencePoolWrapper {
			return pool(name).Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorGGML})
		}
		for _, p := range []*servingv1alpha1.InferencePool{
			ggml("ggml-gpu-fraction").Accelerators(1, "").Engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("0.9"))}).Obj(),
			pool("sim-fraction").Sim("L4", "llama-3.1-8b").Engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("1"))}).Obj(),
			pool("sim-tp").Sim("H100-SXM", "llama-3.1-70b").Engine(servingv1alpha1.EngineSpec{TensorParallelSize: ptr.To[int32](4)}).Obj(),
			ggml("ggml-tp1").Accelerators(1, "").Engine(servingv1alpha1.EngineSpec{TensorParallelSize: ptr.To[int32](1)}).Obj(),
			pool("few-seqs").Engine(servingv1alpha1.EngineSpec{MaxNumSeqs: ptr.To[int32](2048)}).Obj(),
			pool("many-tokens").Engine(servingv1alpha1.EngineSpec{MaxNumBatchedTokens: ptr.To[int32](256)}).Obj(),
			pool("hub-quant").URLModel("hf://Qwen/Qwen3-GGUF@v1:Q4_K_M", nil).Obj(),
			pool("hub-file").URLModel("hf://Qwen/Qwen3-GGUF/sub/Qwen3-Q8_0-00001-of-00002.gguf", &servingv1alpha1.ModelFetch{
				HFTokenSecretRef: &servingv1alpha1.TokenSecretReference{Name: "hf"},
				Cache:            &servingv1alpha1.ModelCache{PersistentVolumeClaim: &servingv1alpha1.CacheClaim{ClaimName: "cache"}},
			}).Obj(),
			pool("minio").URLModel("s3://models/m.gguf", &servingv1alpha1.ModelFetch{
				S3:    &servingv1alpha1.S3Fetch{Endpoint: "http://minio.minio:9000", CredentialsSecretRef: &servingv1alpha1.SecretReference{Name: "minio"}},
				Cache: &servingv1alpha1.ModelCache{SizeLimit: ptr.To(resource.MustParse("40Gi"))},
			}).Obj(),
			pool("plain-https").URLModel("https://example.com/m.gguf", nil).Obj(),
			pool("pythonic").Engine(servingv1alpha1.EngineSpec{ToolCallParser: "pythonic", ReasoningParser: "none"}).Obj(),
			pool("gpt-oss").Engine(servingv1alpha1.EngineSpec{ToolCallParser: "harmony", ReasoningParser: "harmony"}).Obj(),
			pool("think-only").Engine(servingv1alpha1.EngineSpec{ReasoningParser: "think"}).Obj(),
			pool("no-calls").Engine(servingv1alpha1.EngineSpec{ToolCallParser: "none", ReasoningParser: "think"}).Obj(),
		} {
			Expect(k8sClient.Create(ctx, p, client.DryRunAll)).To(Succeed(), p.Name)
		}
	})

	It("refuses to change a pool's executor", func(ctx SpecContext) {
		p := pool("fixed").Obj()
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p.Spec.Executor = servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorSim}
		err := k8sClient.Update(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("executor.type is immutable"))
	})
})
