package grafana

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`vllm:num_requests_running`, []string{"vllm:num_requests_running"}},
		{`sum by (pool, code) (rate(kvpilot_http_requests_total{namespace=~"$namespace", path=~"/v1/.+"}[$__rate_interval]))`,
			[]string{"kvpilot_http_requests_total"}},
		{`histogram_quantile(0.99, sum by (le, pool) (rate(vllm:time_to_first_token_seconds_bucket{pool=~"${pool}"}[5m])))`,
			[]string{"vllm:time_to_first_token_seconds_bucket"}},
		// Both sides of a binary operator, label lists of on/group_left,
		// a label matcher whose value looks like a metric.
		{`sum(a_total{x="b_total"}) / on (pool) group_left (pod) sum without (le) (c_total offset 5m) > bool 0.5e3`,
			[]string{"a_total", "c_total"}},
		// A subquery, a string with an escaped quote, the @ modifier.
		{`max_over_time(rate(x_total{a="q\"}"}[1m])[10m:1m] @ end()) and ignoring(pod) y unless z`,
			[]string{"x_total", "y", "z"}},
		{`count(up) or vector(0)`, []string{"up"}},
		{`1 + 2`, []string{}},
	} {
		got, err := MetricNames(tc.expr)
		if err != nil {
			t.Errorf("MetricNames(%q): %v", tc.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []Selector
	}{
		{`up`, []Selector{{Metric: "up"}}},
		{`histogram_quantile(0.99, sum by (pool, le) (rate(x_bucket{pod=~"$pod"}[5m])))`,
			[]Selector{{Metric: "x_bucket", Labels: []string{"le", "pod", "pool"}}}},
		// The nearest aggregation's grouping only (a is grouped by pod
		// before the division); on(...) below the aggregation; without(...)
		// asks for nothing.
		{`max by (pool) (sum by (pod) (a) / on (node) b) + sum without (le) (c) + count(d)`,
			[]Selector{{Metric: "a", Labels: []string{"pod"}}, {Metric: "b", Labels: []string{"node", "pool"}}, {Metric: "c"}, {Metric: "d"}}},
	} {
		got, err := Selectors(tc.expr)
		if err != nil {
			t.Errorf("Selectors(%q): %v", tc.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Selectors(%q) = %+v, want %+v", tc.expr, got, tc.want)
		}
	}
}

func TestMetricNamesErrors(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`rat(x_total[5m])`, `unknown function with name "rat"`},
		{`sum(rate(x_total[5m])`, `unclosed left parenthesis`},
		{`x_total{a="b}`, `unterminated quoted string`},
		{`{__name__="x_total"}`, `has no metric name`},
		{`rate(x_total[5m]))`, `unexpected right parenthesis`},
		{`topk($k, x_total)`, `unexpected character: '$'`},
	} {
		_, err := MetricNames(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MetricNames(%q) = %v, want an error with %q", tc.expr, err, tc.want)
		}
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.json")
	const d = `{
  "panels": [
    {"id": 1, "type": "row", "title": "r", "panels": [
      {"id": 2, "type": "timeseries", "title": "inner", "targets": [{"refId": "A", "expr": "a"}]}
    ]},
    {"id": 3, "type": "text", "title": "notes"},
    {"id": 4, "type": "stat", "title": "outer", "targets": [{"refId": "A", "expr": "b"}, {"refId": "B", "expr": "rate(c{namespace=~\"${ns:regex}\", pod=\"$old\"}[$__rate_interval])"}]}
  ],
  "templating": {"list": [
    {"name": "datasource", "type": "datasource", "query": "prometheus"},
    {"name": "ns", "type": "query", "query": {"query": "label_values(d{x=\"1\"}, namespace)", "refId": "v"}},
    {"name": "old", "type": "query", "query": "label_values(e, pod)"}
  ]}
}`
	if err := os.WriteFile(path, []byte(d), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{
		{Where: `panel "inner" target A`, Expr: "a"},
		{Where: `panel "outer" target A`, Expr: "b"},
		{Where: `panel "outer" target B`, Expr: `rate(c{namespace=~"${ns:regex}", pod="$old"}[$__rate_interval])`},
		{Where: `variable "ns"`, Expr: `d{x="1"}`, Variable: true},
		{Where: `variable "old"`, Expr: "e", Variable: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %+v\nwant %+v", got, want)
	}

	for _, bad := range []struct{ json, want string }{
		{`{"panels": [{"id": 1, "type": "timeseries", "title": "empty"}]}`, "has no targets"},
		{`{"panels": [{"id": 1, "type": "timeseries", "title": "blank", "targets": [{"refId": "A", "expr": " "}]}]}`, "has no expr"},
		{`{"templating": {"list": [{"name": "v", "type": "query", "query": "query_result(x)"}]}}`, "is not label_values"},
		{`{"panels": [{"id": 1, "type": "timeseries", "title": "typo", "targets": [{"refId": "A", "expr": "x{pool=~\"$pol\"}"}]}],
		  "templating": {"list": [{"name": "pool", "type": "query", "query": "label_values(x, pool)"}]}}`, "undefined variable $pol"},
		{`{"panels": [{"id": 1, "type": "timeseries", "title": "typo", "targets": [{"refId": "A", "expr": "rate(x{pool=~\"${pool:regex}\"}[$__rate_interval])"}]}],
		  "templating": {"list": [{"name": "pol", "type": "query", "query": "label_values(x, pool)"}]}}`, "undefined variable $pool"},
	} {
		if err := os.WriteFile(path, []byte(bad.json), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Load(%s) = %v, want an error with %q", bad.json, err, bad.want)
		}
	}
}
