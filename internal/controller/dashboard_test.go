package controller

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/fleet"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/util/testing/grafana"
	"github.com/kvpilot/kvpilot/internal/util/testing/runtimeproc"
)

var dashboardPath = filepath.Join("..", "..", "config", "grafana", "kvpilot-dashboard.json")

// TestDashboardMetricsExist checks every query of the Grafana dashboard
// against the series kvpilot really exports: a runtime process (the sim
// executor) that has served a request, scraped on /metrics, and the
// manager's registry after a fleet round. A metric renamed or misspelt in
// the dashboard, one the dashboard expects that nothing exports, or a label
// a query matches or groups by that the series lack, fails here rather
// than showing as an empty or wrongly summed panel.
func TestDashboardMetricsExist(t *testing.T) {
	queries, err := grafana.Load(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) == 0 {
		t.Fatalf("%s: no queries", dashboardPath)
	}
	// The runtime's series get namespace, pool and pod from the
	// PodMonitor's relabeling (TestRuntimeMonitorPoolLabel); the manager's
	// carry theirs, and keep them (honorLabels). Both export the Go
	// runtime's go_* and process_*.
	names := managerSeries(t)
	for n, labels := range runtimeSeries(t) {
		if names[n] == nil {
			names[n] = map[string]bool{}
		}
		for l := range labels {
			names[n][l] = true
		}
		for _, l := range []string{"namespace", "pool", "pod"} {
			names[n][l] = true
		}
	}

	if problems := checkDashboardQueries(queries, names); len(problems) > 0 {
		t.Errorf("%s:\n%s", dashboardPath, strings.Join(problems, "\n"))
	}

	// The check must catch a misspelt name: one letter off in one query.
	t.Run("misspelt", func(t *testing.T) {
		bad := slices.Clone(queries)
		i := slices.IndexFunc(bad, func(q grafana.Query) bool {
			return strings.Contains(q.Expr, "vllm:time_to_first_token_seconds_bucket")
		})
		if i < 0 {
			t.Fatal("the dashboard has no TTFT query to misspell")
		}
		bad[i].Expr = strings.Replace(bad[i].Expr, "vllm:time_to_first_token_seconds_bucket", "vllm:time_to_first_token_second_bucket", 1)
		problems := checkDashboardQueries(bad, names)
		if len(problems) != 1 || !strings.Contains(problems[0], "vllm:time_to_first_token_second_bucket") {
			t.Errorf("a misspelt metric gave %q, want one problem naming it", problems)
		}
	})

	// And a label the series lack: finish_reason for finished_reason, and
	// the runtime pods' pod label on a per-pool manager series.
	t.Run("wrong labels", func(t *testing.T) {
		bad := slices.Clone(queries)
		i := slices.IndexFunc(bad, func(q grafana.Query) bool { return strings.Contains(q.Expr, "by (pool, finished_reason)") })
		j := slices.IndexFunc(bad, func(q grafana.Query) bool { return strings.Contains(q.Expr, "kvpilot_programs{") })
		if i < 0 || j < 0 {
			t.Fatal("the dashboard has no finish-reason or programs query to break")
		}
		bad[i].Expr = strings.Replace(bad[i].Expr, "finished_reason", "finish_reason", 1)
		bad[j].Expr = strings.Replace(bad[j].Expr, "kvpilot_programs{", `kvpilot_programs{pod=~"$pod", `, 1)
		problems := checkDashboardQueries(bad, names)
		if len(problems) != 2 || !strings.Contains(problems[0]+problems[1], "vllm:request_success_total has no label finish_reason") ||
			!strings.Contains(problems[0]+problems[1], "kvpilot_programs has no label pod") {
			t.Errorf("wrong labels gave %q, want two problems naming them", problems)
		}
	})
}

// checkDashboardQueries returns a line for each query that selects no
// metric or cannot be parsed, and for each metric a query selects that
// has no series in names (series name: its label names), or whose series
// lack a label the query matches, groups or joins on.
func checkDashboardQueries(queries []grafana.Query, names map[string]map[string]bool) []string {
	var problems []string
	for _, q := range queries {
		sels, err := grafana.Selectors(q.Expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", q.Where, err))
			continue
		}
		if len(sels) == 0 {
			problems = append(problems, fmt.Sprintf("%s: %q selects no metric", q.Where, q.Expr))
		}
		for _, sel := range sels {
			labels, ok := names[sel.Metric]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: no series named %s (in %q)", q.Where, sel.Metric, q.Expr))
				continue
			}
			for _, l := range sel.Labels {
				if !labels[l] {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %s (in %q)", q.Where, sel.Metric, l, q.Expr))
				}
			}
		}
	}
	return problems
}

