//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kvpilot/kvpilot/test/localcluster"
)

// managerRef is the manager the tests talk to: a process (process node) or
// the leader pod of the manager Deployment (real node).
type managerRef struct {
	// MetricsURL serves the manager's Prometheus metrics: plain HTTP on
	// loopback for a process, HTTPS with a bearer token (env.metricsToken)
	// on the leader pod's IP in the cluster.
	MetricsURL string
	// pod is the leader pod's name (real node).
	pod string
	// proc is the manager process (process node).
	proc *localcluster.Manager
}

func (m *managerRef) stopProcess(grace time.Duration) {
	if m != nil && m.proc != nil {
		m.proc.Stop(grace)
	}
}

// The manager as `kubectl apply -k config/default` installs it.
const (
	managerNamespace  = "kvpilot-system"
	managerDeployment = "kvpilot-controller-manager"
	managerLease      = "kvpilot-manager.serving.kvpilot.dev"
	// metricsReaderRole is config/rbac's metrics-reader ClusterRole with
	// config/default's name prefix.
	metricsReaderRole = "kvpilot-metrics-reader"
	// managerMetricsPort is the manager's --metrics-bind-address port in
	// config/manager.
	managerMetricsPort  = "8443"
	managerReadyTimeout = 3 * time.Minute
)

// deployManager installs kvpilot as a user does: with the Helm chart
// where KVPILOT_E2E_INSTALL is "helm" (installChart), else with kustomize
// (applyKustomize). It waits for the Deployment and a leader, and sets
// up a ServiceAccount bound to the metrics-reader role whose token reads
// the manager's metrics over HTTPS, as Prometheus would.
func deployManager(ctx context.Context, runDir, image string) error {
	switch mode := os.Getenv("KVPILOT_E2E_INSTALL"); mode {
	case "", "kustomize":
		if err := applyKustomize(runDir, image); err != nil {
			return err
		}
	case "helm":
		if err := installChart(ctx, runDir, image); err != nil {
			return err
		}
	default:
		return fmt.Errorf("KVPILOT_E2E_INSTALL=%q: want kustomize or helm", mode)
	}
	if out, err := kubectl("rollout", "status", "-n", managerNamespace, "deployment/"+managerDeployment, "--timeout="+managerReadyTimeout.String()); err != nil {
		return fmt.Errorf("manager Deployment not available: %w\n%s\n%s", err, out, managerDiagnostics())
	}
	return watchManager(ctx)
}

// installChart installs charts/kvpilot as release kvpilot (so its objects
// have config/default's names) with the image set to image, with the helm
// binary of KVPILOT_HELM, into a namespace labelled as config/default
// labels it.
func installChart(ctx context.Context, runDir, image string) error {
	helm := os.Getenv("KVPILOT_HELM")
	if helm == "" {
		return fmt.Errorf("KVPILOT_E2E_INSTALL=helm needs KVPILOT_HELM (make test-e2e E2E_INSTALL=helm builds it)")
	}
	name, tag, ok := strings.Cut(image, ":")
	if !ok || strings.Contains(tag, "/") {
		return fmt.Errorf("image %q: want NAME:TAG", image)
	}
	if _, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   managerNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	home := filepath.Join(runDir, "helm")
	cmd := exec.CommandContext(ctx, helm, "install", "kvpilot", filepath.Join(env.repo, "charts", "kvpilot"),
		"--namespace", managerNamespace, "--set", "image.repository="+name, "--set", "image.tag="+tag)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.cluster.Kubeconfig, "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm install kvpilot charts/kvpilot: %w\n%s", err, out)
	}
	return nil
}

// applyKustomize installs kvpilot from a copy of config/ whose
// config/manager/kustomization.yaml points the image at image (the edit
// config/manager's comment tells users to make), with `kubectl apply -k
// config/default`.
func applyKustomize(runDir, image string) error {
	dst := filepath.Join(runDir, "config")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(env.repo, "config"))); err != nil {
		return err
	}
	name, tag, ok := strings.Cut(image, ":")
	if !ok || strings.Contains(tag, "/") {
		return fmt.Errorf("image %q: want NAME:TAG", image)
	}
	kpath := filepath.Join(dst, "manager", "kustomization.yaml")
	k, err := os.ReadFile(kpath)
	if err != nil {
		return err
	}
	edited := regexp.MustCompile(`(?m)^  newName: .*$`).ReplaceAllString(string(k), "  newName: "+name)
	edited = regexp.MustCompile(`(?m)^  newTag: .*$`).ReplaceAllString(edited, "  newTag: "+tag)
	if edited == string(k) {
		return fmt.Errorf("%s: no images entry to point at %s", kpath, image)
	}
	if err := os.WriteFile(kpath, []byte(edited), 0o644); err != nil {
		return err
	}
	if out, err := kubectl("apply", "--server-side", "-k", filepath.Join(dst, "default")); err != nil {
		return fmt.Errorf("kubectl apply -k config/default: %w\n%s", err, out)
	}
	return nil
}

