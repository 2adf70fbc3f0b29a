//go:build e2e

// Package e2e tests kvpilot the way a user meets it, on a local cluster
// (test/localcluster: etcd, kube-apiserver, kube-controller-manager):
// kubectl applies the CRDs and samples, clients talk to pod IPs, kubectl
// scales pools, the fleet loop pauses and resumes programs across pods.
//
// The pods run on one of two nodes, chosen by KVPILOT_E2E_NODE:
//
//   - real: kube-scheduler and a kubelet with containerd, runc and CNI
//     (test/localcluster/node.go). The images come from the Dockerfile
//     (KVPILOT_NODE_IMAGES holds their archives; KVPILOT_NODE_IMAGE names
//     kvpilot's, KVPILOT_PAUSE_IMAGE the sandbox image), and the manager
//     runs in the cluster as `kubectl apply -k config/default` installs it,
//     under its own ServiceAccount and RBAC, with leader election between
//     its two replicas and its metrics served over HTTPS to a token of the
//     metrics-reader role.
//   - process (or unset): the fallback. test/nodeagent stands in for the
//     kubelet and the scheduler and runs pods as processes of the runtime
//     binary; the manager runs as a process with admin credentials. RBAC,
//     the image, the Deployment and the pod template's user, probes and
//     mounts are exercised only as far as the node agent interprets them.
//     KVPILOT_E2E_FALLBACK says why the real node was not used.
//
// Run with `make test-e2e` (build tag e2e), which picks the node
// (hack/e2e-node.sh); it needs the binaries of hack/setup-envtest.sh
// (KUBEBUILDER_ASSETS) and hack/setup-kube-components.sh (KUBE_COMPONENTS).
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	"github.com/kvpilot/kvpilot/test/localcluster"
	"github.com/kvpilot/kvpilot/test/nodeagent"
)

// env is the cluster every test of the package shares.
var env struct {
	cluster    *localcluster.Cluster
	kube       kubernetes.Interface
	client     client.Client
	repo       string
	binDir     string
	managerBin string
	// image and pauseImage are the images the real node runs.
	image, pauseImage string

	mu      sync.Mutex
	manager *managerRef
	// managers counts manager starts, to name their logs.
	managers int

	// metricsClient and metricsToken read the in-cluster manager's metrics
	// (real node).
	metricsClient *http.Client
	metricsToken  string
}

// Named timeouts.
const (
	podsReadyTimeout = 2 * time.Minute
	statusTimeout    = 60 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	assets, components := os.Getenv("KUBEBUILDER_ASSETS"), os.Getenv("KUBE_COMPONENTS")
	if assets == "" || components == "" {
		fmt.Fprintln(os.Stderr, "e2e: KUBEBUILDER_ASSETS and KUBE_COMPONENTS must name the control-plane binaries; run `make test-e2e`")
		return 1
	}
	runDir, err := os.MkdirTemp("", "kvpilot-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	keep := os.Getenv("KVPILOT_E2E_KEEP") != ""
	code := 1
	defer func() {
		if code != 0 || keep {
			fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", runDir)
			return
		}
		_ = os.RemoveAll(runDir)
	}()

	_, file, _, _ := runtime.Caller(0)
	env.repo = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	env.binDir = filepath.Join(runDir, "bin")
	for name, pkg := range map[string]string{"kvpilot-runtime": "./cmd/runtime", "manager": "./cmd/manager"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(env.binDir, name), pkg)
		cmd.Dir = env.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	env.managerBin = filepath.Join(env.binDir, "manager")

	ctx := context.Background()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...) }
	opts := localcluster.Options{RunDir: runDir, AssetsDir: assets, ComponentsDir: components, Log: logf}
	switch mode := os.Getenv("KVPILOT_E2E_NODE"); mode {
	case "real":
		images := os.Getenv("KVPILOT_NODE_IMAGES")
		env.image, env.pauseImage = os.Getenv("KVPILOT_NODE_IMAGE"), os.Getenv("KVPILOT_PAUSE_IMAGE")
		if images == "" || env.image == "" || env.pauseImage == "" {
			logf("KVPILOT_E2E_NODE=real needs KVPILOT_NODE_IMAGES, KVPILOT_NODE_IMAGE and KVPILOT_PAUSE_IMAGE; run `make test-e2e`")
			return 1
		}
		opts.Node = &localcluster.NodeOptions{
			ImageArchives: []string{filepath.Join(images, "pause.tar"), filepath.Join(images, "kvpilot.tar")},
			SandboxImage:  env.pauseImage,
			GPUs:          8,
		}
		logf("node: real (kubelet, containerd, runc, CNI); manager: in the cluster from %s", env.image)
	case "", "process":
		why := os.Getenv("KVPILOT_E2E_FALLBACK")
		if why == "" {
			why = "KVPILOT_E2E_NODE is not real"
		}
		logf("node: FALLBACK to the process-based node agent (pods are processes, the manager a process with admin credentials): %s", why)
	default:
		logf("KVPILOT_E2E_NODE=%q: want real or process", mode)
		return 1
	}
	env.cluster, err = localcluster.Start(ctx, opts)
	if err != nil {
		logf("start cluster: %v", err)
		return 1
	}
	stopCluster := sync.OnceFunc(env.cluster.Stop)
	defer stopCluster()
	// A real node leaves containers, mounts, a bridge and firewall rules
	// on the machine unless it is torn down: on Ctrl-C or SIGTERM, when
	// go test is gone, and
	// before go test's timeout kills the process without running deferred
	// calls (the tests then fail at once and the suite ends normally).
	// SIGPIPE and SIGHUP: go test, which reads the output, is gone.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	go func() {
		sig := <-sigs
		logf("%v: tearing the cluster down", sig)
		stopCluster()
		os.Exit(2)
	}()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 2*time.Minute {
			t := time.AfterFunc(d-time.Minute, func() {
				logf("go test's timeout (%v) is a minute away: tearing the cluster down", d)
				stopCluster()
			})
			defer t.Stop()
		}
	}
	if env.kube, err = kubernetes.NewForConfig(env.cluster.Config); err != nil {
		logf("%v", err)
		return 1
	}
	scheme := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = servingv1alpha1.AddToScheme(scheme)
	if env.client, err = client.New(env.cluster.Config, client.Options{Scheme: scheme}); err != nil {
		logf("%v", err)
		return 1
	}

	if env.cluster.RealNode {
		if err := deployManager(ctx, runDir, env.image); err != nil {
			logf("deploy the manager: %v", err)
			return 1
		}
		code = m.Run()
		return code
	}

	agentLog, err := os.Create(filepath.Join(env.cluster.LogDir, "nodeagent.log"))
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer agentLog.Close()
	agent, err := nodeagent.New(nodeagent.Options{
		Client:   env.kube,
		RunDir:   filepath.Join(runDir, "pods"),
		Commands: map[string]string{"kvpilot-runtime": filepath.Join(env.binDir, "kvpilot-runtime")},
		HostFlag: "--host",
		GPUs:     8,
		Bind:     true,
		Log:      slog.New(slog.NewTextHandler(agentLog, nil)),
	})
	if err != nil {
		logf("%v", err)
		return 1
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); _ = agent.Run(agentCtx) }()
	defer func() { stopAgent(); <-agentDone }()

	// The CRDs first, with the real kubectl, as a user installs them; the
	// manager exits at start without them.
	if out, err := kubectl("apply", "--server-side", "-k", filepath.Join(env.repo, "config", "crd")); err != nil {
		logf("install CRDs: %v\n%s", err, out)
		return 1
	}
	if out, err := kubectl("wait", "--for", "condition=Established", "--timeout=60s",
		"crd/inferencepools.serving.kvpilot.dev", "crd/schedulerpolicies.serving.kvpilot.dev"); err != nil {
		logf("CRDs not established: %v\n%s", err, out)
		return 1
	}
	if err := startManager(ctx); err != nil {
		logf("start manager: %v", err)
		return 1
	}
	defer func() {
		env.mu.Lock()
		defer env.mu.Unlock()
		env.manager.stopProcess(15 * time.Second)
	}()
	code = m.Run()
	return code
}

