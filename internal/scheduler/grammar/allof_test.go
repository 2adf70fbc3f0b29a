package grammar

import (
	"context"
	"testing"
)

// TestAllOfMergesWhatEqualityCannotCompare: required and enum entries
// are compared as JSON when merged, so lists among them (which Go's ==
// panics on) merge like any other value.
func TestAllOfMergesWhatEqualityCannotCompare(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"allOf":[{"enum":[[1],{"a":[2]},3]},{"enum":[{"a":[2]},[1]]}]}`, []string{`[1]`, `{"a":[2]}`}, []string{`3`, `[2]`}},
		{`{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a",["x"]]},{"required":[["x"],"a"]}]}`, nil, nil},
	} {
		g, _, err := CompileJSONSchema(context.Background(), []byte(tc.schema), SchemaOptions{})
		if tc.yes == nil {
			// The list among required names is refused, not a panic.
			if err == nil {
				t.Errorf("%s: compiled, want a refusal of the required list", tc.schema)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		for _, doc := range tc.yes {
			if !g.Accepts([]byte(doc)) {
				t.Errorf("%s: refuses %s", tc.schema, doc)
			}
		}
		for _, doc := range tc.no {
			if g.Accepts([]byte(doc)) {
				t.Errorf("%s: accepts %s", tc.schema, doc)
			}
		}
	}
}
