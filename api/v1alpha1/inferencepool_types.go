package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InferencePool is a fleet of kvpilot runtime pods serving one model behind
// one Service. The controller runs it as a Deployment, a Service and a
// PodDisruptionBudget; its fleet loop places agent programs across the pods
// and reports their KV-cache capacity in status.
//
// The Gateway API Inference Extension has a kind of the same name in
// inference.networking.k8s.io; use the short name kvpool or the
// fully-qualified inferencepools.serving.kvpilot.dev with kubectl.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=kvpool,categories=kvpilot
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.schedulerPolicyRef.name`
// +kubebuilder:printcolumn:name="KV Used %",type=integer,JSONPath=`.status.capacity.usedKVPercent`
// +kubebuilder:printcolumn:name="Paused",type=integer,JSONPath=`.status.capacity.programsPaused`,description="Programs paused by the fleet loop"
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model.name`,priority=1
// +kubebuilder:printcolumn:name="Executor",type=string,JSONPath=`.spec.executor.type`,priority=1
// +kubebuilder:printcolumn:name="Download %",type=integer,JSONPath=`.status.model.downloadPercent`,priority=1,description="How much of the model of spec.model.source.url the downloading pods have"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be at most 63 lowercase letters, digits or '-', start with a letter and end with a letter or digit, because it also names the pool's Service and labels its pods"
type InferencePool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec InferencePoolSpec `json:"spec"`

	// status is the observed state of the pool.
	// +optional
	Status InferencePoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// InferencePoolList is a list of InferencePools.
type InferencePoolList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferencePool `json:"items"`
}

