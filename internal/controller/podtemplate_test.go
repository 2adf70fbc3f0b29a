package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	utiltesting "github.com/kvpilot/kvpilot/internal/util/testing"
)

const testImage = "kvpilot:test"

func runtimeContainer(t *testing.T, tmpl corev1.PodTemplateSpec) corev1.Container {
	t.Helper()
	if len(tmpl.Spec.Containers) != 1 || tmpl.Spec.Containers[0].Name != runtimeContainerName {
		t.Fatalf("want one container %q, got %+v", runtimeContainerName, tmpl.Spec.Containers)
	}
	return tmpl.Spec.Containers[0]
}

// baseArgs are the flags every runtime pod gets.
func baseArgs(model, served string) []string {
	return []string{
		"--model=" + model,
		"--served-model-name=" + served,
		"--host=0.0.0.0",
		"--port=8000",
		"--control-port=8081",
		"--control-token-file=/var/run/kvpilot/control/token",
		"--drain-timeout=30s",
	}
}

func TestPodTemplateArgs(t *testing.T) {
	cases := map[string]struct {
		pool   *servingv1alpha1.InferencePool
		policy *servingv1alpha1.SchedulerPolicy
		want   []string
	}{
		"builtin model on CPU": {
			pool: utiltesting.MakeInferencePool("p", "ns").Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu"),
		},
		"GGUF from a claim": {
			pool: utiltesting.MakeInferencePool("p", "ns").ServedModelName("llama").PVCModel("weights", "llama/./model.gguf").Obj(),
			want: append(baseArgs("/models/llama/model.gguf", "llama"), "--executor=cpu"),
		},
		"GGUF fetched from a URL": {
			pool: utiltesting.MakeInferencePool("p", "ns").ServedModelName("qwen").URLModel("hf://Qwen/Qwen3-GGUF:Q4_K_M", nil).Obj(),
			// The ref directory is the first 16 bytes of the URL's SHA-256.
			want: append(baseArgs("/var/cache/kvpilot/refs/"+urlKey("hf://Qwen/Qwen3-GGUF:Q4_K_M")+"/model.gguf", "qwen"), "--executor=cpu"),
		},
		"GGUF from the node": {
			pool: utiltesting.MakeInferencePool("p", "ns").HostPathModel("/data/llama.gguf").Obj(),
			want: append(baseArgs("/models/llama.gguf", "tiny"), "--executor=cpu"),
		},
		"GGUF from an image volume": {
			pool: utiltesting.MakeInferencePool("p", "ns").ImageModel("models/llama:1", "model.gguf").Obj(),
			want: append(baseArgs("/models/model.gguf", "tiny"), "--executor=cpu"),
		},
		"ggml executor": {
			pool: utiltesting.MakeInferencePool("p", "ns").Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorGGML}).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=ggml"),
		},
		"sim executor with defaults": {
			pool: utiltesting.MakeInferencePool("p", "ns").Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorSim}).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=sim", "--sim-accelerator=H100-SXM", "--sim-model=llama-3.1-8b"),
		},
		"sim executor with a profile": {
			pool: utiltesting.MakeInferencePool("p", "ns").Sim("L4", "llama-3.1-70b").Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=sim", "--sim-accelerator=L4", "--sim-model=llama-3.1-70b"),
		},
		"engine settings": {
			pool: utiltesting.MakeInferencePool("p", "ns").Engine(servingv1alpha1.EngineSpec{
				MaxNumSeqs:                ptr.To[int32](64),
				MaxNumBatchedTokens:       ptr.To[int32](4096),
				LongPrefillTokenThreshold: ptr.To[int32](1024),
				MaxNumPartialPrefills:     ptr.To[int32](8),
				MaxLongPartialPrefills:    ptr.To[int32](2),
				BlockSize:                 ptr.To[int32](32),
				KVCacheMemory:             ptr.To(resource.MustParse("8Gi")),
				MaxQueue:                  ptr.To[int32](500),
				TensorParallelSize:        ptr.To[int32](2),
				DrainTimeout:              &metav1.Duration{Duration: 90 * time.Second},
			}).Obj(),
			want: append(
				append(baseArgs("builtin:tiny", "tiny")[:6], "--drain-timeout=1m30s", "--executor=cpu"),
				"--max-num-seqs=64", "--max-num-batched-tokens=4096", "--long-prefill-token-threshold=1024",
				"--max-num-partial-prefills=8", "--max-long-partial-prefills=2", "--block-size=32",
				"--kv-cache-memory=8Gi", "--max-queue=500", "--tensor-parallel=2"),
		},
		"KV cache as blocks": {
			pool: utiltesting.MakeInferencePool("p", "ns").Engine(servingv1alpha1.EngineSpec{KVCacheBlocks: ptr.To[int32](1000)}).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu", "--kv-cache-blocks=1000"),
		},
		"KV cache as a fraction of the GPU": {
			pool: utiltesting.MakeInferencePool("p", "ns").Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorGGML}).Accelerators(1, "").
				Engine(servingv1alpha1.EngineSpec{KVCacheMemoryFraction: ptr.To(servingv1alpha1.Fraction("0.9"))}).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=ggml", "--kv-cache-memory-fraction=0.9"),
		},
		"host KV tier": {
			pool: utiltesting.MakeInferencePool("p", "ns").Engine(servingv1alpha1.EngineSpec{
				KVCacheBlocks: ptr.To[int32](1000), KVHostBlocks: ptr.To[int32](8000),
			}).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu", "--kv-cache-blocks=1000", "--kv-host-blocks=8000"),
		},
		"KV cache dtype": {
			pool: utiltesting.MakeInferencePool("p", "ns").Executor(servingv1alpha1.ExecutorSpec{Type: servingv1alpha1.ExecutorGGML}).
				Engine(servingv1alpha1.EngineSpec{KVCacheDType: "q8_0", KVCacheMemory: ptr.To(resource.MustParse("8Gi"))}).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=ggml", "--kv-cache-dtype=q8_0", "--kv-cache-memory=8Gi"),
		},
		"chat formats": {
			pool: utiltesting.MakeInferencePool("p", "ns").Engine(servingv1alpha1.EngineSpec{ToolCallParser: "pythonic", ReasoningParser: "none"}).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu", "--tool-call-parser=pythonic", "--reasoning-parser=none"),
		},
		"policy request defaults": {
			pool: utiltesting.MakeInferencePool("p", "ns").Policy("agents").Obj(),
			policy: utiltesting.MakeSchedulerPolicy("agents", "ns").AgingRate("0.5").DefaultMaxTokens(256).
				Stop("</tool>", "\n\nUser:").MaxResponseChars(20000).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu",
				"--aging-rate=0.5", "--default-max-tokens=256", "--stop=</tool>", "--stop=\n\nUser:", "--max-response-chars=20000"),
		},
		"API key": {
			pool: utiltesting.MakeInferencePool("p", "ns").APIKey("keys", "openai").Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu", "--api-key-file=/var/run/kvpilot/api-key/openai"),
		},
		"program limit per key": {
			pool: utiltesting.MakeInferencePool("p", "ns").APIKey("keys", "openai").MaxProgramsPerKey(50).Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu", "--api-key-file=/var/run/kvpilot/api-key/openai",
				"--max-programs-per-key=50"),
		},
		"prompt tokens details": {
			pool: utiltesting.MakeInferencePool("p", "ns").EnablePromptTokensDetails().Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu", "--enable-prompt-tokens-details"),
		},
		"prefix cache shared across keys": {
			pool: utiltesting.MakeInferencePool("p", "ns").APIKey("keys", "openai").SharePrefixCacheAcrossKeys().Obj(),
			want: append(baseArgs("builtin:tiny", "tiny"), "--executor=cpu", "--api-key-file=/var/run/kvpilot/api-key/openai",
				"--share-prefix-cache-across-keys"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := runtimeContainer(t, podTemplate(tc.pool, tc.policy, testImage))
			if diff := cmp.Diff(tc.want, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"/kvpilot-runtime"}, c.Command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]string{
		"8Gi": "8Gi", "512Mi": "512Mi", "1073741824": "1073741824",
		"8G": "8000000000", "1.5Gi": "1536Mi", "1e9": "1000000000", "1500m": "2",
	} {
		if got := byteSize(resource.MustParse(in)); got != want {
			t.Errorf("byteSize(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestPodTemplateContract(t *testing.T) {
	tmpl := podTemplate(utiltesting.MakeInferencePool("chat", "ns").Obj(), nil, testImage)
	c := runtimeContainer(t, tmpl)

	if c.Image != testImage {
		t.Errorf("image = %q, want the manager's default %q", c.Image, testImage)
	}
	wantPorts := []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8000, Protocol: corev1.ProtocolTCP},
		{Name: "control", ContainerPort: 8081, Protocol: corev1.ProtocolTCP},
	}
	if diff := cmp.Diff(wantPorts, c.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/health"}, {"readiness", c.ReadinessProbe, "/ready"}, {"startup", c.StartupProbe, "/health"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET, got %+v", p.name, p.probe)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s probe: GET %s on %v, want GET %s on http", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.ValueFrom.FieldRef.FieldPath)
	}
	if diff := cmp.Diff([]string{"POD_NAME=metadata.name", "POD_NAMESPACE=metadata.namespace", "POD_IP=status.podIP"}, env); diff != "" {
		t.Errorf("downward-API env (-want +got):\n%s", diff)
	}

	sc := c.SecurityContext
	if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		t.Errorf("container security context not locked down: %+v", sc)
	}
	if psc := tmpl.Spec.SecurityContext; !ptr.Deref(psc.RunAsNonRoot, false) || ptr.Deref(psc.RunAsUser, 0) == 0 {
		t.Errorf("pod must run as non-root: %+v", psc)
	}

	wantVolumes := []corev1.Volume{
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "control-token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "chat-control", Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}, DefaultMode: ptr.To[int32](0o440),
		}}},
	}
	if diff := cmp.Diff(wantVolumes, tmpl.Spec.Volumes); diff != "" {
		t.Errorf("volumes of a builtin-model pool (-want +got):\n%s", diff)
	}

	if got := tmpl.Labels[LabelPool]; got != "chat" {
		t.Errorf("pod label %s = %q, want chat", LabelPool, got)
	}
	if len(tmpl.Spec.TopologySpreadConstraints) != 1 || tmpl.Spec.TopologySpreadConstraints[0].TopologyKey != corev1.LabelHostname {
		t.Errorf("want a spread across nodes, got %+v", tmpl.Spec.TopologySpreadConstraints)
	}
	if got := ptr.Deref(tmpl.Spec.TerminationGracePeriodSeconds, 0); got != 50 {
		t.Errorf("termination grace = %ds, want the 5s preStop delay + the 30s drain timeout + 15s", got)
	}
	wantLifecycle := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	if diff := cmp.Diff(wantLifecycle, tmpl.Spec.Containers[0].Lifecycle); diff != "" {
		t.Errorf("the runtime must sleep before SIGTERM so endpoints go first (-want +got):\n%s", diff)
	}
	if ptr.Deref(tmpl.Spec.AutomountServiceAccountToken, true) {
		t.Error("the runtime needs no service-account token")
	}
}

