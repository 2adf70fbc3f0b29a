//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kvpilot/kvpilot/internal/util/testing/grafana"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	"github.com/kvpilot/kvpilot/test/localcluster"
)

// scalePool is a program-aware pool of one simulated pod with room for
// 1,024 KV tokens: the agent workload's programs overflow it, so the fleet
// loop pauses some and recommends a second pod.
var scalePool = simPool{
	name: "scale-sim", kvBlocks: 64, hostBlocks: 128, replicas: 1,
	policy: "scale-fast", policySpec: programsPool.policySpec,
}

// TestAutoscalingThroughPrometheus runs Prometheus (Debian's package)
// scraping the manager, as config/prometheus/monitor.yaml does, and a
// pool's pod, labelled as config/prometheus/runtime_monitor.yaml labels
// it; prometheus-adapter (built from the Go module proxy) with the rule of
// config/samples/prometheus_adapter_config.yaml; and the HPA of
// config/samples/autoscaling_v2_hpa_kv_pressure.yaml, acted on by
// kube-controller-manager. While the pool's one pod pauses programs for
// room the HPA scales it to two pods; every held request is answered;
// every query of the Grafana dashboard returns series; and once the
// programs are done the HPA scales the pool back to one.
//
// Without the adapter, or on the process node (an aggregated API server
// needs an address the API server reaches that is not loopback), the
// adapter's query, rendered as the adapter renders it, is run against
// Prometheus instead, and the HPA's part is skipped, saying why.
func TestAutoscalingThroughPrometheus(t *testing.T) {
	prom := startPrometheus(t)
	ns := newNamespace(t, "e2e-autoscale")
	applyYAML(t, ns, scalePool.manifest())
	pod := readyPods(t, ns, scalePool.name, 1)[0]
	prom.scrape(t, currentManager().MetricsURL, []corev1.Pod{pod}, ns, scalePool.name)

	rule := readAdapterRule(t)
	query := rule.render(ns, scalePool.name)
	t.Logf("the adapter's query: %s", query)
	hpa := ""
	if why := startAdapter(t, prom, rule); why != "" {
		t.Logf("no HPA: %s; checking the adapter's query against Prometheus only", why)
	} else {
		hpa = createHPA(t, ns, scalePool.name)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Programs that are done stay until the pool has scaled up: done
	// before the second pod is ready, they would leave the pool idle, and
	// the HPA would scale it back down at once.
	scaled := make(chan struct{})
	w := &agentWorkload{
		programs: 6, steps: 4,
		firstContext: 200, outTokens: outTokens, toolTokens: 24, toolTime: 400 * time.Millisecond,
		addr: func(int) string { return pod.Status.PodIP + ":8000" },
		beforeRelease: func(string) {
			select {
			case <-scaled:
			case <-ctx.Done():
			}
		},
	}
	wait := w.start(ctx)
	poll.UntilOK(t, 90*time.Second, func() string {
		if v, err := prom.value(query); err != nil || v < 2 {
			return fmt.Sprintf("the adapter's query %s: %v (%v), want >= 2 while programs wait for room", query, v, err)
		}
		return ""
	})
	if c := getPool(t, ns, scalePool.name).Status.Capacity; c != nil && c.RecommendedReplicas != nil {
		t.Logf("while programs wait: %d active, %d paused, status.capacity.recommendedReplicas %d",
			c.ProgramsActive, c.ProgramsPaused, *c.RecommendedReplicas)
	}
	if hpa != "" {
		waitReplicas(t, ns, scalePool.name, hpa, 2)
	}
	close(scaled)
	w.check(t, wait())

	// The dashboard, while the pod that served the workload is scraped.
	checkDashboard(t, prom, ns, scalePool.name)

	poll.UntilOK(t, 60*time.Second, func() string {
		if v, err := prom.value(query); err != nil || v != 0 {
			return fmt.Sprintf("the adapter's query %s: %v (%v), want 0 once every program is done", query, v, err)
		}
		return ""
	})
	if hpa != "" {
		waitReplicas(t, ns, scalePool.name, hpa, 1)
	}
}

// checkDashboard runs every query of the Grafana dashboard, its variables
// set to the pool, and fails for each that returns no series.
func checkDashboard(t *testing.T, prom *prometheus, ns, pool string) {
	t.Helper()
	queries, err := grafana.Load(filepath.Join(env.repo, "config", "grafana", "kvpilot-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$namespace", ns, "$pool", pool, "$pod", ".*", "$__rate_interval", "1m")
	for _, q := range queries {
		if reason := noSeriesExpected(q.Expr); reason != "" {
			t.Logf("%s: not checked: %s", q.Where, reason)
			continue
		}
		expr := vars.Replace(q.Expr)
		if q.Variable {
			expr = "count by (namespace, pool) (" + expr + ")"
		}
		n, err := prom.series(expr)
		if err != nil || n == 0 {
			t.Errorf("%s: %s returns %d series (%v)", q.Where, expr, n, err)
		}
	}
}

// noSeriesExpected says why a dashboard query has no series for a Sim pool
// with a builtin model, or "" when it must have some.
func noSeriesExpected(expr string) string {
	if strings.Contains(expr, "kvpilot_pool_model_") {
		return "the pool has no source.url to download"
	}
	return ""
}

// adapterRule is the external rule of
// config/samples/prometheus_adapter_config.yaml.
type adapterRule struct {
	// config is the adapter's whole config.yaml.
	config      string
	SeriesQuery string `json:"seriesQuery"`
	Resources   struct {
		Overrides map[string]struct {
			Resource string `json:"resource"`
		} `json:"overrides"`
	} `json:"resources"`
	MetricsQuery string `json:"metricsQuery"`
}

func readAdapterRule(t *testing.T) adapterRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.repo, "config", "samples", "prometheus_adapter_config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ExternalRules []adapterRule `json:"externalRules"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.ExternalRules) != 1 {
		t.Fatalf("prometheus_adapter_config.yaml: %d external rules, want 1", len(cfg.ExternalRules))
	}
	r := cfg.ExternalRules[0]
	r.config = cm.Data["config.yaml"]
	return r
}

