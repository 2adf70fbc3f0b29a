package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/runtime/fetch"
)

const (
	volumeModel        = "model"
	volumeModelCache   = "model-cache"
	volumeControlToken = "control-token"
	volumeAPIKey       = "api-key"
	volumeTmp          = "tmp"

	// terminationGraceBeyondDrain leaves the runtime time to flush and exit
	// after its drain timeout before the kubelet kills it.
	terminationGraceBeyondDrain = 15 * time.Second
	defaultDrainTimeout         = 30 * time.Second
	// preStopDelay keeps a pod serving, after it is marked for deletion and
	// before its runtime gets SIGTERM, long enough for Services to drop its
	// endpoint and for the fleet loop to move its paused programs: traffic
	// stops arriving before the listener closes.
	preStopDelay = 5 * time.Second

	// modelLoadBudget is how long a runtime pod may take to load its model
	// before its server answers: the startup probe allows it, and the
	// Deployment's progress deadline (deploymentProgressDeadline) adds the
	// time to pull an image of several GB before it, so a pod still loading
	// within its budget never reports the rollout stalled.
	modelLoadBudget      = 10 * time.Minute
	startupProbePeriod   = 5 * time.Second
	imagePullAllowance   = 20 * time.Minute
	startupProbeFailures = int32(modelLoadBudget / startupProbePeriod)
)