// InferencePoolSpec is the desired state of an InferencePool.
//
// +kubebuilder:validation:XValidation:rule="!has(self.engine) || !has(self.engine.tensorParallelSize) || self.engine.tensorParallelSize == 1 || self.executor.type == 'Sim'",message="engine.tensorParallelSize above 1 needs the Sim executor: the CPU and GGML executors run the model on one device"
// +kubebuilder:validation:XValidation:rule="!has(self.engine) || !has(self.engine.kvCacheMemoryFraction) || self.executor.type == 'Sim' || (self.executor.type == 'GGML' && has(self.resources) && has(self.resources.accelerators) && self.resources.accelerators > 0)",message="engine.kvCacheMemoryFraction sizes the KV cache from a GPU's memory: it needs the Sim executor, or GGML with resources.accelerators above zero; on CPUs set kvCacheMemory or kvCacheBlocks"
// +kubebuilder:validation:XValidation:rule="!has(self.engine) || !has(self.engine.kvCacheDType) || self.engine.kvCacheDType in ['auto', 'f32'] || self.executor.type != 'CPU'",message="engine.kvCacheDType: the CPU executor keeps its KV cache in f32 (auto or f32); f16, bf16 and q8_0 need the GGML or Sim executor"
type InferencePoolSpec struct {
	// replicas is the number of runtime pods. It is the scale subresource's
	// spec path, so kubectl scale, a HorizontalPodAutoscaler or KEDA can
	// drive it.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// model is the model the pods serve and where its weights come from.
	// +required
	Model ModelSpec `json:"model"`

	// executor runs the model's forward passes in each pod.
	// +kubebuilder:default={type: CPU}
	// +optional
	Executor ExecutorSpec `json:"executor,omitempty"`

	// resources are the compute resources of each pod.
	// +optional
	Resources *PodResources `json:"resources,omitempty"`

	// engine tunes the continuous-batching engine in each pod. Unset fields
	// take the runtime's defaults.
	// +optional
	Engine *EngineSpec `json:"engine,omitempty"`

	// schedulerPolicyRef names a SchedulerPolicy in the pool's namespace.
	// Without one, or while the named policy does not exist, the pods run
	// with the runtime's defaults and the fleet loop does no program-level
	// scheduling.
	// +optional
	SchedulerPolicyRef *SchedulerPolicyReference `json:"schedulerPolicyRef,omitempty"`

	// service configures the Service in front of the pods.
	// +kubebuilder:default={}
	// +optional
	Service ServiceSpec `json:"service,omitempty"`

	// apiKeySecretRef names a key of a Secret in the pool's namespace that
	// holds the API keys clients must send (Authorization: Bearer, or
	// x-api-key), one per line; each key is a tenant whose programs the
	// others cannot see, release or join. Without it the API is open to
	// anyone who can reach the Service.
	// +optional
	APIKeySecretRef *SecretKeyReference `json:"apiKeySecretRef,omitempty"`

	// maxProgramsPerKey bounds the live agent programs one API key may have
	// on each pod (the runtime's --max-programs-per-key): a request that
	// would start one more is answered 429 with Retry-After until one of
	// them is released or idles out. Without apiKeySecretRef every client
	// counts as one key. Unset: no bound.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxProgramsPerKey *int32 `json:"maxProgramsPerKey,omitempty"`

	// enablePromptTokensDetails reports prefix-cache hits in responses'
	// usage (the runtime's --enable-prompt-tokens-details, as vLLM's:
	// prompt_tokens_details.cached_tokens and its Responses and Messages
	// equivalents). Off by default, since a client's hits can tell it
	// whether another client sent the same prompt; turn it on for a pool
	// whose clients trust each other (or that isolates them with
	// cache_salt).
	// +optional
	EnablePromptTokensDetails bool `json:"enablePromptTokensDetails,omitempty"`

	// sharePrefixCacheAcrossKeys lets clients of different API keys (see
	// apiKeySecretRef) hit each other's prefix-cache entries, as vLLM
	// does (the runtime's --share-prefix-cache-across-keys). Off by
	// default: each key's requests are salted with its owner, so neither
	// cached_tokens nor response timing can tell one tenant what another
	// sent; clients of the same key still share. Turn it on when the keys
	// trust each other and share long prompts (one agent product behind
	// several keys): their common prefixes are then computed once.
	// +optional
	SharePrefixCacheAcrossKeys bool `json:"sharePrefixCacheAcrossKeys,omitempty"`

	// image is the runtime container image. Empty means the image the
	// manager was started with (its --runtime-image flag).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// imagePullPolicy of the runtime container. Empty means Kubernetes'
	// default for the image's tag.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// nodeSelector constrains the pods to nodes with these labels. With
	// resources.acceleratorProduct set, the product label is added.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the pods. With resources.accelerators above zero, a
	// toleration of the nvidia.com/gpu taint is added.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity of the pods. The controller always adds a soft topology
	// spread across nodes.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// priorityClassName of the pods.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// ModelSpec says which model a pool serves and where its weights are.
//
// +kubebuilder:validation:XValidation:rule="!has(self.fetch) || has(self.source.url)",message="model.fetch configures the download of a source.url: set source.url or remove fetch"
type ModelSpec struct {
	// name is the model name clients send in the "model" field of OpenAI
	// requests, and the name the runtime reports in its metrics.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// format of the weights in source. Ignored for builtin models.
	// +kubebuilder:default=GGUF
	// +optional
	Format ModelFormat `json:"format,omitempty"`

	// source is where the weights are: exactly one of builtin,
	// persistentVolumeClaim, hostPath, image or url.
	// +required
	Source ModelSource `json:"source"`

	// fetch configures the download of a source.url: the Hub token, the S3
	// store and credentials, and the cache volume. Only with source.url.
	// +optional
	Fetch *ModelFetch `json:"fetch,omitempty"`
}

// ModelFormat is the file format of model weights.
// +kubebuilder:validation:Enum=GGUF
type ModelFormat string

const (
	// ModelFormatGGUF is a GGUF file (llama.cpp's format).
	ModelFormatGGUF ModelFormat = "GGUF"
)

// ModelSource says where a model's weights are. Exactly one field is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.builtin), has(self.persistentVolumeClaim), has(self.hostPath), has(self.image), has(self.url)].filter(x, x).size() == 1",message="set exactly one of builtin, persistentVolumeClaim, hostPath, image or url"
type ModelSource struct {
	// builtin names a model compiled into the runtime, served with no
	// files: "tiny" is a small random-weight Llama-family model for trying
	// kvpilot out and for tests.
	// +optional
	Builtin BuiltinModel `json:"builtin,omitempty"`

	// persistentVolumeClaim mounts a claim read-only and loads the model
	// file at path inside it.
	// +optional
	PersistentVolumeClaim *PVCModelSource `json:"persistentVolumeClaim,omitempty"`

	// hostPath loads the model file from the node's filesystem. Pod
	// Security Admission's baseline and restricted levels forbid hostPath
	// volumes, so in a namespace that enforces either the pods are refused
	// (the pool reports Degraded); use persistentVolumeClaim or image there.
	// +optional
	HostPath *HostPathModelSource `json:"hostPath,omitempty"`

	// image mounts an OCI image (or artifact) as a read-only volume and
	// loads the model file at path inside it. Needs a cluster with image
	// volumes enabled.
	// +optional
	Image *ImageModelSource `json:"image,omitempty"`

	// url downloads the model: each pod's init container runs the
	// runtime's fetch mode (the same image) into the cache volume of
	// model.fetch.cache, verifying the store's checksum and resuming an
	// interrupted transfer, and the runtime loads it from there. One of
	// hf://ORG/REPO[@REVISION]/PATH.gguf (a file of a Hugging Face Hub
	// repository), hf://ORG/REPO[@REVISION]:QUANT (the one GGUF file or
	// split set of the repository naming the quantisation, e.g. Q4_K_M),
	// s3://BUCKET/KEY (an S3-compatible store, see model.fetch.s3) or
	// https://HOST/PATH. A split GGUF (NAME-00001-of-00003.gguf) is fetched
	// as the whole set, but the runtime does not load split GGUFs yet.
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(hf|s3|https|http)://[^/]+/[^/].*$')",message="url must be hf://ORG/REPO[@REVISION]/PATH, hf://ORG/REPO[@REVISION]:QUANT, s3://BUCKET/KEY or https://HOST/PATH"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="url must not contain '..'"
	// +optional
	URL string `json:"url,omitempty"`
}

// ModelFetch configures how a source.url is downloaded and cached.
type ModelFetch struct {
	// hfTokenSecretRef names the Secret key holding a Hugging Face token,
	// for gated or private hf:// repositories. The init container gets it
	// as HF_TOKEN.
	// +optional
	HFTokenSecretRef *TokenSecretReference `json:"hfTokenSecretRef,omitempty"`

	// hfEndpoint is the base URL of the Hugging Face Hub or a mirror of it.
	// Empty means https://huggingface.co.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/]+`
	// +optional
	HFEndpoint string `json:"hfEndpoint,omitempty"`

	// s3 is the store and credentials of an s3:// url.
	// +optional
	S3 *S3Fetch `json:"s3,omitempty"`

	// cache is the volume fetched models are kept in. Empty means an
	// emptyDir per pod: every pod downloads the model itself, again after
	// each restart elsewhere. Name a ReadWriteMany claim to share the
	// cache among a pool's pods (they download once, and a new pod finds
	// the model there).
	// +optional
	Cache *ModelCache `json:"cache,omitempty"`
}

// TokenSecretReference is a key of a Secret in the pool's namespace.
type TokenSecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// key in the Secret's data.
	// +kubebuilder:default=token
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// S3Fetch is where and as whom an s3:// url is read.
type S3Fetch struct {
	// endpoint of an S3-compatible store, e.g. http://minio.minio:9000.
	// Objects are addressed path-style (endpoint/BUCKET/KEY). Empty means
	// AWS's https://s3.REGION.amazonaws.com.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/]+`
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// region requests are signed for. Empty means us-east-1 (which MinIO
	// accepts by default).
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	// +optional
	Region string `json:"region,omitempty"`

	// credentialsSecretRef names a Secret with the keys AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and, for temporary credentials,
	// AWS_SESSION_TOKEN. Without it requests are anonymous (a public
	// bucket).
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`
}

// SecretReference names a Secret in the pool's namespace.
type SecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// ModelCache is the volume fetched models are kept in.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.persistentVolumeClaim) && has(self.sizeLimit))",message="cache.sizeLimit bounds the per-pod emptyDir: it does not apply with cache.persistentVolumeClaim"
type ModelCache struct {
	// persistentVolumeClaim names a claim in the pool's namespace, mounted
	// read-write by the fetching init container and read-only by the
	// runtime. With more than one replica it needs ReadWriteMany (or
	// pods on one node with ReadWriteOnce); concurrent fetches of one URL
	// take a file lock and download once.
	// +optional
	PersistentVolumeClaim *CacheClaim `json:"persistentVolumeClaim,omitempty"`

	// sizeLimit of the per-pod emptyDir cache. The fetch refuses a model
	// larger than the room left, naming the bytes needed.
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// CacheClaim names the PersistentVolumeClaim of a model cache.
type CacheClaim struct {
	// claimName is the name of a PersistentVolumeClaim in the pool's
	// namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClaimName string `json:"claimName"`
}

// BuiltinModel names a model compiled into the runtime.
// +kubebuilder:validation:Enum=tiny
type BuiltinModel string

const (
	// BuiltinModelTiny is a small random-weight Llama-family model.
	BuiltinModelTiny BuiltinModel = "tiny"
)

// PVCModelSource is a model file in a PersistentVolumeClaim.
type PVCModelSource struct {
	// claimName is the name of a PersistentVolumeClaim in the pool's
	// namespace. Pools with more than one replica need a claim whose access
	// mode allows many readers (ReadOnlyMany or ReadWriteMany).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClaimName string `json:"claimName"`

	// path of the model file, relative to the root of the volume.
	// +required
	Path RelativePath `json:"path"`
}

// HostPathModelSource is a model file on the node.
type HostPathModelSource struct {
	// path is the absolute path of the model file on the node.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="hostPath.path must be an absolute path"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="hostPath.path must not contain '..'"
	// +required
	Path string `json:"path"`
}

// ImageModelSource is a model file inside an OCI image or artifact.
type ImageModelSource struct {
	// reference is the image reference, as in a container's image field.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Reference string `json:"reference"`

	// pullPolicy for the image volume. Empty means Kubernetes' default.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`

	// path of the model file, relative to the root of the image.
	// +required
	Path RelativePath `json:"path"`
}

// RelativePath is a path inside a volume: relative, with no "..".
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=4096
// +kubebuilder:validation:XValidation:rule="!self.startsWith('/')",message="path must be relative to the root of the volume"
// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="path must not contain '..'"
type RelativePath string

// ExecutorSpec selects the runtime's executor.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'Sim' || !has(self.sim)",message="executor.sim may be set only when executor.type is Sim"
// +kubebuilder:validation:XValidation:rule="self.type == oldSelf.type",message="executor.type is immutable: during a rollout pods of both executors would serve the same programs with different tokens and capacities; create a new pool instead"
type ExecutorSpec struct {
	// type of executor: CPU runs the model in pure Go on the pod's CPUs;
	// GGML runs it with ggml's kernels, on the pod's NVIDIA GPU when it has
	// one, else on its CPUs; Sim simulates an accelerator with a roofline
	// cost model (for benchmarks and for clusters without accelerators).
	// GGML needs an image that carries ggml's libraries, such as the CUDA
	// image (make docker-build-cuda; set image), which holds both its CUDA
	// and its CPU kernels: the default image has none, and its GGML pods
	// exit with "ggml libraries not found".
	// +kubebuilder:default=CPU
	// +optional
	Type ExecutorType `json:"type,omitempty"`

	// sim configures the Sim executor.
	// +optional
	Sim *SimExecutorSpec `json:"sim,omitempty"`
}

// ExecutorType names an executor.
// +kubebuilder:validation:Enum=CPU;GGML;Sim
type ExecutorType string

const (
	// ExecutorCPU runs the model on the pod's CPUs.
	ExecutorCPU ExecutorType = "CPU"
	// ExecutorGGML runs the model with ggml's CUDA or CPU kernels.
	ExecutorGGML ExecutorType = "GGML"
	// ExecutorSim simulates an accelerator.
	ExecutorSim ExecutorType = "Sim"
)

// SimExecutorSpec is the simulated hardware and model of the Sim executor.
type SimExecutorSpec struct {
	// accelerator is the simulated accelerator profile.
	// +kubebuilder:validation:Enum=H100-SXM;H200;A100-80GB;L4
	// +kubebuilder:default=H100-SXM
	// +optional
	Accelerator string `json:"accelerator,omitempty"`

	// model is the simulated model geometry: the dense Llama-3.1 models,
	// a mixture of experts (Qwen3-Coder-30B-A3B, gpt-oss with its MXFP4
	// experts, GLM-4.5-Air in BF16 or FP8, GLM-4.7-Flash), or a hybrid of
	// gated DeltaNet and attention layers (Qwen3.6-27B, Qwen3.6-35B-A3B,
	// Qwen3-Coder-Next in BF16 or FP8), each as its published checkpoint
	// stores it.
	// +kubebuilder:validation:Enum=llama-3.1-8b;llama-3.1-70b;qwen3-coder-30b-a3b;gpt-oss-20b;gpt-oss-120b;glm-4.5-air;glm-4.5-air-fp8;glm-4.7-flash;qwen3.6-27b;qwen3.6-35b-a3b;qwen3-coder-next;qwen3-coder-next-fp8
	// +kubebuilder:default=llama-3.1-8b
	// +optional
	Model string `json:"model,omitempty"`
}

// PodResources are the compute resources of each runtime pod.
//
// +kubebuilder:validation:XValidation:rule="!has(self.acceleratorProduct) || (has(self.accelerators) && self.accelerators > 0)",message="acceleratorProduct needs accelerators above zero"
type PodResources struct {
	// accelerators is the number of NVIDIA GPUs per pod, requested as
	// nvidia.com/gpu.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	// +optional
	Accelerators *int32 `json:"accelerators,omitempty"`

	// acceleratorProduct restricts the pods to nodes whose
	// nvidia.com/gpu.product label (set by GPU feature discovery) has this
	// value, for example NVIDIA-H100-80GB-HBM3.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +optional
	AcceleratorProduct string `json:"acceleratorProduct,omitempty"`

	// cpu requested by each pod.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// memory requested by each pod; also its limit.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// EngineSpec tunes the continuous-batching engine of each pod. Every field
// is optional; unset fields take the runtime's defaults.
//
// +kubebuilder:validation:XValidation:rule="[has(self.kvCacheBlocks), has(self.kvCacheMemory), has(self.kvCacheMemoryFraction)].filter(x, x).size() <= 1",message="set at most one of kvCacheBlocks, kvCacheMemory and kvCacheMemoryFraction"
// +kubebuilder:validation:XValidation:rule="(has(self.maxNumBatchedTokens) ? self.maxNumBatchedTokens : 2048) >= (has(self.maxNumSeqs) ? self.maxNumSeqs : 256)",message="maxNumBatchedTokens must be at least maxNumSeqs (unset, the runtime's defaults: 2048 and 256), or some scheduled sequences could not get a token in an iteration"
// +kubebuilder:validation:XValidation:rule="!has(self.maxLongPartialPrefills) || self.maxLongPartialPrefills <= (has(self.maxNumPartialPrefills) ? self.maxNumPartialPrefills : 4)",message="maxLongPartialPrefills must be at most maxNumPartialPrefills (unset, the runtime's default: 4)"
// +kubebuilder:validation:XValidation:rule="!has(self.reasoningParser) || !has(self.toolCallParser) || self.reasoningParser == 'none' || (self.reasoningParser == 'harmony') == (self.toolCallParser == 'harmony')",message="reasoningParser harmony goes only with toolCallParser harmony, and toolCallParser harmony only with reasoningParser harmony or none (the runtime reads gpt-oss's reasoning with its calls)"
type EngineSpec struct {
	// maxNumSeqs is the most sequences in one iteration's batch. Unset: the
	// runtime's 256.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MaxNumSeqs *int32 `json:"maxNumSeqs,omitempty"`

	// maxNumBatchedTokens is the most tokens (prefill and decode) in one
	// iteration; at least maxNumSeqs. Unset: the runtime's 2048.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MaxNumBatchedTokens *int32 `json:"maxNumBatchedTokens,omitempty"`

	// longPrefillTokenThreshold: a prompt with more tokens than this left
	// to prefill takes at most this many of an iteration's tokens until the
	// other requests have had theirs, so a short request (an agent's title
	// or memory request) is prefilled beside a long one instead of after
	// it; alone it still takes them all (vLLM's long_prefill_token_threshold).
	// -1 turns it off. Unset or 0: a quarter of maxNumBatchedTokens.
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	LongPrefillTokenThreshold *int32 `json:"longPrefillTokenThreshold,omitempty"`

	// maxNumPartialPrefills is the most prompts in the middle of a prefill
	// at once (vLLM's max_num_partial_prefills). Unset: the runtime's 4.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MaxNumPartialPrefills *int32 `json:"maxNumPartialPrefills,omitempty"`

	// maxLongPartialPrefills is the most prompts over
	// longPrefillTokenThreshold that prefill in one iteration; at most
	// maxNumPartialPrefills. Unset: maxNumPartialPrefills.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MaxLongPartialPrefills *int32 `json:"maxLongPartialPrefills,omitempty"`

	// blockSize is the number of tokens in one KV-cache block.
	// +kubebuilder:validation:Enum=8;16;32;64;128
	// +optional
	BlockSize *int32 `json:"blockSize,omitempty"`

	// kvCacheBlocks sizes the KV cache as a number of blocks.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777216
	// +optional
	KVCacheBlocks *int32 `json:"kvCacheBlocks,omitempty"`

	// kvHostBlocks is a host-memory KV tier, in blocks: a paused program's
	// KV moves there instead of waiting to be evicted, and comes back
	// without recompute when the program resumes on the pod. Each block
	// takes blockSize × the model's KV bytes per token of the pod's memory
	// (count it in the container's memory limit). Unset: none.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777216
	// +optional
	KVHostBlocks *int32 `json:"kvHostBlocks,omitempty"`

	// kvCacheDType is the KV cache's element type: auto (the model's
	// activation type, as vLLM's: f16 on the GGML executor unless the
	// weights are F32 or BF16), f16, bf16, q8_0 (8.5 bits an element) or
	// f32. In the same memory f16 holds twice the tokens of f32 and q8_0
	// 3.76 times, which is the KV capacity the fleet loop schedules
	// programs into. The CPU executor keeps f32 and accepts only auto and
	// f32. Unset: auto.
	// +kubebuilder:validation:Enum=auto;f16;bf16;q8_0;f32
	// +optional
	KVCacheDType KVCacheDType `json:"kvCacheDType,omitempty"`

	// kvCacheMemory sizes the KV cache in bytes, for example 8Gi.
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? quantity(self).isGreaterThan(quantity('0')) : self > 0",message="kvCacheMemory must be positive"
	// +optional
	KVCacheMemory *resource.Quantity `json:"kvCacheMemory,omitempty"`

	// kvCacheMemoryFraction is the fraction of a GPU's memory the runtime
	// may use for weights, activations and KV cache (vLLM's
	// gpu_memory_utilization), above 0, for example "0.9"; the KV cache gets
	// what the weights and a 2 GiB reserve for activations leave. It applies
	// to the Sim executor (the pod's GPU, else the simulated profile's
	// memory) and to GGML on a GPU (resources.accelerators above zero; the
	// runtime then refuses to fall back to the CPU). The CPU executor and
	// GGML on CPUs size the KV cache with kvCacheMemory or kvCacheBlocks.
	// Unset, with neither of those: the Sim executor uses 0.9, the others
	// 1Gi of KV cache.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^0([.]0*)?$')",message="kvCacheMemoryFraction must be above 0"
	// +optional
	KVCacheMemoryFraction *Fraction `json:"kvCacheMemoryFraction,omitempty"`

	// maxQueue is the most requests waiting in a pod's queue; beyond it the
	// pod answers 429.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MaxQueue *int32 `json:"maxQueue,omitempty"`

	// tensorParallelSize is the number of accelerators one replica of the
	// model spans, in the Sim executor's cost model and KV sizing. The CPU
	// and GGML executors run the model on one device and accept only 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	TensorParallelSize *int32 `json:"tensorParallelSize,omitempty"`

	// toolCallParser names the format the model writes tool calls in, for
	// a model whose chat template does not show it (or shows another): the
	// runtime's --tool-call-parser. none reads no calls. Unset: the format
	// the chat template shows. These are the runtime's formats (its --help
	// lists them).
	// +kubebuilder:validation:Enum=deepseek_r1;deepseek_v31;glm45;harmony;hermes;kimi_k2;lfm2;llama3_json;minimax_m2;mistral;mistral_args;pythonic;qwen3_coder;none
	// +optional
	ToolCallParser string `json:"toolCallParser,omitempty"`

	// reasoningParser names how the model writes reasoning: think
	// (<think>…</think>), harmony (gpt-oss's analysis channel, only with
	// the harmony tool-call format) or none (reasoning is answer text): the
	// runtime's --reasoning-parser. Unset: what the chat template shows.
	// +kubebuilder:validation:Enum=think;harmony;none
	// +optional
	ReasoningParser string `json:"reasoningParser,omitempty"`

	// drainTimeout is how long a terminating pod keeps finishing its
	// requests before it exits; the pod's termination grace period is a
	// little longer.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="drainTimeout must be between 0s and 1h"
	// +optional
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`
}

// KVCacheDType is a KV cache element type, spelled as the runtime's
// --kv-cache-dtype.
type KVCacheDType string

// Fraction is a decimal number from 0 to 1 written as a string, such as
// "0.9": Kubernetes APIs avoid floating-point fields.
// +kubebuilder:validation:MaxLength=8
// +kubebuilder:validation:XValidation:rule="self.matches('^(0([.][0-9]{1,6})?|1([.]0{1,6})?)$')",message="must be a decimal number from 0 to 1 with at most 6 decimal places, such as \"0.9\""
type Fraction string

// SchedulerPolicyReference names a SchedulerPolicy in the same namespace.
type SchedulerPolicyReference struct {
	// name of the SchedulerPolicy.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// SecretKeyReference names a key of a Secret in the same namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// key in the Secret's data.
	// +kubebuilder:default=api-key
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// ServiceSpec configures the Service in front of a pool's pods.
type ServiceSpec struct {
	// type of the Service.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// port the Service listens on; it forwards to the pods' http port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8000
	// +optional
	Port int32 `json:"port,omitempty"`
}

// InferencePoolStatus is the observed state of an InferencePool.
type InferencePoolStatus struct {
	// observedGeneration is the generation of the spec the controller last
	// acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// replicas is the number of runtime pods that exist (the scale
	// subresource's status path).
	// +kubebuilder:default=0
	// +optional
	Replicas int32 `json:"replicas"`

	// readyReplicas is the number of runtime pods that are ready. The
	// replica counts are always written, so zero shows as 0 in the print
	// columns.
	// +kubebuilder:default=0
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// updatedReplicas is the number of runtime pods that run the current
	// pod template.
	// +kubebuilder:default=0
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`

	// selector is the label selector of the pods, in string form (the scale
	// subresource's selector path, which autoscalers read).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Selector string `json:"selector,omitempty"`

	// conditions: Available, Progressing, Degraded and PolicyResolved.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// capacity is the pool's KV-cache capacity and program placement, as
	// the fleet loop last read it from the pods.
	// +optional
	Capacity *PoolCapacity `json:"capacity,omitempty"`

	// model is where the pods are with fetching the model of
	// spec.model.source.url, as their fetch-model init containers report
	// it; absent for other sources. The ModelReady condition says the same
	// in words.
	// +optional
	Model *ModelStatus `json:"model,omitempty"`
}

// ModelStatus counts a url-source pool's pods by where they are with
// fetching its model, and sums the bytes of the downloads in progress.
type ModelStatus struct {
	// podsFetched is the number of pods whose fetch-model init container
	// finished: they have the model. The counts are always written, so
	// zero shows as 0.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodsFetched int32 `json:"podsFetched"`

	// podsFetching is the number of pods that have not finished fetching:
	// not started yet, asking the store, downloading, or waiting for
	// another pod's download of the same model to the shared cache.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodsFetching int32 `json:"podsFetching"`

	// podsFailed is the number of pods whose fetch failed; the ModelReady
	// condition says why.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodsFailed int32 `json:"podsFailed"`

	// podsDownloading is the number of pods whose download's progress the
	// bytes below sum: those that answered the manager while downloading
	// (at most three are asked, the first by name).
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodsDownloading int32 `json:"podsDownloading,omitempty"`

	// bytesDone is how many bytes of the model the downloading pods have
	// in their caches, summed.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`

	// bytesTotal is the size of the model times the downloading pods:
	// what bytesDone reaches when they finish. Absent while a store has
	// not said a file's size.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BytesTotal *int64 `json:"bytesTotal,omitempty"`

	// downloadPercent is bytesDone as a whole percentage of bytesTotal.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	DownloadPercent *int32 `json:"downloadPercent,omitempty"`
}

// MaxPodCapacities bounds InferencePoolStatus.Capacity.Pods so the status
// of a large pool stays small.
const MaxPodCapacities = 64

// PoolCapacity aggregates the KV cache and programs of a pool's pods.
type PoolCapacity struct {
	// totalKVTokens is the KV-cache size of all ready pods, in tokens.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TotalKVTokens int64 `json:"totalKVTokens"`

	// usedKVTokens is the KV cache in use across ready pods, in tokens.
	// +kubebuilder:validation:Minimum=0
	// +optional
	UsedKVTokens int64 `json:"usedKVTokens"`

	// usedKVPercent is usedKVTokens as a whole percentage of totalKVTokens.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	UsedKVPercent int32 `json:"usedKVPercent"`

	// programsActive is the number of programs placed on a pod.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ProgramsActive int32 `json:"programsActive"`

	// programsPaused is the number of programs paused to keep pods from
	// thrashing their KV caches. The counts are always written once the
	// fleet loop reports, so zero shows as 0 in the print columns.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ProgramsPaused int32 `json:"programsPaused"`

	// oldestWaitSeconds is how long the longest-waiting paused program has
	// waited, in seconds (0 when none waits): with a fairness bound it stays
	// near the bound.
	// +kubebuilder:validation:Minimum=0
	// +optional
	OldestWaitSeconds int64 `json:"oldestWaitSeconds"`

	// hostKVTokens is the host-memory KV tier of all ready pods, in tokens;
	// hostUsedKVTokens how much of it holds paused programs' KV. Host
	// memory is not device capacity: totalKVTokens does not include it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	HostKVTokens int64 `json:"hostKVTokens,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	HostUsedKVTokens int64 `json:"hostUsedKVTokens,omitempty"`

	// recommendedReplicas is the replica count the fleet loop estimates
	// would run every program without pausing; an autoscaler may use it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RecommendedReplicas *int32 `json:"recommendedReplicas,omitempty"`

	// pods summarizes each pod, by name; at most 64 are listed (the pods
	// with the most KV in use first) while the totals cover every pod.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Pods []PodCapacity `json:"pods,omitempty"`
}

// PodCapacity is one pod's KV cache and programs.
type PodCapacity struct {
	// name of the pod.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// totalKVTokens is the pod's KV-cache size, in tokens.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TotalKVTokens int64 `json:"totalKVTokens,omitempty"`

	// usedKVTokens is the pod's KV cache in use, in tokens.
	// +kubebuilder:validation:Minimum=0
	// +optional
	UsedKVTokens int64 `json:"usedKVTokens,omitempty"`

	// programsActive is the number of programs placed on the pod.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ProgramsActive int32 `json:"programsActive,omitempty"`

	// programsPaused is the number of programs paused while placed on the
	// pod.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ProgramsPaused int32 `json:"programsPaused,omitempty"`

	// hostKVTokens is the pod's host-memory KV tier, in tokens, and
	// hostUsedKVTokens what it holds of paused programs' KV.
	// +kubebuilder:validation:Minimum=0
	// +optional
	HostKVTokens int64 `json:"hostKVTokens,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	HostUsedKVTokens int64 `json:"hostUsedKVTokens,omitempty"`
}

func init() {
	SchemeBuilder.Register(&InferencePool{}, &InferencePoolList{})
}