// render is the rule's metricsQuery as prometheus-adapter renders it for
// the HPA's External metric of autoscaling_v2_hpa_kv_pressure.yaml
// (selector pool=POOL) in namespace NS: the series of seriesQuery, the
// selector's and the namespace's label matchers, and no group-by labels
// (an External metric's query has none).
func (r adapterRule) render(ns, pool string) string {
	series := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`).FindString(r.SeriesQuery)
	nsLabel := ""
	for label, o := range r.Resources.Overrides {
		if o.Resource == "namespace" {
			nsLabel = label
		}
	}
	return strings.NewReplacer(
		"<<.Series>>", series,
		"<<.LabelMatchers>>", fmt.Sprintf(`pool="%s",%s="%s"`, pool, nsLabel, ns),
		"<<.GroupBy>>", "",
	).Replace(r.MetricsQuery)
}

// externalMetricsAPI is the APIService prometheus-adapter serves External
// metrics as.
const externalMetricsAPI = "v1beta1.external.metrics.k8s.io"

// startAdapter runs prometheus-adapter (KVPILOT_PROMETHEUS_ADAPTER, built by
// hack/setup-prometheus-adapter.sh) with rule's config on the node's
// address, reading Prometheus, and registers it as the cluster's External
// metrics API, through a Service without selector whose endpoint is that
// address. It returns why not where it cannot.
func startAdapter(t *testing.T, prom *prometheus, rule adapterRule) string {
	t.Helper()
	bin := os.Getenv("KVPILOT_PROMETHEUS_ADAPTER")
	switch {
	case bin == "":
		return "KVPILOT_PROMETHEUS_ADAPTER is not set (make test-e2e builds prometheus-adapter with hack/setup-prometheus-adapter.sh)"
	case !env.cluster.RealNode:
		return "the process node: the API server cannot reach an aggregated API server on loopback"
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Sprintf("KVPILOT_PROMETHEUS_ADAPTER=%s: %v", bin, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(rule.config), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(localcluster.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	kc := env.cluster.Kubeconfig
	cmd := exec.Command(bin, "--prometheus-url=http://"+prom.addr, "--config="+filepath.Join(dir, "config.yaml"),
		"--lister-kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address="+localcluster.NodeIP, fmt.Sprintf("--secure-port=%d", port), "--cert-dir="+filepath.Join(dir, "certs"),
		"--metrics-relist-interval=1s", "--v=1")
	logf, err := os.Create(filepath.Join(env.cluster.LogDir, "prometheus-adapter.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})

	// The APIService goes before the adapter does: an unavailable one
	// breaks discovery for every later test.
	ns := newNamespace(t, "e2e-adapter")
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: prometheus-adapter
spec:
  ports: [{port: 443, targetPort: %[1]d}]
---
apiVersion: v1
kind: Endpoints
metadata:
  name: prometheus-adapter
subsets:
- addresses: [{ip: %[2]s}]
  ports: [{port: %[1]d}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: %[3]s
spec:
  group: external.metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {namespace: %[4]s, name: prometheus-adapter, port: 443}
`, port, localcluster.NodeIP, externalMetricsAPI, ns))
	t.Cleanup(func() { _, _ = kubectl("delete", "apiservice", externalMetricsAPI, "--wait=false") })
	if out, err := kubectl("wait", "--for=condition=Available", "apiservice/"+externalMetricsAPI, "--timeout=90s"); err != nil {
		t.Fatalf("the adapter's APIService is not available: %v\n%s\n%s", err, out, mustKubectl(t, "get", "apiservice", externalMetricsAPI, "-o", "yaml"))
	}
	return ""
}