// podTemplate builds the runtime pods' template of a pool. policy is nil
// when the pool names no policy or the policy does not exist: the pods then
// run with the runtime's defaults. defaultImage is used when the pool sets
// no image.
//
// It is a pure function of its arguments, so the template, and the hash in
// its AnnotationTemplateHash annotation, change exactly when a pool or
// policy change must reach the pods.
func podTemplate(pool *servingv1alpha1.InferencePool, policy *servingv1alpha1.SchedulerPolicy, defaultImage string) corev1.PodTemplateSpec {
	spec := &pool.Spec
	image := spec.Image
	if image == "" {
		image = defaultImage
	}
	drain := defaultDrainTimeout
	if spec.Engine != nil && spec.Engine.DrainTimeout != nil {
		drain = spec.Engine.DrainTimeout.Duration
	}

	modelArg, modelVolume, modelMount := modelSource(&spec.Model)
	volumes := []corev1.Volume{
		{Name: volumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: volumeControlToken, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  ControlSecretName(pool.Name),
			Items:       []corev1.KeyToPath{{Key: controlTokenKey, Path: controlTokenKey}},
			DefaultMode: ptr.To[int32](0o440),
		}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: volumeTmp, MountPath: tmpMountPath},
		{Name: volumeControlToken, MountPath: controlTokenMountPath, ReadOnly: true},
	}
	if modelVolume != nil {
		volumes = append(volumes, *modelVolume)
		mounts = append(mounts, *modelMount)
	}

	args := []string{
		"--model=" + modelArg,
		"--served-model-name=" + spec.Model.Name,
		"--host=0.0.0.0",
		"--port=" + strconv.Itoa(httpPort),
		"--control-port=" + strconv.Itoa(controlPort),
		"--control-token-file=" + path.Join(controlTokenMountPath, controlTokenKey),
		"--drain-timeout=" + drain.String(),
	}
	args = append(args, executorArgs(&spec.Executor)...)
	args = append(args, engineArgs(spec.Engine)...)
	args = append(args, policyArgs(policy)...)
	if ref := spec.APIKeySecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = "api-key"
		}
		volumes = append(volumes, corev1.Volume{Name: volumeAPIKey, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  ref.Name,
			Items:       []corev1.KeyToPath{{Key: key, Path: key}},
			DefaultMode: ptr.To[int32](0o440),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: volumeAPIKey, MountPath: apiKeyMountPath, ReadOnly: true})
		args = append(args, "--api-key-file="+path.Join(apiKeyMountPath, key))
	}
	if n := spec.MaxProgramsPerKey; n != nil {
		args = append(args, fmt.Sprintf("--max-programs-per-key=%d", *n))
	}
	if spec.SharePrefixCacheAcrossKeys {
		args = append(args, "--share-prefix-cache-across-keys")
	}
	if spec.EnablePromptTokensDetails {
		args = append(args, "--enable-prompt-tokens-details")
	}

	resources, gpus := containerResources(spec.Resources)
	nodeSelector := map[string]string{}
	for k, v := range spec.NodeSelector {
		nodeSelector[k] = v
	}
	tolerations := append([]corev1.Toleration(nil), spec.Tolerations...)
	if gpus > 0 {
		if product := spec.Resources.AcceleratorProduct; product != "" {
			nodeSelector[gpuProductLabel] = product
		}
		// GPU nodes are commonly tainted so that only pods asking for GPUs
		// land there; such pods must tolerate the taint.
		tolerations = append(tolerations, corev1.Toleration{
			Key: gpuResource, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
		})
	}
	if len(nodeSelector) == 0 {
		nodeSelector = nil
	}

	container := corev1.Container{
		Name:            runtimeContainerName,
		Image:           image,
		ImagePullPolicy: spec.ImagePullPolicy,
		Command:         []string{runtimeCommand},
		Args:            args,
		Ports: []corev1.ContainerPort{
			{Name: httpPortName, ContainerPort: httpPort, Protocol: corev1.ProtocolTCP},
			{Name: controlPortName, ContainerPort: controlPort, Protocol: corev1.ProtocolTCP},
		},
		Env: []corev1.EnvVar{
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			fieldEnv("POD_IP", "status.podIP"),
		},
		Resources:    resources,
		VolumeMounts: mounts,
		// Loading a large model can take minutes; the startup probe holds
		// the liveness probe off until the server answers at all.
		StartupProbe:             httpProbe("/health", int32(startupProbePeriod/time.Second), startupProbeFailures),
		LivenessProbe:            httpProbe("/health", 10, 3),
		ReadinessProbe:           httpProbe("/ready", 5, 2),
		SecurityContext:          containerSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// The kubelet's own sleep: the image needs no shell or sleep binary.
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Sleep: &corev1.SleepAction{Seconds: int64(preStopDelay / time.Second)},
		}},
	}

	var initContainers []corev1.Container
	if spec.Model.Source.URL != "" {
		initContainers = []corev1.Container{fetchContainer(spec, image)}
	}

	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: poolLabels(pool.Name)},
		Spec: corev1.PodSpec{
			InitContainers: initContainers,
			Containers:     []corev1.Container{container},
			Volumes:        volumes,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](runtimeUID),
				RunAsGroup:     ptr.To[int64](runtimeUID),
				FSGroup:        ptr.To[int64](runtimeUID),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			// The runtime never calls the Kubernetes API; the controller
			// talks to it, not the other way round.
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			// The grace period counts from the deletion: the preStop delay,
			// then the drain, then the margin to exit.
			TerminationGracePeriodSeconds: ptr.To(int64((preStopDelay + drain + terminationGraceBeyondDrain).Seconds())),
			NodeSelector:                  nodeSelector,
			Tolerations:                   tolerations,
			Affinity:                      spec.Affinity,
			PriorityClassName:             spec.PriorityClassName,
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew:           1,
				TopologyKey:       corev1.LabelHostname,
				WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector:     &metav1.LabelSelector{MatchLabels: podSelector(pool.Name)},
				// Spread each revision on its own, so a rollout does not
				// pile new pods where old ones are about to go.
				MatchLabelKeys: []string{"pod-template-hash"},
			}},
		},
	}
	tmpl.Annotations = map[string]string{AnnotationTemplateHash: templateHash(&tmpl)}
	return tmpl
}

