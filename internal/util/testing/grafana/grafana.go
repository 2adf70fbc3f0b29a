// Package grafana reads the PromQL queries out of a Grafana dashboard's
// JSON model and names the metrics each one selects, so a test can check
// a dashboard against the metrics kvpilot really exports (a misspelt or
// renamed metric otherwise shows as an empty panel nobody notices), and an
// end-to-end test can run every query against a Prometheus. Queries are
// parsed with Prometheus' own PromQL parser, so one Prometheus would
// refuse fails here too.
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// Query is one PromQL expression of a dashboard.
type Query struct {
	// Where names it for failure messages: the panel's title and the
	// target's refId, or the template variable.
	Where string
	// Expr is the PromQL expression, with Grafana's variables ($pool,
	// $__rate_interval) unexpanded.
	Expr string
	// Variable is true for a template variable's query, whose expression
	// is label_values' first argument.
	Variable bool
}

// dashboard is the part of Grafana's JSON model the queries live in.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int      `json:"id"`
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	Targets []target `json:"targets"`
	// Panels are a collapsed row's panels.
	Panels []panel `json:"panels"`
}

type target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

type variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Query is a string in old dashboards and {"query": ...} in Grafana
	// 10's Prometheus variables.
	Query json.RawMessage `json:"query"`
}

// labelValues is Grafana's label_values(expr, label) variable query.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// Load reads a dashboard and returns its queries: every panel target's
// expression (rows' panels included) and every query variable's
// label_values expression. A panel that plots data but has no expression,
// a query variable that is not label_values(...), or a query that uses a
// variable the dashboard does not define, is an error.
func Load(path string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var qs []Query
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if err := walk(p.Panels); err != nil {
				return err
			}
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if len(p.Targets) == 0 {
				return fmt.Errorf("%s: panel %d %q has no targets", path, p.ID, p.Title)
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("%s: panel %d %q target %q has no expr", path, p.ID, p.Title, t.RefID)
				}
				qs = append(qs, Query{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: t.Expr})
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				return nil, fmt.Errorf("%s: variable %q: query is neither a string nor {\"query\": ...}", path, v.Name)
			}
			q = obj.Query
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("%s: variable %q: query %q is not label_values(<expr>, <label>)", path, v.Name, q)
		}
		qs = append(qs, Query{Where: fmt.Sprintf("variable %q", v.Name), Expr: m[1], Variable: true})
	}
	for _, q := range qs {
		for _, m := range variableRef.FindAllStringSubmatch(q.Expr, -1) {
			name := m[1] + m[2]
			if !strings.HasPrefix(name, "__") && !defined[name] {
				return nil, fmt.Errorf("%s: %s: undefined variable $%s in %q", path, q.Where, name, q.Expr)
			}
		}
	}
	return qs, nil
}

// variableRef is a Grafana variable in a query: $name or ${name} (or
// ${name:format}). Names starting with __ are Grafana's own
// ($__rate_interval, $__interval, $__range).
var variableRef = regexp.MustCompile(`\$(?:([a-zA-Z_][a-zA-Z0-9_]*)|\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[^}]*)?\})`)

// grafanaIntervals are the interval variables Grafana expands to a
// duration; Selectors puts one in their place so the expression parses.
var grafanaIntervals = regexp.MustCompile(`\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}`)

// Selector is one metric a query reads and the labels it relies on that
// metric having: its label matchers' and those it is grouped by (the
// nearest enclosing aggregation's by(...)) or matched on (on(...) of a
// binary operation below that aggregation). A label the series lack makes
// the panel empty, or lumps every series into one, without an error.
type Selector struct {
	Metric string
	Labels []string
}

// Selectors parses expr with the Prometheus PromQL parser and returns the
// metrics it selects with the labels each must carry, in the order they
// appear. Grafana's interval variables ($__rate_interval, $__interval,
// $__range) become 5m; other variables may appear only inside label
// matchers' strings. A selector without a metric name
// ({__name__=~"..."}) is an error: this check could not tell what it
// reads.
func Selectors(expr string) ([]Selector, error) {
	e, err := parser.ParseExpr(grafanaIntervals.ReplaceAllString(expr, "5m"))
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	var out []Selector
	var unnamed error
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name == "" {
			unnamed = fmt.Errorf("%q: selector %s has no metric name", expr, vs)
			return unnamed
		}
		labels := map[string]bool{}
		for _, m := range vs.LabelMatchers {
			if m.Name != "__name__" {
				labels[m.Name] = true
			}
		}
	ancestors:
		for i := len(path) - 1; i >= 0; i-- {
			switch a := path[i].(type) {
			case *parser.AggregateExpr:
				if !a.Without {
					for _, l := range a.Grouping {
						labels[l] = true
					}
				}
				break ancestors
			case *parser.BinaryExpr:
				if a.VectorMatching != nil && a.VectorMatching.On {
					for _, l := range a.VectorMatching.MatchingLabels {
						labels[l] = true
					}
				}
			}
		}
		sel := Selector{Metric: vs.Name}
		for l := range labels {
			sel.Labels = append(sel.Labels, l)
		}
		sort.Strings(sel.Labels)
		out = append(out, sel)
		return nil
	})
	if unnamed != nil {
		return nil, unnamed
	}
	return out, nil
}

// MetricNames returns the metric names expr selects (see Selectors),
// sorted and without duplicates.
func MetricNames(expr string) ([]string, error) {
	sels, err := Selectors(expr)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, s := range sels {
		names[s.Metric] = true
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