// createHPA creates the HPA of config/samples/autoscaling_v2_hpa_kv_pressure.yaml
// for pool, between 1 and 2 replicas, acting at once both ways (the
// sample's scale-down waits minutes), and returns its name.
func createHPA(t *testing.T, ns, pool string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.repo, "config", "samples", "autoscaling_v2_hpa_kv_pressure.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := yaml.Unmarshal(b, hpa); err != nil {
		t.Fatal(err)
	}
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].External == nil || hpa.Spec.Metrics[0].External.Metric.Selector == nil {
		t.Fatalf("autoscaling_v2_hpa_kv_pressure.yaml: want one External metric with a selector: %+v", hpa.Spec.Metrics)
	}
	hpa.Name, hpa.Spec.ScaleTargetRef.Name = pool, pool
	hpa.Spec.Metrics[0].External.Metric.Selector.MatchLabels["pool"] = pool
	hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas = ptr.To[int32](1), 2
	hpa.Spec.Behavior.ScaleDown = &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}
	if _, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(context.Background(), hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return hpa.Name
}

// waitReplicas waits until the HPA has set the pool's replicas to n and n
// pods are ready.
func waitReplicas(t *testing.T, ns, pool, hpa string, n int32) {
	t.Helper()
	start := time.Now()
	poll.UntilOK(t, 2*time.Minute, func() string {
		p := getPool(t, ns, pool)
		if got := ptr.Deref(p.Spec.Replicas, 1); got != n || p.Status.ReadyReplicas != n {
			h, _ := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), hpa, metav1.GetOptions{})
			return fmt.Sprintf("pool %s: spec.replicas %d, %d ready, want %d; HPA status %+v", pool, got, p.Status.ReadyReplicas, n, h.Status)
		}
		return ""
	})
	t.Logf("the HPA scaled the pool to %d replicas in %v", n, time.Since(start).Round(100*time.Millisecond))
}

// prometheus is a Prometheus server this test started.
type prometheus struct {
	dir, addr string
	cmd       *exec.Cmd
}

