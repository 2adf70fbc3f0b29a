package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// release and namespace are the names config/default gives: its
	// namePrefix "kvpilot-" and namespace kvpilot-system.
	release   = "kvpilot"
	namespace = "kvpilot-system"
)

var (
	repoRoot = filepath.Join("..", "..")
	chartDir = filepath.Join(repoRoot, "charts", "kvpilot")
)

// helmLabels are the labels the chart adds to what config/ labels an
// object with: Helm's recommended ones. config/ sets app.kubernetes.io/name
// and managed-by=kustomize on most objects but not on controller-gen's
// manager role; the chart sets them on all, which TestChartLabels checks.
var helmLabels = []string{
	"app.kubernetes.io/name",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/version",
	"app.kubernetes.io/managed-by",
	"helm.sh/chart",
}

// helmAnnotations are the annotations the chart adds: crds.keep's policy.
var helmAnnotations = []string{"helm.sh/resource-policy"}

// skipOrFail skips t, or fails it where env (a KVPILOT_REQUIRE_* variable)
// is set, as make test sets it.
func skipOrFail(t *testing.T, env, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(env) != "" {
		t.Fatalf("%s (%s is set)", msg, env)
	}
	t.Skip(msg)
}

// helmBin is the helm binary of KVPILOT_HELM.
func helmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("KVPILOT_HELM")
	if bin == "" {
		skipOrFail(t, "KVPILOT_REQUIRE_HELM", "KVPILOT_HELM is not set: run `make test`, or `make helm-lint` (which builds bin/helm-v3.22.0) and export KVPILOT_HELM=$PWD/bin/helm-v3.22.0")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("KVPILOT_HELM=%s: %v", bin, err)
	}
	return bin
}

// run runs name with args and returns its standard output, failing t with
// its standard error.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	return runEnv(t, nil, name, args...)
}

// runEnv is run with env added to the environment.
func runEnv(t *testing.T, env []string, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// render is `helm template` of the chart as release kvpilot in
// kvpilot-system, with extra flags (--set ...).
func render(t *testing.T, flags ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", release, chartDir, "--namespace", namespace}, flags...)
	return decode(t, "helm template", run(t, helmBin(t), args...))
}

// kustomize is `kustomize build` of a config/ directory with the binary
// of KVPILOT_KUSTOMIZE (make test builds it), else `kubectl kustomize`.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	path := filepath.Join(repoRoot, "config", dir)
	if bin := os.Getenv("KVPILOT_KUSTOMIZE"); bin != "" {
		return decode(t, "kustomize build config/"+dir, run(t, bin, "build", path))
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		skipOrFail(t, "KVPILOT_REQUIRE_HELM", "neither KVPILOT_KUSTOMIZE is set nor kubectl on PATH: the chart is checked against `kustomize build config/default`")
	}
	return decode(t, "kubectl kustomize config/"+dir, run(t, "kubectl", "kustomize", path))
}

// decode splits a multi-document YAML stream into objects, dropping empty
// documents (a template whose toggle is off renders to one).
func decode(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		// Through JSON and the unstructured decoder, so integers stay int64
		// as the API machinery has them.
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("%s: decoding its output: %v", what, err)
		}
		if s := strings.TrimSpace(string(raw)); s == "" || s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("%s: decoding an object of its output: %v\n%s", what, err, raw)
		}
		objs = append(objs, u)
	}
}

// key names an object as kubectl does: kind, namespace and name.
func key(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

// byKey indexes objects by key, with the labels and annotations the chart
// adds removed, failing t on a duplicate.
func byKey(t *testing.T, what string, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, u := range objs {
		k := key(u)
		if _, dup := out[k]; dup {
			t.Fatalf("%s renders %s twice", what, k)
		}
		u = u.DeepCopy()
		dropKeys(u, "labels", helmLabels)
		dropKeys(u, "annotations", helmAnnotations)
		out[k] = u.Object
	}
	return out
}

// dropKeys removes keys from metadata.labels or metadata.annotations, and
// the map itself where that leaves it empty.
func dropKeys(u *unstructured.Unstructured, field string, keys []string) {
	m, _, _ := unstructured.NestedStringMap(u.Object, "metadata", field)
	if m == nil {
		return
	}
	for _, k := range keys {
		delete(m, k)
	}
	if len(m) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", field)
		return
	}
	_ = unstructured.SetNestedStringMap(u.Object, m, "metadata", field)
}

