package grammar

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
	"github.com/kvpilot/kvpilot/internal/util/testing/jsonschema"
)

func TestRegexAccepts(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{`[a-c]+x`, []string{"ax", "abcx"}, []string{"x", "adx", "ax "}},
		{`^\d{3}-\d{2}$`, []string{"123-45"}, []string{"12-345", "123-4"}},
		{`(cat|dog)s?`, []string{"cat", "dogs"}, []string{"cow", "cats!"}},
		{`é+ü`, []string{"éü", "ééü"}, []string{"ü", "eü"}},
		{`[^a]`, []string{"b", "日"}, []string{"a", ""}},
		{`(?i)ok`, []string{"OK", "oK"}, []string{"no"}},
		{`a{2,3}`, []string{"aa", "aaa"}, []string{"a", "aaaa"}},
	} {
		g, err := Regex(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		for _, s := range tc.yes {
			if !g.Accepts([]byte(s)) {
				t.Errorf("%s: rejects %q", tc.pattern, s)
			}
		}
		for _, s := range tc.no {
			if g.Accepts([]byte(s)) {
				t.Errorf("%s: accepts %q", tc.pattern, s)
			}
		}
	}
	if _, err := Regex(`\bword`); err == nil {
		t.Error(`\b accepted`)
	}
	if _, err := Regex(`(`); err == nil {
		t.Error("invalid pattern accepted")
	}
}

// TestRegexAnchorsOnlyAtTheEnds: anchors where a match starts or ends
// assert nothing (the whole output matches) and are accepted, in
// alternatives and groups too; one with text before or after it matches
// nothing in the pattern's own engines and is refused, where it used to be
// dropped (the fuzzer's "^$00000\0*0" produced "000000").
func TestRegexAnchorsOnlyAtTheEnds(t *testing.T) {
	for _, tc := range []struct {
		pattern, yes string
	}{
		{`^a$`, "a"},
		{`\Aab\z`, "ab"},
		{`^a$|^b$`, "b"},
		{`^(a|^b)(c$|d)$`, "bd"},
		{`(^)a`, "a"},
		{`^$`, ""},
	} {
		g, err := Regex(tc.pattern)
		if err != nil {
			t.Errorf("%s: %v", tc.pattern, err)
			continue
		}
		if !g.Accepts([]byte(tc.yes)) {
			t.Errorf("%s: rejects %q", tc.pattern, tc.yes)
		}
	}
	for _, pattern := range []string{`^$00000\0*0`, `a^b`, `a$b`, `x*^b`, `(^a)+`, `(?m)a
^b`} {
		if _, err := Regex(pattern); err == nil || !strings.Contains(err.Error(), "unsupported") {
			t.Errorf("%s: %v, want an anchor inside the pattern refused", pattern, err)
		}
	}
}

func TestChoice(t *testing.T) {
	g, err := Choice([]string{"yes", "no", "maybe so"})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{"yes": true, "no": true, "maybe so": true, "maybe": false, "yesno": false} {
		if g.Accepts([]byte(s)) != want {
			t.Errorf("%q: got %v", s, !want)
		}
	}
}

const personSchema = `{"type":"object","properties":{
  "name":{"type":"string","maxLength":12},
  "age":{"type":"integer"},
  "email":{"type":"string","format":"email"},
  "tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"minItems":1,"maxItems":3},
  "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":["string","null"]}},"required":["city"]},
  "active":{"type":"boolean"}
},"required":["name","age","tags"]}`