// templateHash hashes a template before its hash annotation is set.
// encoding/json writes map keys sorted, so equal templates hash equally.
func templateHash(tmpl *corev1.PodTemplateSpec) string {
	b, err := json.Marshal(tmpl)
	if err != nil {
		// A PodTemplateSpec always marshals; a failure is a programming error.
		panic(fmt.Sprintf("marshal pod template: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// modelSource returns the runtime's --model value and, for file sources,
// the volume and mount that bring the file into the pod.
func modelSource(m *servingv1alpha1.ModelSpec) (string, *corev1.Volume, *corev1.VolumeMount) {
	src := &m.Source
	mount := &corev1.VolumeMount{Name: volumeModel, MountPath: modelMountPath, ReadOnly: true}
	switch {
	case src.PersistentVolumeClaim != nil:
		return path.Join(modelMountPath, path.Clean(string(src.PersistentVolumeClaim.Path))),
			&corev1.Volume{Name: volumeModel, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: src.PersistentVolumeClaim.ClaimName, ReadOnly: true},
			}}, mount
	case src.HostPath != nil:
		// Mount the file itself, not its directory: the pod sees nothing
		// else of the node.
		file := path.Join(modelMountPath, path.Base(src.HostPath.Path))
		mount.MountPath = file
		return file, &corev1.Volume{Name: volumeModel, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: src.HostPath.Path, Type: ptr.To(corev1.HostPathFile)},
		}}, mount
	case src.URL != "":
		// The init container fetches into the cache; the runtime reads it.
		mount.Name, mount.MountPath = volumeModelCache, modelCacheMountPath
		return fetch.ModelPath(modelCacheMountPath, src.URL), modelCacheVolume(m.Fetch), mount
	case src.Image != nil:
		return path.Join(modelMountPath, path.Clean(string(src.Image.Path))),
			&corev1.Volume{Name: volumeModel, VolumeSource: corev1.VolumeSource{
				Image: &corev1.ImageVolumeSource{Reference: src.Image.Reference, PullPolicy: src.Image.PullPolicy},
			}}, mount
	default:
		builtin := src.Builtin
		if builtin == "" {
			builtin = servingv1alpha1.BuiltinModelTiny
		}
		return "builtin:" + string(builtin), nil, nil
	}
}

// containerSecurityContext locks down the runtime's containers: no
// privileges, a read-only root, non-root.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func executorArgs(e *servingv1alpha1.ExecutorSpec) []string {
	switch e.Type {
	case servingv1alpha1.ExecutorSim:
	case servingv1alpha1.ExecutorGGML:
		// The runtime picks CUDA when NVML sees the pod's GPU and the
		// image's ggml has the CUDA backend, else the CPU.
		return []string{"--executor=ggml"}
	default:
		return []string{"--executor=cpu"}
	}
	accelerator, model := "H100-SXM", "llama-3.1-8b"
	if e.Sim != nil {
		if e.Sim.Accelerator != "" {
			accelerator = e.Sim.Accelerator
		}
		if e.Sim.Model != "" {
			model = e.Sim.Model
		}
	}
	return []string{"--executor=sim", "--sim-accelerator=" + accelerator, "--sim-model=" + model}
}