// startPrometheus starts Prometheus on a free loopback port with no
// targets yet, or skips the test where no prometheus binary is installed
// (KVPILOT_PROMETHEUS, else prometheus on PATH; hack/install-node-packages.sh
// installs Debian's).
func startPrometheus(t *testing.T) *prometheus {
	t.Helper()
	bin := os.Getenv("KVPILOT_PROMETHEUS")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("prometheus"); err != nil {
			t.Skip("no prometheus binary (apt-get install prometheus, as hack/install-node-packages.sh does, or set KVPILOT_PROMETHEUS)")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &prometheus{dir: t.TempDir(), addr: addr}
	p.writeConfig(t, "")
	p.cmd = exec.Command(bin, "--config.file="+filepath.Join(p.dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(p.dir, "data"), "--web.listen-address="+addr,
		"--web.enable-lifecycle", "--log.level=warn")
	logf, err := os.Create(filepath.Join(env.cluster.LogDir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		logf.Close()
	})
	poll.UntilOK(t, 30*time.Second, func() string {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "prometheus not ready: " + resp.Status
		}
		return ""
	})
	return p
}

// scrape points Prometheus at the manager (its metrics URL, read with the
// metrics reader's token over HTTPS as monitor.yaml's ServiceMonitor does,
// keeping the manager's own labels) and at the pods' API port, labelled
// namespace, pool and pod as runtime_monitor.yaml's relabeling labels
// them, every second.
func (p *prometheus) scrape(t *testing.T, managerURL string, pods []corev1.Pod, ns, pool string) {
	t.Helper()
	u, err := url.Parse(managerURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "token"), []byte(env.metricsToken), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `- job_name: kvpilot-manager
  scheme: %s
  metrics_path: %s
  honor_labels: true
  tls_config: {insecure_skip_verify: true}
`, u.Scheme, u.Path)
	if u.Scheme == "https" {
		fmt.Fprintf(&b, "  authorization: {credentials_file: %s}\n", filepath.Join(p.dir, "token"))
	}
	fmt.Fprintf(&b, "  static_configs: [{targets: [%q]}]\n- job_name: kvpilot-runtime\n  static_configs:\n", u.Host)
	for _, pod := range pods {
		fmt.Fprintf(&b, "  - targets: [%q]\n    labels: {namespace: %q, pool: %q, pod: %q}\n",
			net.JoinHostPort(pod.Status.PodIP, "8000"), ns, pool, pod.Name)
	}
	p.writeConfig(t, b.String())
	resp, err := http.Post("http://"+p.addr+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("prometheus reload: %s", resp.Status)
	}
	poll.UntilOK(t, 30*time.Second, func() string {
		if n, err := p.series(`up == 1`); err != nil || n != 1+len(pods) {
			return fmt.Sprintf("prometheus: %d targets up (%v), want %d", n, err, 1+len(pods))
		}
		return ""
	})
}

func (p *prometheus) writeConfig(t *testing.T, scrapeConfigs string) {
	t.Helper()
	cfg := "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
	if scrapeConfigs != "" {
		cfg += "scrape_configs:\n" + scrapeConfigs
	}
	if err := os.WriteFile(filepath.Join(p.dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// query runs an instant query and returns its vector's values.
func (p *prometheus) query(expr string) ([]float64, error) {
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, want a vector", expr, r.Data.ResultType)
	}
	out := make([]float64, 0, len(r.Data.Result))
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v", expr, s.Value[1])
		}
		out = append(out, v)
	}
	return out, nil
}

// series is the number of series expr returns.
func (p *prometheus) series(expr string) (int, error) {
	v, err := p.query(expr)
	return len(v), err
}

// value is the value of expr, which must return one series.
func (p *prometheus) value(expr string) (float64, error) {
	v, err := p.query(expr)
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("%d series, want 1", len(v))
	}
	return v[0], nil
}