func TestPodTemplateModelVolumes(t *testing.T) {
	cases := map[string]struct {
		pool       *servingv1alpha1.InferencePool
		wantVolume corev1.VolumeSource
		wantMount  corev1.VolumeMount
	}{
		"claim": {
			pool:       utiltesting.MakeInferencePool("p", "ns").PVCModel("weights", "m.gguf").Obj(),
			wantVolume: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "weights", ReadOnly: true}},
			wantMount:  corev1.VolumeMount{Name: "model", MountPath: "/models", ReadOnly: true},
		},
		"host file": {
			pool:       utiltesting.MakeInferencePool("p", "ns").HostPathModel("/srv/m.gguf").Obj(),
			wantVolume: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/m.gguf", Type: ptr.To(corev1.HostPathFile)}},
			wantMount:  corev1.VolumeMount{Name: "model", MountPath: "/models/m.gguf", ReadOnly: true},
		},
		"image": {
			pool:       utiltesting.MakeInferencePool("p", "ns").ImageModel("models/llama:1", "m.gguf").Obj(),
			wantVolume: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "models/llama:1"}},
			wantMount:  corev1.VolumeMount{Name: "model", MountPath: "/models", ReadOnly: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tmpl := podTemplate(tc.pool, nil, testImage)
			var got *corev1.Volume
			for i := range tmpl.Spec.Volumes {
				if tmpl.Spec.Volumes[i].Name == "model" {
					got = &tmpl.Spec.Volumes[i]
				}
			}
			if got == nil {
				t.Fatal("no model volume")
			}
			if diff := cmp.Diff(tc.wantVolume, got.VolumeSource); diff != "" {
				t.Errorf("volume (-want +got):\n%s", diff)
			}
			mounts := runtimeContainer(t, tmpl).VolumeMounts
			if diff := cmp.Diff(tc.wantMount, mounts[len(mounts)-1]); diff != "" {
				t.Errorf("mount (-want +got):\n%s", diff)
			}
		})
	}
}

