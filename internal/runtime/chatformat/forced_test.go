package chatformat

import (
	"encoding/json"
	"strings"
	"testing"
)

// forcedText is the output the constrained decoder writes for one call in
// f's forced shape (string values raw in XML, as its grammar writes them).
func forcedText(f *Forced, name string, args [][2]string, jsonArgs string) string {
	switch {
	case f.JSON != nil:
		j := f.JSON
		return j.Open + j.Prefix + `{"name": "` + name + `", "` + j.ArgsKey + `": ` + jsonArgs + `}` + j.Suffix + j.Close
	case f.XML != nil:
		x := f.XML
		var b strings.Builder
		b.WriteString(x.Open + name + x.NameEnd)
		for _, a := range args {
			b.WriteString(x.ArgOpen + a[0] + x.ArgKeyEnd + a[1] + x.ArgClose)
		}
		b.WriteString(x.Close)
		return b.String()
	case f.Pythonic != nil:
		var b strings.Builder
		b.WriteString(f.Pythonic.Begin + "[" + name + "(")
		for i, a := range args {
			if i > 0 {
				b.WriteString(", ")
			}
			v := a[1]
			if !json.Valid([]byte(v)) {
				v = string(jsonString(v))
			}
			b.WriteString(a[0] + "=" + v)
		}
		b.WriteString(")]" + f.Pythonic.End)
		return b.String()
	case f.Header != nil:
		h := f.Header
		return h.Begin + h.Open + name + h.NameEnd + jsonArgs + h.Close + h.End
	}
	return ""
}

// TestForcedShapesParse: what each format's forced shape writes is read
// back by that format's parser as the same call, so an enforced call
// always comes back structured. Every format has one.
func TestForcedShapesParse(t *testing.T) {
	n := 0
	for _, f := range formats {
		if f.Forced == nil {
			continue
		}
		n++
		out := forcedText(f.Forced, "edit", [][2]string{{"filename", "a <b> c"}, {"replaceAll", "true"}}, `{"filename": "a <b> c", "replaceAll": true}`)
		reasoning := ReasoningNone
		if f.ownsReasoning {
			reasoning = ReasoningHarmony
		}
		got := Parse(Spec{Tools: f, Reasoning: reasoning}.NewParser(Options{Calls: true, Reasoning: true, Tools: allTools}), out)
		want := Result{Calls: calls("edit", `{"filename": "a <b> c", "replaceAll": true}`)}
		if !sameResult(got, want) {
			t.Errorf("%s: %q read as %+v", f.Name, out, got)
		}
	}
	if n != len(formats) {
		t.Errorf("%d of %d formats have a forced shape; every one has today", n, len(formats))
	}
}
