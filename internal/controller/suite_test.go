package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/controller"
)

// Named timeouts: how long the controller may take to react, how often to
// look, and how long "nothing happens" is watched for.
const (
	reconcileTimeout = 20 * time.Second
	pollInterval     = 100 * time.Millisecond
	quietPeriod      = 2 * time.Second

	defaultImage = "kvpilot:envtest"
)

var (
	k8sClient client.Client
	testEnv   *envtest.Environment
	suiteCtx  context.Context
	stopSuite context.CancelFunc
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller envtest suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		// `make test` builds the binaries and always sets both variables; a
		// bare `go test ./...` elsewhere skips rather than fails.
		Expect(os.Getenv("KVPILOT_REQUIRE_ENVTEST")).To(BeEmpty(),
			"KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)")
		Skip("KUBEBUILDER_ASSETS is not set: envtest suites need `make test` (or KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh))")
	}

	suiteCtx, stopSuite = context.WithCancel(context.Background())
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(servingv1alpha1.AddToScheme(scheme)).To(Succeed())

	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// The manager runs as its service account with only the RBAC that
	// `make manifests` generated, so a missing permission fails the suite.
	managerCfg := rest.CopyConfig(cfg)
	managerCfg.Impersonate = rest.ImpersonationConfig{UserName: grantManagerRole(suiteCtx)}
	mgr, err := ctrl.NewManager(managerCfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   cache.Options{ByObject: controller.CacheByObject()},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(controller.SetupWithManager(suiteCtx, mgr, controller.Options{
		DefaultImage: defaultImage,
		PodAddresses: loopbackAddresses,
		// Progress refreshed often enough to watch within reconcileTimeout.
		FetchProgressInterval: 200 * time.Millisecond,
	})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopSuite != nil {
		stopSuite()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// managerUser is the manager's service account as config/default names it.
const managerUser = "system:serviceaccount:kvpilot-system:kvpilot-controller-manager"

// grantManagerRole binds the generated config/rbac/role.yaml to the
// manager's user and returns the user.
func grantManagerRole(ctx context.Context) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.Unmarshal(b, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	})).To(Succeed())
	return managerUser
}

// newNamespace creates a namespace of its own for one test; nothing a test
// makes can then disturb another.
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kvpilot-test-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed())
	})
	return ns.Name
}