// sameObjects fails t unless chart and kust hold the same objects, each
// equal field for field once the chart's own labels and annotations are
// removed.
func sameObjects(t *testing.T, chart, kust []*unstructured.Unstructured, kustWhat string) {
	t.Helper()
	c := byKey(t, "the chart", chart)
	k := byKey(t, kustWhat, kust)
	var keys []string
	for key := range c {
		keys = append(keys, key)
	}
	for key := range k {
		if _, ok := c[key]; !ok {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		co, inChart := c[key]
		ko, inKust := k[key]
		switch {
		case !inChart:
			t.Errorf("%s has %s, the chart does not", kustWhat, key)
		case !inKust:
			t.Errorf("the chart has %s, %s does not", key, kustWhat)
		default:
			if d := cmp.Diff(ko, co); d != "" {
				t.Errorf("%s differs between %s and the chart (-kustomize +chart):\n%s", key, kustWhat, d)
			}
		}
	}
}

// TestLint runs helm lint --strict on the chart with its defaults and with
// every toggle flipped.
func TestLint(t *testing.T) {
	helm := helmBin(t)
	run(t, helm, "lint", "--strict", chartDir)
	run(t, helm, "lint", "--strict", chartDir, "--set", allToggles)
}

// allToggles flips every toggle of values.yaml from its default.
const allToggles = "namespace.create=true,crds.install=false,crds.keep=false,leaderElection.enabled=false,replicas=1," +
	"metrics.enabled=false,metrics.serviceMonitor.enabled=true,metrics.runtimePodMonitor.enabled=true,rbac.userRoles=false," +
	"grafana.dashboard.enabled=true"

// TestMatchesKustomizeDefault checks that the chart with its defaults (and
// namespace.create, since config/default creates its namespace) renders
// what `kubectl kustomize config/default` does: the same objects, each the
// same but for Helm's labels and the CRDs' keep annotation. A change to
// config/ that the chart does not follow fails here.
func TestMatchesKustomizeDefault(t *testing.T) {
	chart := render(t, "--set", "namespace.create=true")
	sameObjects(t, chart, kustomize(t, "default"), "kubectl kustomize config/default")
}

// TestMatchesKustomizePrometheus checks the chart's monitors against
// config/prometheus.
func TestMatchesKustomizePrometheus(t *testing.T) {
	var monitors []*unstructured.Unstructured
	for _, u := range render(t, "--set", "metrics.serviceMonitor.enabled=true,metrics.runtimePodMonitor.enabled=true") {
		if u.GroupVersionKind().Group == "monitoring.coreos.com" {
			monitors = append(monitors, u)
		}
	}
	sameObjects(t, monitors, kustomize(t, "prometheus"), "kubectl kustomize config/prometheus")
}

// TestMatchesKustomizeGrafana checks the chart's dashboard ConfigMap
// against config/grafana.
func TestMatchesKustomizeGrafana(t *testing.T) {
	var dashboards []*unstructured.Unstructured
	for _, u := range render(t, "--set", "grafana.dashboard.enabled=true") {
		if u.GetKind() == "ConfigMap" {
			dashboards = append(dashboards, u)
		}
	}
	sameObjects(t, dashboards, kustomize(t, "grafana"), "kustomize build config/grafana")
}

// TestChartLabels checks that every object the chart renders but the CRDs
// (kept byte for byte) carries Helm's recommended labels.
func TestChartLabels(t *testing.T) {
	for _, u := range render(t, "--set", "namespace.create=true,metrics.serviceMonitor.enabled=true,metrics.runtimePodMonitor.enabled=true,grafana.dashboard.enabled=true") {
		if u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		l := u.GetLabels()
		for k, want := range map[string]string{
			"app.kubernetes.io/name":       "kvpilot",
			"app.kubernetes.io/instance":   release,
			"app.kubernetes.io/managed-by": "Helm",
		} {
			if l[k] != want {
				t.Errorf("%s: label %s = %q, want %q", key(u), k, l[k], want)
			}
		}
	}
}

// TestCRDsByteForByte checks that the chart's CRD templates are
// config/crd/bases byte for byte inside hack/helm-chart.sh's wrapping: run
// `make manifests` (or hack/helm-chart.sh) after changing the API.
func TestCRDsByteForByte(t *testing.T) {
	srcs, err := filepath.Glob(filepath.Join(repoRoot, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no CRDs under config/crd/bases (%v)", err)
	}
	tpls, _ := filepath.Glob(filepath.Join(chartDir, "templates", "crds", "*.yaml"))
	if len(tpls) != len(srcs) {
		t.Errorf("charts/kvpilot/templates/crds has %d files, config/crd/bases %d: run hack/helm-chart.sh", len(tpls), len(srcs))
	}
	wrapping := map[string]bool{
		"{{- if .Values.crds.install }}":    true,
		"{{- end }}":                        true,
		"    {{- if .Values.crds.keep }}":   true,
		"    helm.sh/resource-policy: keep": true,
		"    {{- end }}":                    true,
	}
	for _, src := range srcs {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := os.ReadFile(filepath.Join(chartDir, "templates", "crds", filepath.Base(src)))
		if err != nil {
			t.Errorf("%v: run hack/helm-chart.sh", err)
			continue
		}
		var got []string
		for i, line := range strings.SplitAfter(string(tpl), "\n") {
			if i == 0 && strings.HasPrefix(line, "# Generated by hack/helm-chart.sh") || wrapping[strings.TrimSuffix(line, "\n")] {
				continue
			}
			got = append(got, line)
		}
		if string(want) != strings.Join(got, "") {
			t.Errorf("charts/kvpilot/templates/crds/%[1]s is not config/crd/bases/%[1]s wrapped: run hack/helm-chart.sh", filepath.Base(src))
		}
	}
}

// deployment returns the manager Deployment of a render.
func deployment(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			return u
		}
	}
	t.Fatal("the chart renders no Deployment")
	return nil
}

