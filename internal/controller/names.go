package controller

// Labels and annotations the controller puts on what it creates.
const (
	// LabelPool selects the pods, and every child object, of one pool.
	LabelPool = "serving.kvpilot.dev/pool"
	// AnnotationTemplateHash is the hash of the pod template's inputs. Any
	// change to the pool spec or its policy that reaches the pods changes
	// it, which rolls the pods; the fleet loop also uses it to tell current
	// pods from old ones during a rollout.
	AnnotationTemplateHash = "serving.kvpilot.dev/template-hash"

	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelComponent = "app.kubernetes.io/component"
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedByValue = "kvpilot"
)

// FieldOwner is the server-side apply field manager of the controller.
const FieldOwner = "kvpilot-controller"

// The runtime pod contract (cmd/runtime).
const (
	runtimeContainerName = "runtime"
	runtimeCommand       = "/kvpilot-runtime"
	httpPortName         = "http"
	httpPort             = 8000
	controlPortName      = "control"
	controlPort          = 8081

	controlTokenKey       = "token"
	controlTokenMountPath = "/var/run/kvpilot/control"
	apiKeyMountPath       = "/var/run/kvpilot/api-key"
	modelMountPath        = "/models"
	modelCacheMountPath   = "/var/cache/kvpilot"
	fetchContainerName    = "fetch-model"
	tmpMountPath          = "/tmp"

	// runtimeUID is distroless' nonroot user.
	runtimeUID = 65532

	gpuResource     = "nvidia.com/gpu"
	gpuProductLabel = "nvidia.com/gpu.product"
)

// ControlSecretName is the name of the Secret holding a pool's control-API
// bearer token.
func ControlSecretName(pool string) string { return pool + "-control" }

// poolLabels are the labels of a pool's children and the selector of its
// pods. The selector is only LabelPool: a Deployment's selector is
// immutable, so it must never depend on anything but the pool's name.
func poolLabels(pool string) map[string]string {
	return map[string]string{
		labelName:      "kvpilot-runtime",
		labelInstance:  pool,
		labelComponent: "inference",
		labelManagedBy: managedByValue,
		LabelPool:      pool,
	}
}

func podSelector(pool string) map[string]string {
	return map[string]string{LabelPool: pool}
}