// watchManager sets up the metrics reader and waits for a leader.
func watchManager(ctx context.Context) error {
	// A reader of the metrics, bound to config/rbac's metrics-reader role.
	const reader = "e2e-metrics-reader"
	kube := env.kube
	if _, err := kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: reader}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: reader, Namespace: metav1.NamespaceDefault}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	tok, err := kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).CreateToken(ctx, reader, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	env.metricsToken = tok.Status.Token
	// The manager serves its metrics with a certificate it made itself.
	env.metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

	m, err := waitForLeader(ctx, "")
	if err != nil {
		return err
	}
	setManager(m)
	return nil
}

// waitForLeader waits until a running manager pod other than notPod holds
// the leader lease and serves metrics, and returns it.
func waitForLeader(ctx context.Context, notPod string) (*managerRef, error) {
	deadline := time.Now().Add(managerReadyTimeout)
	last := ""
	for {
		m, msg := leader(ctx, notPod)
		if m != nil {
			if _, err := scrape(m.MetricsURL); err == nil {
				return m, nil
			} else {
				msg = err.Error()
			}
		}
		last = msg
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no manager leader after %v: %s\n%s", managerReadyTimeout, last, managerDiagnostics())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// leader returns the pod holding the leader lease, if it runs and is not
// notPod, or why not.
func leader(ctx context.Context, notPod string) (*managerRef, string) {
	var lease *coordinationv1.Lease
	lease, err := env.kube.CoordinationV1().Leases(managerNamespace).Get(ctx, managerLease, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Sprintf("lease %s/%s: %v", managerNamespace, managerLease, err)
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	// controller-runtime's identity is the hostname (the pod's name), "_"
	// and a UUID.
	pod, _, _ := strings.Cut(holder, "_")
	if pod == "" || pod == notPod {
		return nil, fmt.Sprintf("lease held by %q", holder)
	}
	p, err := env.kube.CoreV1().Pods(managerNamespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Sprintf("leader pod %s: %v", pod, err)
	}
	// Not readiness: a replacement pod may win the lease before its
	// readiness probe first runs, and leads from then on.
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return nil, fmt.Sprintf("leader pod %s is %s", pod, p.Status.Phase)
	}
	return &managerRef{pod: pod, MetricsURL: "https://" + net.JoinHostPort(p.Status.PodIP, managerMetricsPort) + "/metrics"}, ""
}

// restartManager stops the manager that leads and waits for the next one.
// On a real node it deletes the leader pod, as a node drain or a crash
// would: the other replica takes the lease over (the leaving one releases
// it) and the Deployment replaces the pod.
func restartManager(ctx context.Context) error {
	if !env.cluster.RealNode {
		currentManager().stopProcess(15 * time.Second)
		time.Sleep(time.Second) // no controller: the pods keep serving on their last placement
		return startManager(ctx)
	}
	old := currentManager()
	if err := env.kube.CoreV1().Pods(managerNamespace).Delete(ctx, old.pod, metav1.DeleteOptions{}); err != nil {
		return err
	}
	m, err := waitForLeader(ctx, old.pod)
	if err != nil {
		return err
	}
	setManager(m)
	return nil
}

// managerDiagnostics describes the manager's pods and their logs, for a
// failure message.
func managerDiagnostics() string {
	var b strings.Builder
	out, _ := kubectl("get", "pods", "-n", managerNamespace, "-o", "wide")
	b.WriteString(out)
	out, _ = kubectl("describe", "pods", "-n", managerNamespace)
	b.WriteString(out)
	out, _ = kubectl("logs", "-n", managerNamespace, "-l", "control-plane=controller-manager", "--tail=40", "--prefix")
	b.WriteString(out)
	return b.String()
}