// TestValues checks that the values a user sets reach the objects.
func TestValues(t *testing.T) {
	objs := render(t,
		"--set", "image.repository=registry.example/kvpilot,image.tag=v1.2.3,image.pullPolicy=Always,replicas=3",
		"--set", "resources.limits.memory=1Gi,watchNamespaces={team-a,team-b},extraArgs={--zap-log-level=debug}",
		"--set", "leaderElection.enabled=false,runtimeImage=registry.example/kvpilot:cuda")
	d := deployment(t, objs)
	c, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(c) != 1 {
		t.Fatalf("containers: %v", c)
	}
	got := c[0].(map[string]any)
	want := map[string]any{
		"image":           "registry.example/kvpilot:v1.2.3",
		"imagePullPolicy": "Always",
		"args": []any{"--health-probe-bind-address=:8081", "--metrics-bind-address=:8443",
			"--watch-namespaces=team-a,team-b", "--zap-log-level=debug"},
		"env":       []any{map[string]any{"name": "KVPILOT_RUNTIME_IMAGE", "value": "registry.example/kvpilot:cuda"}},
		"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "64Mi"}, "limits": map[string]any{"memory": "1Gi"}},
	}
	for k, w := range want {
		if d := cmp.Diff(w, got[k]); d != "" {
			t.Errorf("container %s (-want +got):\n%s", k, d)
		}
	}
	if r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); r != 3 {
		t.Errorf("replicas = %d, want 3", r)
	}

	// Every toggle off: no CRDs, no metrics Service or roles, no user roles,
	// and the metrics endpoint turned off.
	kinds := map[string]int{}
	objs = render(t, "--set", "crds.install=false,metrics.enabled=false,rbac.userRoles=false")
	for _, u := range objs {
		kinds[u.GetKind()]++
	}
	if kinds["CustomResourceDefinition"] != 0 || kinds["Service"] != 0 || kinds["ClusterRole"] != 1 || kinds["ClusterRoleBinding"] != 1 {
		t.Errorf("with crds, metrics and user roles off the chart renders %v; want no CRDs or Service, only the manager's ClusterRole and binding", kinds)
	}
	c, _, _ = unstructured.NestedSlice(deployment(t, objs).Object, "spec", "template", "spec", "containers")
	if d := cmp.Diff([]any{"--leader-elect", "--health-probe-bind-address=:8081", "--metrics-bind-address=0"}, c[0].(map[string]any)["args"]); d != "" {
		t.Errorf("args with metrics off (-want +got):\n%s", d)
	}
}

