// Package grafana reads the PromQL queries out of a Grafana dashboard's
// JSON model and names the metrics each one selects, so a test can check
// a dashboard against the metrics kvpilot really exports (a misspelt or
// renamed metric otherwise shows as an empty panel nobody notices), and an
// end-to-end test can run every query against a Prometheus.
//
// The metric names come from a small PromQL lexer rather than the
// Prometheus parser: github.com/prometheus/prometheus would pull its whole
// module graph (and newer Kubernetes libraries) into kvpilot's go.mod for
// one test. The lexer knows PromQL's structure well enough for that job:
// strings, label matchers ({...}), ranges and subqueries ([...]), the label
// lists of by/without/on/ignoring/group_left/group_right, functions,
// keywords and numbers. An identifier left over is a metric name; an
// identifier called like a function that PromQL does not define is an
// error, so a misspelt function fails as loudly as a misspelt metric.
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
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

// functions are PromQL's functions and aggregation operators.
var functions = setOf(
	// Aggregations.
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
	// Functions.
	"abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
	"day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor",
	"histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev",
	"histogram_stdvar", "histogram_sum", "holt_winters", "double_exponential_smoothing", "hour", "idelta",
	"increase", "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month",
	"predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sort_by_label",
	"sort_by_label_desc", "sqrt", "time", "timestamp", "vector", "year",
	"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
	"quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time",
	"mad_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh",
	"tan", "tanh", "deg", "rad", "pi",
	// The @ modifier's start() and end().
	"start", "end",
)

// keywords are PromQL's binary operators and modifiers spelt as words.
var keywords = setOf("and", "or", "unless", "atan2", "bool", "offset", "inf", "nan")

// labelListKeywords are followed by a parenthesised list of label names.
var labelListKeywords = setOf("by", "without", "on", "ignoring", "group_left", "group_right")

func setOf(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return m
}

// MetricNames returns the metric names expr selects, sorted and without
// duplicates. It fails on what it cannot read: an unterminated string,
// unbalanced brackets, an unknown function, a {...} selector with no
// metric name (which this check could not verify).
func MetricNames(expr string) ([]string, error) {
	names := map[string]bool{}
	var parens []byte // open brackets: ( [ {
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			// A selector with no name before it: {__name__=...} or a
			// bare matcher set.
			if !precededByName(expr, i) {
				return nil, fmt.Errorf("%q: label matchers at offset %d without a metric name before them", expr, i)
			}
			end, err := skipBracket(expr, i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end, err := skipBracket(expr, i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '(':
			parens = append(parens, c)
			i++
		case c == ')':
			if len(parens) == 0 {
				return nil, fmt.Errorf("%q: unbalanced ')' at offset %d", expr, i)
			}
			parens = parens[:len(parens)-1]
			i++
		case c == '}' || c == ']':
			return nil, fmt.Errorf("%q: unbalanced %q at offset %d", expr, c, i)
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			// A number or a duration (5m, 1e3, 0x1f, 1.5).
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case c == '$':
			// A Grafana variable ($__rate_interval, ${pool}).
			i++
			if i < len(expr) && expr[i] == '{' {
				end, err := skipBracket(expr, i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = end
				continue
			}
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == ':') {
				i++
			}
			word := expr[start:i]
			next := skipSpace(expr, i)
			called := next < len(expr) && expr[next] == '('
			switch {
			case labelListKeywords[word]:
				if called {
					end, err := skipBracket(expr, next, '(', ')')
					if err != nil {
						return nil, err
					}
					i = end
				}
			case keywords[word]:
			case functions[word] && modifierFollows(expr, next):
				// An aggregation with its clause first: sum by (pool) (...).
			case called:
				if !functions[word] {
					return nil, fmt.Errorf("%q: unknown function %q", expr, word)
				}
			default:
				names[word] = true
			}
		default:
			// Operators: + - * / % ^ == != < > <= >= , @
			i++
		}
	}
	if len(parens) != 0 {
		return nil, fmt.Errorf("%q: unbalanced '('", expr)
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// modifierFollows says whether the word at i is by or without.
func modifierFollows(s string, i int) bool {
	for _, w := range []string{"by", "without"} {
		if strings.HasPrefix(s[i:], w) && (len(s) == i+len(w) || !isIdent(s[i+len(w)])) {
			return true
		}
	}
	return false
}

// precededByName says whether the '{' at i follows a metric name (spaces
// between are allowed by PromQL).
func precededByName(s string, i int) bool {
	j := i - 1
	for j >= 0 && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
		j--
	}
	return j >= 0 && (isIdent(s[j]) || s[j] == ':')
}

// skipString returns the offset after the string literal starting at i.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%q: unterminated string at offset %d", s, i)
}

// skipBracket returns the offset after the bracket opened at i, skipping
// strings and nested brackets of the same kind inside.
func skipBracket(s string, i int, open, close byte) (int, error) {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			end, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("%q: unbalanced %q at offset %d", s, open, i)
}
