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

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kvpilot/kvpilot/internal/util/testing/grafana"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// scalePool is a program-aware pool of one simulated pod with room for
// 1,024 KV tokens: the agent workload's programs overflow it, so the fleet
// loop pauses some and recommends a second pod.
var scalePool = simPool{
	name: "scale-sim", kvBlocks: 64, hostBlocks: 128, replicas: 1,
	policy: "scale-fast", policySpec: programsPool.policySpec,
}

// TestPrometheusSeesThePool runs Prometheus (Debian's package) scraping
// the manager, as config/prometheus/monitor.yaml does, and a pool's pods,
// labelled as config/prometheus/runtime_monitor.yaml labels them. While
// the pool's one pod pauses programs for room, prometheus-adapter's rule
// for the pool's HPA (config/samples/prometheus_adapter_config.yaml, its
// query rendered as the adapter renders it) must read at least two
// replicas, and one once the programs are done; every held request is
// answered; and every query of the Grafana dashboard returns series.
func TestPrometheusSeesThePool(t *testing.T) {
	prom := startPrometheus(t)
	ns := newNamespace(t, "e2e-prometheus")
	applyYAML(t, ns, scalePool.manifest())
	pod := readyPods(t, ns, scalePool.name, 1)[0]
	prom.scrape(t, currentManager().MetricsURL, []corev1.Pod{pod}, ns, scalePool.name)

	rule := adapterQuery(t, ns, scalePool.name)
	t.Logf("the adapter's query: %s", rule)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := &agentWorkload{
		programs: 6, steps: 4,
		firstContext: 200, outTokens: outTokens, toolTokens: 24, toolTime: 400 * time.Millisecond,
		addr: func(int) string { return pod.Status.PodIP + ":8000" },
	}
	wait := w.start(ctx)
	poll.UntilOK(t, 90*time.Second, func() string {
		if v, err := prom.value(rule); err != nil || v < 2 {
			return fmt.Sprintf("the adapter's query %s: %v (%v), want >= 2 while programs wait for room", rule, v, err)
		}
		return ""
	})
	if c := getPool(t, ns, scalePool.name).Status.Capacity; c != nil && c.RecommendedReplicas != nil {
		t.Logf("while programs wait: %d active, %d paused, status.capacity.recommendedReplicas %d",
			c.ProgramsActive, c.ProgramsPaused, *c.RecommendedReplicas)
	}

	w.check(t, wait())
	poll.UntilOK(t, 60*time.Second, func() string {
		if v, err := prom.value(rule); err != nil || v != 1 {
			return fmt.Sprintf("the adapter's query %s: %v (%v), want 1 once every program is done", rule, v, err)
		}
		return ""
	})

	queries, err := grafana.Load(filepath.Join(env.repo, "config", "grafana", "kvpilot-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$namespace", ns, "$pool", scalePool.name, "$pod", ".*", "$__rate_interval", "1m")
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

// adapterQuery is the metricsQuery of the external rule in
// config/samples/prometheus_adapter_config.yaml, rendered as
// prometheus-adapter renders it for the HPA's External metric of
// autoscaling_v2_hpa_kv_pressure.yaml (selector pool=POOL, in namespace
// NS): the series of seriesQuery, the namespace and the selector as label
// matchers, grouped by the namespace resource's label.
func adapterQuery(t *testing.T, ns, pool string) string {
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
		ExternalRules []struct {
			SeriesQuery string `json:"seriesQuery"`
			Resources   struct {
				Overrides map[string]struct {
					Resource string `json:"resource"`
				} `json:"overrides"`
			} `json:"resources"`
			MetricsQuery string `json:"metricsQuery"`
		} `json:"externalRules"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.ExternalRules) != 1 {
		t.Fatalf("prometheus_adapter_config.yaml: %d external rules, want 1", len(cfg.ExternalRules))
	}
	r := cfg.ExternalRules[0]
	series := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`).FindString(r.SeriesQuery)
	nsLabel := ""
	for label, o := range r.Resources.Overrides {
		if o.Resource == "namespace" {
			nsLabel = label
		}
	}
	if series == "" || nsLabel == "" {
		t.Fatalf("prometheus_adapter_config.yaml: rule %+v: want a series name and a namespace override", r)
	}
	return strings.NewReplacer(
		"<<.Series>>", series,
		"<<.LabelMatchers>>", fmt.Sprintf(`%s="%s",pool="%s"`, nsLabel, ns, pool),
		"<<.GroupBy>>", nsLabel,
	).Replace(r.MetricsQuery)
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