// TestOnAPIServer installs, upgrades and uninstalls the chart with helm on
// an envtest kube-apiserver (which runs no pods: it checks the objects and
// Helm's handling of them, not the manager), then applies the rendered
// chart with the CRDs first, for real, and every object with a
// server-side dry run, with defaults and with the toggles flipped.
func TestOnAPIServer(t *testing.T) {
	helm := helmBin(t)
	objs := render(t)
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		skipOrFail(t, "KVPILOT_REQUIRE_ENVTEST", "KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Run("helm install, upgrade, uninstall", func(t *testing.T) {
		helmLifecycle(ctx, t, helm, env, c)
	})
	apply := func(u *unstructured.Unstructured, opts ...client.ApplyOption) error {
		opts = append(opts, client.FieldOwner("helm"), client.ForceOwnership)
		return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), opts...)
	}

	// The CRDs first, for real, as helm install orders them.
	var crds []string
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			if err := apply(u); err != nil {
				t.Fatalf("applying %s: %v", key(u), err)
			}
			crds = append(crds, u.GetName())
		}
	}
	if len(crds) != 2 {
		t.Errorf("the chart renders %d CRDs, want 2 (InferencePool, SchedulerPolicy)", len(crds))
	}
	for _, name := range crds {
		if err := waitEstablished(ctx, c, name); err != nil {
			t.Fatal(err)
		}
	}
	// The release namespace, as helm install --create-namespace makes it.
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace},
	}}
	if err := apply(ns); err != nil {
		t.Fatalf("creating namespace %s: %v", namespace, err)
	}
	// Then everything, dry run, with defaults and with every toggle that
	// needs no other CRDs flipped.
	renders := map[string][]*unstructured.Unstructured{
		"defaults": objs,
		"toggles":  render(t, "--set", "namespace.create=true,crds.keep=false,leaderElection.enabled=false,replicas=1,metrics.enabled=false,rbac.userRoles=false,watchNamespaces={a,b},grafana.dashboard.enabled=true"),
	}
	for name, objs := range renders {
		for _, u := range objs {
			if err := apply(u, client.DryRunAll); err != nil {
				t.Errorf("%s: server-side dry run of %s: %v", name, key(u), err)
			}
		}
	}
}