// startManager starts a manager process and makes it env.manager.
func startManager(ctx context.Context) error {
	env.mu.Lock()
	env.managers++
	name := fmt.Sprintf("manager-%d", env.managers)
	env.mu.Unlock()
	m, err := env.cluster.StartManager(ctx, name, env.managerBin)
	if err != nil {
		return err
	}
	setManager(&managerRef{MetricsURL: m.MetricsURL, proc: m})
	return nil
}

func setManager(m *managerRef) {
	env.mu.Lock()
	env.manager = m
	env.mu.Unlock()
}

func currentManager() *managerRef {
	env.mu.Lock()
	defer env.mu.Unlock()
	return env.manager
}

// kubectl runs the real kubectl against the cluster.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.cluster.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// newNamespace makes a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.cluster.CreateNamespace(ctx, ns.Name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// applyYAML applies manifests with kubectl from stdin into ns.
func applyYAML(t *testing.T, ns, manifest string) {
	t.Helper()
	cmd := exec.Command("kubectl", "apply", "-n", ns, "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.cluster.Kubeconfig)
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// readyPods waits until the pool has exactly n pods, all ready and none
// terminating, and returns them sorted by name.
func readyPods(t *testing.T, ns, pool string, n int) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	poll.UntilOK(t, podsReadyTimeout, func() string {
		pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "serving.kvpilot.dev/pool=" + pool})
		if err != nil {
			t.Fatal(err)
		}
		ready = ready[:0]
		var states []string
		for _, p := range pods.Items {
			states = append(states, fmt.Sprintf("%s %s ready=%v ip=%s deleting=%v", p.Name, p.Status.Phase, isReady(&p), p.Status.PodIP, p.DeletionTimestamp != nil))
			if isReady(&p) && p.DeletionTimestamp == nil {
				ready = append(ready, p)
			}
		}
		if len(ready) == n && len(pods.Items) == n {
			return ""
		}
		return fmt.Sprintf("pool %s/%s: want %d ready pods, have: %s", ns, pool, n, strings.Join(states, "; "))
	})
	sortPods(ready)
	return ready
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func sortPods(pods []corev1.Pod) {
	for i := 1; i < len(pods); i++ {
		for j := i; j > 0 && pods[j].Name < pods[j-1].Name; j-- {
			pods[j], pods[j-1] = pods[j-1], pods[j]
		}
	}
}

func getPool(t *testing.T, ns, name string) *servingv1alpha1.InferencePool {
	t.Helper()
	pool := &servingv1alpha1.InferencePool{}
	if err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pool); err != nil {
		t.Fatal(err)
	}
	return pool
}