func engineArgs(e *servingv1alpha1.EngineSpec) []string {
	if e == nil {
		return nil
	}
	var args []string
	intArg := func(flag string, v *int32) {
		if v != nil {
			args = append(args, fmt.Sprintf("--%s=%d", flag, *v))
		}
	}
	intArg("max-num-seqs", e.MaxNumSeqs)
	intArg("max-num-batched-tokens", e.MaxNumBatchedTokens)
	intArg("long-prefill-token-threshold", e.LongPrefillTokenThreshold)
	intArg("max-num-partial-prefills", e.MaxNumPartialPrefills)
	intArg("max-long-partial-prefills", e.MaxLongPartialPrefills)
	intArg("block-size", e.BlockSize)
	intArg("kv-cache-blocks", e.KVCacheBlocks)
	intArg("kv-host-blocks", e.KVHostBlocks)
	if e.KVCacheDType != "" {
		args = append(args, "--kv-cache-dtype="+string(e.KVCacheDType))
	}
	if e.KVCacheMemory != nil {
		args = append(args, "--kv-cache-memory="+byteSize(*e.KVCacheMemory))
	}
	if e.KVCacheMemoryFraction != nil {
		args = append(args, "--kv-cache-memory-fraction="+string(*e.KVCacheMemoryFraction))
	}
	intArg("max-queue", e.MaxQueue)
	intArg("tensor-parallel", e.TensorParallelSize)
	if e.ToolCallParser != "" {
		args = append(args, "--tool-call-parser="+e.ToolCallParser)
	}
	if e.ReasoningParser != "" {
		args = append(args, "--reasoning-parser="+e.ReasoningParser)
	}
	return args
}

// binaryQuantity is a whole number of bytes with an optional binary suffix,
// which the runtime's size flags read as Kubernetes does.
var binaryQuantity = regexp.MustCompile(`^[0-9]+(Ki|Mi|Gi|Ti)?$`)

// byteSize writes a quantity for the runtime's --kv-cache-memory. Readable
// forms like 8Gi pass through; anything else (decimal suffixes, exponents,
// milli-units, which the runtime's parser reads differently or not at all)
// becomes plain bytes.
func byteSize(q resource.Quantity) string {
	if s := q.String(); binaryQuantity.MatchString(s) {
		return s
	}
	return strconv.FormatInt(q.Value(), 10)
}

// policyArgs are the runtime flags a SchedulerPolicy sets. The rest of a
// policy drives the controller's fleet loop and never reaches the pods, so
// changing it does not roll them.
func policyArgs(p *servingv1alpha1.SchedulerPolicy) []string {
	if p == nil {
		return nil
	}
	var args []string
	if q := p.Spec.Queue; q != nil && q.AgingRate != "" {
		args = append(args, "--aging-rate="+q.AgingRate)
	}
	if c := p.Spec.Completion; c != nil {
		if c.DefaultMaxTokens != nil {
			args = append(args, fmt.Sprintf("--default-max-tokens=%d", *c.DefaultMaxTokens))
		}
		for _, s := range c.Stop {
			args = append(args, "--stop="+s)
		}
		if c.MaxResponseChars != nil {
			args = append(args, fmt.Sprintf("--max-response-chars=%d", *c.MaxResponseChars))
		}
	}
	return args
}

// containerResources turns a pool's per-pod resources into the runtime
// container's requests and limits. Memory is limited to its request (the KV
// cache is sized from it, so overcommit only means OOM kills); CPU is left
// unlimited so a pod may use idle cores. It also returns the GPU count.
func containerResources(r *servingv1alpha1.PodResources) (corev1.ResourceRequirements, int32) {
	var req corev1.ResourceRequirements
	if r == nil {
		return req, 0
	}
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	if r.CPU != nil {
		requests[corev1.ResourceCPU] = *r.CPU
	}
	if r.Memory != nil {
		requests[corev1.ResourceMemory] = *r.Memory
		limits[corev1.ResourceMemory] = *r.Memory
	}
	gpus := ptr.Deref(r.Accelerators, 0)
	if gpus > 0 {
		q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		requests[gpuResource] = q
		limits[gpuResource] = q
	}
	if len(requests) > 0 {
		req.Requests = requests
	}
	if len(limits) > 0 {
		req.Limits = limits
	}
	return req, gpus
}

func fieldEnv(name, fieldPath string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fieldPath},
	}}
}

func httpProbe(path string, periodSeconds, failureThreshold int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString(httpPortName), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    periodSeconds,
		FailureThreshold: failureThreshold,
		TimeoutSeconds:   2,
		SuccessThreshold: 1,
	}
}