func TestSchemaAccepts(t *testing.T) {
	g, err := JSONSchema([]byte(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`{"name":"Ann","age":3,"tags":["a"]}`,
		`{ "name": "Ann", "age": -30, "tags": ["a", "c"], "address": {"city": "Paris", "zip": null}, "active": true }`,
		`{"name":"A\"n\u00e9","age":0,"email":"a@b.co","tags":["b","b","b"]}`,
	} {
		if !g.Accepts([]byte(s)) {
			t.Errorf("rejects %s", s)
		}
	}
	for _, s := range []string{
		`{"age":3,"name":"Ann","tags":["a"]}`,            // out of order
		`{"name":"Ann","age":3}`,                         // missing required
		`{"name":"Ann","age":3,"tags":[]}`,               // minItems
		`{"name":"Ann","age":3,"tags":["d"]}`,            // enum
		`{"name":"Ann","age":3.5,"tags":["a"]}`,          // integer
		`{"name":"Ann","age":3,"tags":["a"],"x":1}`,      // additional
		`{"name":"Ann","age":03,"tags":["a"]}`,           // leading zero
		`{"name":"Annnnnnnnnnnnn","age":3,"tags":["a"]}`, // maxLength
	} {
		if g.Accepts([]byte(s)) {
			t.Errorf("accepts %s", s)
		}
	}
}

func TestSchemaRefusesUnsupportedKeywords(t *testing.T) {
	for _, tc := range []struct{ schema, keyword string }{
		{`{"type":"integer","minimum":5,"maximum":4}`, "minimum"},
		{`{"type":"integer","exclusiveMaximum":-99999999999999999}`, "maximum"},
		{`{"type":"object","properties":{"a":{"type":"string","contentEncoding":"base64"}}}`, "contentEncoding"},
		{`{"allOf":[{"type":"string"},{"type":"integer"}]}`, "allOf"},
		{`{"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]}`, "allOf"},
		{`{"type":"string","format":"color"}`, "format"},
		{`{"type":"array","uniqueItems":true}`, "uniqueItems"},
		{`{"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false}`, "required"},
		{`{"type":"number","multipleOf":0.5}`, "multipleOf"},
		{`{"type":"integer","multipleOf":1000000}`, "multipleOf"},
		// Left recursion, and a recursion that never ends.
		{`{"$defs":{"n":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"$ref":"#/$defs/n"}`, "$ref"},
		{`{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`, "$ref"},
		{`{"$ref":"#/$defs/missing"}`, "$ref"},
		{`{"$ref":"http://example.com/s.json"}`, "$ref"},
		{`{"type":"array","prefixItems":[{"type":"string"}],"items":false,"minItems":2}`, "minItems"},
		{`{"type":"object","properties":{"a":{},"b":{}},"required":["a","b"],"maxProperties":1}`, "minProperties"},
		{`{"type":"object","maxProperties":100000}`, "maxProperties"},
		// Count bounds and string patterns.
		{`{"type":"string","minLength":5,"maxLength":4}`, "minLength"},
		{`{"type":"string","maxLength":100000000}`, "maxLength"},
		{`{"type":"array","minItems":3,"maxItems":2}`, "minItems"},
		{`{"type":"array","minItems":100000000}`, "minItems"},
		{`{"type":"array","maxItems":-1}`, "maxItems"},
		{`{"type":"string","pattern":"(a"}`, "pattern"},
		{`{"type":"string","pattern":"a(?=a)b"}`, "pattern"},
		{`{"type":"string","pattern":"(a)\\1"}`, "pattern"},
	} {
		_, err := JSONSchema([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) || se.Keyword != tc.keyword {
			t.Errorf("%s: got %v, want a SchemaError naming %q", tc.schema, err, tc.keyword)
		}
	}
	for _, bad := range []string{`{"type":`, `{}A`, `{} {}`, `{"type":"string"}]`} {
		if _, err := JSONSchema([]byte(bad)); err == nil {
			t.Errorf("malformed schema %s accepted", bad)
		}
	}
}

// testVocab has every byte as a token plus multi-byte pieces, as BPE
// vocabularies do, and an empty-bytes end-of-sequence token.
func testVocab() (*Vocab, int32) {
	pieces := []string{}
	for b := range 256 {
		pieces = append(pieces, string([]byte{byte(b)}))
	}
	pieces = append(pieces, `{"`, `":`, `",`, `"}`, `true`, `false`, `null`, `name`, `age`, ` "`, `12`, `00`, `é`, `\n`, `, `, `]}`, `["`, `"]`, `<tool_call>`, "\n</tool_call>")
	eos := int32(len(pieces))
	pieces = append(pieces, "")
	return NewVocab(len(pieces), func(id int32) []byte { return []byte(pieces[id]) }), eos
}

// decode samples uniformly among the allowed tokens until the constraint
// is done, EOS is drawn or maxTokens pass.
func decode(t *testing.T, g *Grammar, v *Vocab, eos int32, rng *rand.Rand, maxTokens int) (string, bool) {
	t.Helper()
	m := g.NewMatcher(v, []int32{eos})
	var out strings.Builder
	for i := range maxTokens {
		mask := m.Mask(maxTokens - i)
		var allowed []int32
		for id := range int32(v.Size()) {
			if sampling.Allowed(mask, id) {
				allowed = append(allowed, id)
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("no token allowed after %q", out.String())
		}
		tok := allowed[rng.IntN(len(allowed))]
		if !m.Advance(tok) {
			t.Fatalf("allowed token %d refused after %q", tok, out.String())
		}
		if tok == eos {
			return out.String(), true
		}
		out.Write(v.TokenBytes(tok))
		if m.Done() {
			return out.String(), true
		}
	}
	return out.String(), m.Complete()
}

// TestRandomDecodingIsValid is the property constrained decoding promises:
// whatever the model prefers (here: uniform noise), the output validates,
// within the token budget.
func TestRandomDecodingIsValid(t *testing.T) {
	v, eos := testVocab()
	schemas := []string{
		personSchema,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"},"y":{"enum":["p","q",1,null]}},"required":["x","y"]}}},"required":["a"]}`,
		`{"anyOf":[{"type":"string","minLength":2,"maxLength":4},{"type":"integer"},{"const":{"k":[1,2]}}]}`,
		`{"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}},"type":"object","properties":{"from":{"$ref":"#/$defs/pt"},"to":{"$ref":"#/$defs/pt"}},"required":["from","to"]}`,
		`{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"day":{"type":"string","format":"date"},"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]+$"}},"required":["id","day","code"]}`,
		`{"type":"object"}`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range schemas {
		g, err := JSONSchema([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		for range 20 {
			out, complete := decode(t, g, v, eos, rng, 400)
			if !complete {
				t.Fatalf("%s: incomplete output %q", s, out)
			}
			if err := jsonschema.Validate([]byte(s), []byte(out)); err != nil {
				t.Fatalf("%s: output %q: %v", s, out, err)
			}
		}
	}
	g := AnyJSONObject()
	for range 20 {
		out, complete := decode(t, g, v, eos, rng, 300)
		if err := jsonschema.Validate([]byte(`{"type":"object"}`), []byte(out)); !complete || err != nil {
			t.Fatalf("json_object: %q (complete %v): %v", out, complete, err)
		}
	}
}

// TestBudgetCompletes: a budget just above the shortest valid output still
// yields a complete output, because the mask steers towards the end.
func TestBudgetCompletes(t *testing.T) {
	v, eos := testVocab()
	g, err := JSONSchema([]byte(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"string"}},"n":{"type":"integer"}},"required":["items","n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	budget := g.MinLength() + 3
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		out, complete := decode(t, g, v, eos, rng, budget)
		if !complete {
			t.Fatalf("budget %d: incomplete %q", budget, out)
		}
	}
}

func TestEndOnlyWhenComplete(t *testing.T) {
	v, eos := testVocab()
	g, _ := Regex(`[0-9]+`)
	m := g.NewMatcher(v, []int32{eos})
	if sampling.Allowed(m.Mask(10), eos) {
		t.Error("EOS allowed before any digit")
	}
	if sampling.Allowed(m.Mask(10), 'a') || !sampling.Allowed(m.Mask(10), '7') {
		t.Error("wrong mask for digits")
	}
	if m.Advance('a') {
		t.Error("a disallowed token advanced")
	}
	m.Advance('7')
	if !sampling.Allowed(m.Mask(10), eos) || m.Done() {
		t.Error("EOS not allowed after a digit")
	}
	m.Advance(eos)
	if !m.Done() {
		t.Error("not done after EOS")
	}
	c, _ := Choice([]string{"ab"})
	m = c.NewMatcher(v, []int32{eos})
	m.Advance('a')
	m.Advance('b')
	if !m.Done() {
		t.Error("a choice with nothing left to add is not done")
	}
}