// urlKey is fetch.RefKey written out, so the test pins the path contract
// between the controller and the fetch mode.
func urlKey(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:16])
}

func TestPodTemplateURLModel(t *testing.T) {
	secretEnv := func(name, secret, key string, optional bool) corev1.EnvVar {
		ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
		if optional {
			ref.Optional = ptr.To(true)
		}
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}}
	}
	limit := resource.MustParse("50Gi")
	cases := map[string]struct {
		url        string
		fetch      *servingv1alpha1.ModelFetch
		wantArgs   []string
		wantEnv    []corev1.EnvVar
		wantVolume corev1.VolumeSource
	}{
		"hub, per-pod cache": {
			url:        "hf://Qwen/Qwen3-GGUF/Qwen3-Q4_K_M.gguf",
			wantArgs:   []string{"fetch", "--url=hf://Qwen/Qwen3-GGUF/Qwen3-Q4_K_M.gguf", "--cache-dir=/var/cache/kvpilot", "--progress-addr=:8081"},
			wantVolume: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		},
		"gated hub repository, mirror, shared claim": {
			url: "hf://meta-llama/Llama-3.1-8B-GGUF:Q8_0",
			fetch: &servingv1alpha1.ModelFetch{
				HFTokenSecretRef: &servingv1alpha1.TokenSecretReference{Name: "hf"},
				HFEndpoint:       "https://hf-mirror.internal",
				Cache:            &servingv1alpha1.ModelCache{PersistentVolumeClaim: &servingv1alpha1.CacheClaim{ClaimName: "model-cache"}},
			},
			wantArgs: []string{"fetch", "--url=hf://meta-llama/Llama-3.1-8B-GGUF:Q8_0", "--cache-dir=/var/cache/kvpilot", "--progress-addr=:8081",
				"--hf-endpoint=https://hf-mirror.internal"},
			wantEnv:    []corev1.EnvVar{secretEnv("HF_TOKEN", "hf", "token", false)},
			wantVolume: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "model-cache"}},
		},
		"minio with credentials, bounded emptyDir": {
			url: "s3://models/qwen3.gguf",
			fetch: &servingv1alpha1.ModelFetch{
				S3: &servingv1alpha1.S3Fetch{Endpoint: "http://minio.minio:9000", Region: "eu-1",
					CredentialsSecretRef: &servingv1alpha1.SecretReference{Name: "minio"}},
				Cache: &servingv1alpha1.ModelCache{SizeLimit: &limit},
			},
			wantArgs: []string{"fetch", "--url=s3://models/qwen3.gguf", "--cache-dir=/var/cache/kvpilot", "--progress-addr=:8081",
				"--s3-endpoint=http://minio.minio:9000", "--s3-region=eu-1"},
			wantEnv: []corev1.EnvVar{
				secretEnv("AWS_ACCESS_KEY_ID", "minio", "AWS_ACCESS_KEY_ID", false),
				secretEnv("AWS_SECRET_ACCESS_KEY", "minio", "AWS_SECRET_ACCESS_KEY", false),
				secretEnv("AWS_SESSION_TOKEN", "minio", "AWS_SESSION_TOKEN", true),
			},
			wantVolume: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pool := utiltesting.MakeInferencePool("p", "ns").URLModel(tc.url, tc.fetch).Obj()
			pool.Spec.ImagePullPolicy = corev1.PullAlways
			tmpl := podTemplate(pool, nil, testImage)
			if len(tmpl.Spec.InitContainers) != 1 {
				t.Fatalf("want one init container, got %d", len(tmpl.Spec.InitContainers))
			}
			ic := tmpl.Spec.InitContainers[0]
			if ic.Name != "fetch-model" || ic.Image != testImage || ic.ImagePullPolicy != corev1.PullAlways ||
				len(ic.Command) != 1 || ic.Command[0] != runtimeCommand {
				t.Errorf("init container %s runs %s %v (pull %s), want fetch-model running the runtime's image", ic.Name, ic.Image, ic.Command, ic.ImagePullPolicy)
			}
			if diff := cmp.Diff(tc.wantArgs, ic.Args); diff != "" {
				t.Errorf("init container args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEnv, ic.Env); diff != "" {
				t.Errorf("init container env (-want +got):\n%s", diff)
			}
			wantInitMounts := []corev1.VolumeMount{{Name: "model-cache", MountPath: "/var/cache/kvpilot"}, {Name: "tmp", MountPath: "/tmp"}}
			if diff := cmp.Diff(wantInitMounts, ic.VolumeMounts); diff != "" {
				t.Errorf("init container mounts (-want +got):\n%s", diff)
			}
			if sc := ic.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) {
				t.Errorf("init container security context not locked down: %+v", sc)
			}

			c := runtimeContainer(t, tmpl)
			if want := "--model=/var/cache/kvpilot/refs/" + urlKey(tc.url) + "/model.gguf"; c.Args[0] != want {
				t.Errorf("runtime %s, want %s", c.Args[0], want)
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					t.Errorf("the runtime container must not see the fetch's secrets: %s", e.Name)
				}
			}
			mounts := c.VolumeMounts
			if diff := cmp.Diff(corev1.VolumeMount{Name: "model-cache", MountPath: "/var/cache/kvpilot", ReadOnly: true}, mounts[len(mounts)-1]); diff != "" {
				t.Errorf("runtime mount (-want +got):\n%s", diff)
			}
			var vol *corev1.Volume
			for i := range tmpl.Spec.Volumes {
				if tmpl.Spec.Volumes[i].Name == "model-cache" {
					vol = &tmpl.Spec.Volumes[i]
				}
			}
			if vol == nil {
				t.Fatal("no model-cache volume")
			}
			if diff := cmp.Diff(tc.wantVolume, vol.VolumeSource); diff != "" {
				t.Errorf("cache volume (-want +got):\n%s", diff)
			}
			d, err := desiredDeployment(pool, tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(ptr.Deref(d.Spec.ProgressDeadlineSeconds, 0)) * time.Second; got < 2*time.Hour {
				t.Errorf("progress deadline %s leaves no time for the download", got)
			}
		})
	}
	if ics := podTemplate(utiltesting.MakeInferencePool("p", "ns").Obj(), nil, testImage).Spec.InitContainers; ics != nil {
		t.Errorf("a builtin model needs no init container, got %+v", ics)
	}
}