// managerSeries records the status of a pool fetching its model and one
// fleet round with a pod and an error (so every vector has a child), and
// returns the series the manager's registry then serves, with their labels.
func managerSeries(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := newPoolMetrics("dashboard-test", "pool")
	t.Cleanup(m.forget)
	pool := &servingv1alpha1.InferencePool{}
	pool.Status.Conditions = []metav1.Condition{{Type: servingv1alpha1.PoolModelReady, Status: metav1.ConditionFalse}}
	pool.Status.Model = modelStatus([]corev1.Pod{fetchPod("pool-0", &corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})},
		map[string]wire.FetchProgress{"pool-0": {Phase: wire.FetchDownloading, File: 1, Files: 1, DoneBytes: 1, TotalBytes: 2}})
	m.status(pool)
	m.round(&fleet.Summary{
		Pods:           []fleet.PodSummary{{Name: "pool-0", Reachable: true, CapacityTokens: 4096, PlacedTokens: 1024}},
		ProgramsActive: 1, ProgramsPaused: 1, Pauses: 1, Resumes: 1, FairnessPauses: 1,
		OldestWait: time.Second, RecommendedReplicas: 2, Duration: time.Millisecond,
	}, errors.New("a pod could not be read"))

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("manager /metrics: %d %s", rec.Code, rec.Body)
	}
	names, err := seriesNames(rec.Body)
	if err != nil {
		t.Fatalf("manager /metrics: %v", err)
	}
	return names
}

// runtimeSeries starts a runtime pod, has it serve one completion and
// returns the series its /metrics then serves, with their labels.
func runtimeSeries(t *testing.T) map[string]map[string]bool {
	t.Helper()
	p := runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options:      runtimeproc.Options{Name: "dashboard", Env: runtimeEnv()},
		ControlToken: "dashboard-test",
	})
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Post("http://"+p.API+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"dashboards read metrics","max_tokens":8,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %d %v %s", resp.StatusCode, err, body)
	}
	resp, err = c.Get("http://" + p.API + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("runtime /metrics: %d", resp.StatusCode)
	}
	names, err := seriesNames(resp.Body)
	if err != nil {
		t.Fatalf("runtime /metrics: %v", err)
	}
	return names
}

// runtimeEnv is this process's environment without the runtime's own
// KVPILOT_ settings, which would change the pod under test.
func runtimeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KVPILOT_") {
			env = append(env, kv)
		}
	}
	return env
}

// sampleName is the series name at the start of a text-format sample
// line: what Prometheus stores, histogram suffixes (_bucket, _sum,
// _count) included. sampleLabel is one label pair of its {...}.
var (
	sampleName  = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{|\s)`)
	sampleLabel = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"\s*(,|\})`)
)

// seriesNames reads a /metrics response in the text format and returns
// each series name with the label names its samples carry.
func seriesNames(r io.Reader) (map[string]map[string]bool, error) {
	names := map[string]map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleName.FindStringSubmatchIndex(line)
		if m == nil {
			return nil, fmt.Errorf("unreadable sample line %q", line)
		}
		name := line[m[2]:m[3]]
		if names[name] == nil {
			names[name] = map[string]bool{}
		}
		if line[m[4]:m[5]] != "{" {
			continue
		}
		for rest := line[m[5]:]; !strings.HasPrefix(strings.TrimSpace(rest), "}"); {
			l := sampleLabel.FindStringSubmatchIndex(rest)
			if l == nil {
				return nil, fmt.Errorf("unreadable labels in sample line %q", line)
			}
			names[name][rest[l[2]:l[3]]] = true
			if rest[l[4]:l[5]] == "}" {
				break
			}
			rest = rest[l[1]:]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no samples")
	}
	return names, nil
}

// TestRuntimeMonitorPoolLabel checks that the PodMonitor's relabeling
// reads the label the controller really puts on a pool's pods: Prometheus
// spells a pod label's meta label with every character that is not a
// letter or digit as '_'.
func TestRuntimeMonitorPoolLabel(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "prometheus", "runtime_monitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pm struct {
		Spec struct {
			PodMetricsEndpoints []struct {
				Relabelings []struct {
					SourceLabels []string `json:"sourceLabels"`
					TargetLabel  string   `json:"targetLabel"`
				} `json:"relabelings"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pm); err != nil {
		t.Fatal(err)
	}
	want := "__meta_kubernetes_pod_label_" + regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(LabelPool, "_")
	if len(pm.Spec.PodMetricsEndpoints) == 0 {
		t.Fatal("runtime_monitor.yaml: no podMetricsEndpoints")
	}
	for i, ep := range pm.Spec.PodMetricsEndpoints {
		found := false
		for _, r := range ep.Relabelings {
			if r.TargetLabel == "pool" && slices.Equal(r.SourceLabels, []string{want}) {
				found = true
			}
		}
		if !found {
			t.Errorf("runtime_monitor.yaml: podMetricsEndpoints[%d] does not relabel %s into pool", i, want)
		}
	}
}
