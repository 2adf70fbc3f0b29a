package jinja

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// The snippets of testdata/snippets.json exercise one Jinja behaviour
// each (whitespace control, scoping, Python printing, filters, the
// sandbox's refusals, syntax errors); those named llamacpp/… are the
// inputs of llama.cpp's own engine tests (hack/jinja-llamacpp-cases.py
// imports them). snippets.expected.json is what Python's Jinja2 renders
// with transformers' settings, written by hack/jinja-fixtures.py.
type snippet struct {
	Name     string                     `json:"name"`
	Template string                     `json:"template"`
	Vars     map[string]json.RawMessage `json:"vars"`
}

type snippetExpected struct {
	Output     *string `json:"output"`
	Error      *string `json:"error"`
	ParseError *string `json:"parse_error"`
}

func loadSnippets(t testing.TB) ([]snippet, map[string]snippetExpected) {
	b, err := os.ReadFile("testdata/snippets.json")
	if err != nil {
		t.Fatal(err)
	}
	var snippets []snippet
	if err := json.Unmarshal(b, &snippets); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile("testdata/snippets.expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]snippetExpected
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	return snippets, want
}

func TestSnippetsMatchPythonJinja2(t *testing.T) {
	snippets, want := loadSnippets(t)
	for _, s := range snippets {
		t.Run(s.Name, func(t *testing.T) {
			w, ok := want[s.Name]
			if !ok {
				t.Fatalf("no expected render (run hack/jinja-fixtures.py)")
			}
			vars := map[string]any{}
			for k, raw := range s.Vars {
				v, err := FromJSON(raw)
				if err != nil {
					t.Fatal(err)
				}
				vars[k] = v
			}
			tmpl, err := Parse(s.Template)
			if w.ParseError != nil {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("parsed (err %v); Python refuses it: %s", err, *w.ParseError)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got, err := tmpl.Render(vars)
			switch {
			case w.Output != nil:
				if err != nil {
					t.Fatalf("render: %v; Python renders %q", err, *w.Output)
				}
				if got != *w.Output {
					t.Errorf("got  %q\nwant %q", got, *w.Output)
				}
			case w.Error != nil:
				// The error names Python's exception class.
				class, _, _ := strings.Cut(*w.Error, ":")
				if err == nil || !strings.Contains(err.Error(), class) {
					t.Errorf("got %q, %v; Python raises %s", got, err, *w.Error)
				}
			}
		})
	}
}

// FuzzRender: any template either fails to parse or renders (or fails)
// without panicking, within the engine's bounds.
func FuzzRender(f *testing.F) {
	snippets, _ := loadSnippets(f)
	for _, s := range snippets {
		f.Add(s.Template)
	}
	vars := map[string]any{}
	for k, v := range map[string]string{
		"l": `[1, "a", {"k": [null, true]}]`, "d": `{"a": 1, "b": "x"}`, "s": `"héllo"`, "n": `null`, "x": `3`,
	} {
		vars[k], _ = FromJSON([]byte(v))
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("parse error %v is not a *SyntaxError", err)
			}
			return
		}
		_, _ = tmpl.Render(vars)
	})
}

// TestUnsupportedFilter: a filter Python's Jinja2 has and this engine
// does not is refused by name, when parsed where it would always run.
func TestUnsupportedFilter(t *testing.T) {
	_, err := Parse("a\n{{ messages|groupby('role') }}")
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 2 || !strings.Contains(err.Error(), "filter 'groupby' is not supported") {
		t.Errorf("got %v", err)
	}
	tmpl, err := Parse("{% if x %}{{ 'abc'|wordwrap(5) }}{% endif %}ok")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tmpl.Render(nil); err != nil || got != "ok" {
		t.Errorf("unused guarded filter: %q, %v", got, err)
	}
	if _, err := tmpl.Render(map[string]any{"x": true}); err == nil || !strings.Contains(err.Error(), "filter 'wordwrap' is not supported") {
		t.Errorf("used guarded filter: %v", err)
	}
}

// TestBounds: a template's work is bounded: nesting when parsed, output,
// steps and repetition when rendered.
func TestBounds(t *testing.T) {
	lowerSteps(t, 1_000_000)
	deep := strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000)
	for _, src := range []string{
		"{{ " + deep + " }}",
		"{{ " + strings.Repeat("not ", 10000) + "1 }}",
		"{{ " + strings.Repeat("-", 10000) + "1 }}",
		strings.Repeat("{% if true %}", 10000),
	} {
		if _, err := Parse(src); err == nil || !strings.Contains(err.Error(), "nest deeper") {
			t.Errorf("%.20q…: %v", src, err)
		}
	}
	for src, want := range map[string]string{
		"{{ 'ab' * 1000000000 }}": "exceeds",
		"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}": "steps",
		"{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}":                         "exceeds",
		"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}":                                  "nest deeper",
	} {
		tmpl, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tmpl.Render(nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", src, err, want)
		}
	}
}

// TestConcurrentRender: a Template is shared by all requests; renders at
// once give what one alone gives.
func TestConcurrentRender(t *testing.T) {
	tmpl, err := Parse(`{% macro m(x) %}<{{ x }}>{% endmacro %}{% set ns = namespace(n=0) %}{% for i in l %}{% set ns.n = ns.n + i %}{{ m(i) }}{% endfor %}{{ ns.n }}{{ d|tojson }}`)
	if err != nil {
		t.Fatal(err)
	}
	render := func(n int) (string, error) {
		l := List{}
		for i := range n {
			l = append(l, i)
		}
		d := NewDict()
		d.Set("n", n)
		return tmpl.Render(map[string]any{"l": l, "d": d})
	}
	want := make([]string, 8)
	for i := range want {
		want[i], _ = render(i * 10)
	}
	errs := make(chan error, 8*20)
	for g := range 8 {
		go func() {
			for range 20 {
				got, err := render(g * 10)
				if err == nil && got != want[g] {
					err = errors.New("got " + got + ", want " + want[g])
				}
				errs <- err
			}
		}()
	}
	for range 8 * 20 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWorkCharged: operations over collections count their items as
// steps, so quadratic templates stop at the bound.
func TestWorkCharged(t *testing.T) {
	lowerSteps(t, 1_000_000)
	for _, src := range []string{
		"{% set big = range(100000)|list %}{% for i in range(100000) %}{% if i in big %}{% endif %}{% endfor %}",
		"{% set big = range(100000)|list %}{% for i in range(100000) %}{{ big|join }}{% endfor %}",
		"{% set big = range(100000)|list %}{% for i in range(100000) %}{{ big == big }}{% endfor %}",
		"{% for i in range(100000) %}{{ range(100000)|unique|list|length }}{% endfor %}",
	} {
		tmpl, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tmpl.Render(nil); err == nil || !strings.Contains(err.Error(), "steps") {
			t.Errorf("%q: %v", src, err)
		}
	}
}

// lowerSteps bounds renders to n steps for the test, so that hitting the
// bound is quick.
func lowerSteps(t *testing.T, n int) {
	old := maxSteps
	maxSteps = n
	t.Cleanup(func() { maxSteps = old })
}