func TestPodTemplateResources(t *testing.T) {
	pool := utiltesting.MakeInferencePool("p", "ns").
		Accelerators(2, "NVIDIA-H100-80GB-HBM3").CPUMemory("4", "32Gi").NodeSelector("pool", "gpu").Obj()
	tmpl := podTemplate(pool, nil, testImage)

	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi"),
			"nvidia.com/gpu": resource.MustParse("2"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Gi"), "nvidia.com/gpu": resource.MustParse("2")},
	}
	if diff := cmp.Diff(want, runtimeContainer(t, tmpl).Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"pool": "gpu", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, tmpl.Spec.NodeSelector); diff != "" {
		t.Errorf("node selector (-want +got):\n%s", diff)
	}
	wantTol := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(wantTol, tmpl.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}

	cpuOnly := podTemplate(utiltesting.MakeInferencePool("p", "ns").Obj(), nil, testImage)
	if cpuOnly.Spec.NodeSelector != nil || cpuOnly.Spec.Tolerations != nil {
		t.Errorf("a CPU pool needs no node selector or tolerations: %v %v", cpuOnly.Spec.NodeSelector, cpuOnly.Spec.Tolerations)
	}
}

func TestPodTemplateImage(t *testing.T) {
	pool := utiltesting.MakeInferencePool("p", "ns").Image("example/runtime:v2").Obj()
	pool.Spec.ImagePullPolicy = corev1.PullAlways
	c := runtimeContainer(t, podTemplate(pool, nil, testImage))
	if c.Image != "example/runtime:v2" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %q %q, want the pool's own", c.Image, c.ImagePullPolicy)
	}
}