// waitEstablished waits until the CRD name is Established.
func waitEstablished(ctx context.Context, c client.Client, name string) error {
	for {
		var crd apiextensionsv1.CustomResourceDefinition
		err := c.Get(ctx, client.ObjectKey{Name: name}, &crd)
		if err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %v (last error %v)", name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// helmLifecycle runs helm install, upgrade and uninstall against env's API
// server and checks what each leaves there.
func helmLifecycle(ctx context.Context, t *testing.T, helm string, env *envtest.Environment, c client.Client) {
	user, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	helmEnv := []string{"KUBECONFIG=" + kcPath, "HELM_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(dir, "config"), "HELM_DATA_HOME=" + filepath.Join(dir, "data")}
	helmRun := func(args ...string) {
		t.Helper()
		runEnv(t, helmEnv, helm, append(args, "--namespace", namespace)...)
	}
	manager := client.ObjectKey{Namespace: namespace, Name: "kvpilot-controller-manager"}
	container := func() (replicas int32, image string) {
		t.Helper()
		var d appsv1.Deployment
		if err := c.Get(ctx, manager, &d); err != nil {
			t.Fatalf("getting the manager Deployment: %v", err)
		}
		return *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image
	}

	helmRun("install", release, chartDir, "--create-namespace")
	for _, name := range []string{"inferencepools.serving.kvpilot.dev", "schedulerpolicies.serving.kvpilot.dev"} {
		if err := waitEstablished(ctx, c, name); err != nil {
			t.Fatal(err)
		}
	}
	if r, img := container(); r != 2 || img != "kvpilot:latest" {
		t.Errorf("after helm install: replicas %d, image %s; want 2, kvpilot:latest", r, img)
	}

	helmRun("upgrade", release, chartDir, "--set", "replicas=1,image.tag=v2")
	if r, img := container(); r != 1 || img != "kvpilot:v2" {
		t.Errorf("after helm upgrade: replicas %d, image %s; want 1, kvpilot:v2", r, img)
	}

	// Uninstall removes the manager and keeps the CRDs (crds.keep), and so
	// every pool.
	helmRun("uninstall", release, "--wait")
	var d appsv1.Deployment
	if err := c.Get(ctx, manager, &d); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, getting the manager Deployment: %v; want NotFound", err)
	}
	for _, name := range []string{"inferencepools.serving.kvpilot.dev", "schedulerpolicies.serving.kvpilot.dev"} {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			t.Errorf("after helm uninstall, CRD %s: %v; want it kept", name, err)
		}
	}
}

// TestOtherReleaseName checks that under another release name and
// namespace every reference between the chart's objects still holds: the
// bindings' roles and subjects, the Deployment's ServiceAccount, and the
// Service's and monitor's selectors of the manager's pods.
func TestOtherReleaseName(t *testing.T) {
	out := run(t, helmBin(t), "template", "prod", chartDir, "--namespace", "ops",
		"--set", "metrics.serviceMonitor.enabled=true")
	objs := decode(t, "helm template prod", out)
	have := map[string]bool{}
	for _, u := range objs {
		have[u.GetKind()+"/"+u.GetName()] = true
		if !strings.HasPrefix(u.GetName(), "prod-kvpilot-") && u.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s: want the name prefix prod-kvpilot-", key(u))
		}
		if ns := u.GetNamespace(); ns != "" && ns != "ops" {
			t.Errorf("%s: namespace %s, want ops", key(u), ns)
		}
	}
	var podLabels map[string]string
	for _, u := range objs {
		switch u.GetKind() {
		case "RoleBinding", "ClusterRoleBinding":
			kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind")
			name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
			if !have[kind+"/"+name] {
				t.Errorf("%s binds %s %s, which the chart does not render", key(u), kind, name)
			}
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, s := range subjects {
				s := s.(map[string]any)
				if !have[fmt.Sprint(s["kind"], "/", s["name"])] || s["namespace"] != "ops" {
					t.Errorf("%s binds %v, not the chart's ServiceAccount in ops", key(u), s)
				}
			}
		case "Deployment":
			sa, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
			if !have["ServiceAccount/"+sa] {
				t.Errorf("%s runs as ServiceAccount %s, which the chart does not render", key(u), sa)
			}
			podLabels, _, _ = unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
		}
	}
	for _, u := range objs {
		var sel map[string]string
		switch u.GetKind() {
		case "Service":
			sel, _, _ = unstructured.NestedStringMap(u.Object, "spec", "selector")
		case "ServiceMonitor":
			sel, _, _ = unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
			svcLabels := map[string]string{}
			for _, s := range objs {
				if s.GetKind() == "Service" {
					svcLabels = s.GetLabels()
				}
			}
			for k, v := range sel {
				if svcLabels[k] != v {
					t.Errorf("%s selects %s=%s; the metrics Service has %q", key(u), k, v, svcLabels[k])
				}
			}
			continue
		default:
			continue
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("%s selects %s=%s; the manager's pods have %q", key(u), k, v, podLabels[k])
			}
		}
	}
}
