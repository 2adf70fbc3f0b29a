package grammar

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSchemaAcceptingNothingNamesItsKeyword: a schema that accepts no
// document is refused naming the keyword that leaves a subschema no
// value, and where it is, not a reference the schema does not have.
func TestSchemaAcceptingNothingNamesItsKeyword(t *testing.T) {
	for _, tc := range []struct {
		schema, want string
	}{
		{`{"type":"string","format":"email","minLength":900,"maxLength":1000,"pattern":"(a|b|c)*x(a|b|c){12}"}`,
			`JSON schema at #: "format" "email" accepts no string the pattern accepts`},
		{`{"type":"object","properties":{"day":{"type":"string","format":"date","minLength":11}},"required":["day"]}`,
			`JSON schema at #/properties/day: "minLength" leaves no string of at least 11 characters that format "date" accepts`},
		{`{"type":"array","prefixItems":[{"type":"string","pattern":"^a{3}$","maxLength":2}],"minItems":1}`,
			`JSON schema at #/prefixItems/0: "maxLength" leaves no string of at most 2 characters that the pattern accepts`},
		{`{"type":"string","pattern":"^[a-z]+$","format":"uuid","minLength":1,"maxLength":40}`,
			`JSON schema at #: "format" "uuid" accepts no string the pattern accepts`},
		{`{"type":"string","pattern":"^[0-9a-f-]+$","format":"uuid","minLength":40,"maxLength":50}`,
			`JSON schema at #: "minLength" leaves no string of 40 to 50 characters that the pattern and format "uuid" accept`},
		{`{"type":"string","pattern":"(?=a)b"}`, `JSON schema at #: "pattern" accepts no string`},
		{`{"anyOf":[{"type":"integer","minimum":1,"maximum":4,"multipleOf":5}]}`,
			`JSON schema at #/anyOf/0: "multipleOf" leaves no multiple of 5 within the bounds`},
		{`{"$defs":{"list":{"type":"array","items":{"$ref":"#/$defs/list"},"minItems":1}},"$ref":"#/$defs/list"}`,
			`JSON schema at #: "$ref" accepts no finite document (a required reference never ends)`},
		// Accepts documents: the property that can have no value is left out.
		{`{"type":"object","properties":{"day":{"type":"string","format":"date","minLength":11}}}`, ``},
	} {
		_, _, err := CompileJSONSchema(context.Background(), []byte(tc.schema), SchemaOptions{})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.schema, diff)
		}
	}
}