// TestTemplateHash checks what rolls the pods: every change that reaches
// them, and nothing else.
func TestTemplateHash(t *testing.T) {
	hash := func(pool *servingv1alpha1.InferencePool, policy *servingv1alpha1.SchedulerPolicy) string {
		return podTemplate(pool, policy, testImage).Annotations[AnnotationTemplateHash]
	}
	base := func() *utiltesting.InferencePoolWrapper {
		return utiltesting.MakeInferencePool("p", "ns").Policy("pol")
	}
	policy := func() *utiltesting.SchedulerPolicyWrapper { return utiltesting.MakeSchedulerPolicy("pol", "ns") }
	ref := hash(base().Obj(), policy().Obj())
	if ref == "" || ref != hash(base().Obj(), policy().Obj()) {
		t.Fatalf("hash must be set and deterministic, got %q", ref)
	}

	rolls := map[string]string{
		"engine change":          hash(base().MaxNumSeqs(8).Obj(), policy().Obj()),
		"model change":           hash(base().PVCModel("c", "m.gguf").Obj(), policy().Obj()),
		"image change":           hash(base().Image("other:1").Obj(), policy().Obj()),
		"policy request default": hash(base().Obj(), policy().DefaultMaxTokens(64).Obj()),
	}
	for name, h := range rolls {
		if h == ref {
			t.Errorf("%s: hash unchanged, the pods would not roll", name)
		}
	}

	stays := map[string]string{
		"replicas":               hash(base().Replicas(7).Obj(), policy().Obj()),
		"service":                hash(base().Service(corev1.ServiceTypeNodePort, 80).Obj(), policy().Obj()),
		"fleet-only policy knob": hash(base().Obj(), policy().Interval(10*time.Second).ActingTokenWeight("0.5").Obj()),
	}
	for name, h := range stays {
		if h != ref {
			t.Errorf("%s: hash changed, the pods would roll for nothing", name)
		}
	}
}

// TestProgressDeadlineOutlastsModelLoad: a pod may load its model for as
// long as its startup probe allows, and pull its image before that, without
// the Deployment reporting the rollout stalled (and the pool Degraded).
func TestProgressDeadlineOutlastsModelLoad(t *testing.T) {
	pool := utiltesting.MakeInferencePool("chat", "ns").Obj()
	tmpl := podTemplate(pool, nil, testImage)
	probe := runtimeContainer(t, tmpl).StartupProbe
	loadBudget := time.Duration(probe.PeriodSeconds) * time.Duration(probe.FailureThreshold) * time.Second
	if loadBudget < 10*time.Minute {
		t.Errorf("startup probe allows %s to load the model, want at least 10m", loadBudget)
	}
	d, err := desiredDeployment(pool, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Duration(ptr.Deref(d.Spec.ProgressDeadlineSeconds, 0)) * time.Second
	if deadline < loadBudget+15*time.Minute {
		t.Errorf("progress deadline %s, want the startup probe's %s plus at least 15m to pull the image", deadline, loadBudget)
	}
}
