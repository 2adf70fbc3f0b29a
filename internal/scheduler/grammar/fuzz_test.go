package grammar

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/jsonschema"
)

// FuzzJSONSchema: any schema text either is refused with an error or
// compiles to a grammar whose random outputs it accepts and that are JSON.
func FuzzJSONSchema(f *testing.F) {
	f.Add(personSchema)
	f.Add(`{"anyOf":[{"type":"string","minLength":2,"maxLength":4},{"type":"integer"},{"const":{"k":[1,2]}}]}`)
	f.Add(`{"$defs":{"p":{"type":"object","properties":{"x":{"type":"integer"}}}},"$ref":"#/$defs/p"}`)
	f.Add(`{"type":"string","pattern":"^[a-z]+\\d?$"}`)
	f.Add(`{"type":"array","items":{"type":"boolean"},"maxItems":2}`)
	f.Add(treeSchema)
	f.Add(chainSchema(4))
	f.Add(`{"type":"integer","minimum":-5,"exclusiveMaximum":17,"multipleOf":3}`)
	f.Add(`{"type":"number","minimum":0.5,"maximum":2}`)
	f.Add(`{"type":"number","exclusiveMinimum":-2.125,"exclusiveMaximum":-2.12}`)
	f.Add(`{"type":"array","prefixItems":[{"type":"null"},{"format":"ipv4"}],"items":false}`)
	f.Add(`{"type":"object","additionalProperties":{"type":"integer"},"minProperties":1,"maxProperties":2}`)
	f.Add(`{"allOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"minimum":2}},"required":["a"]}]}`)
	f.Add(`{"type":"string","format":"email","pattern":"^[a-z]+@x\.io$","maxLength":20}`)
	f.Add(`{"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#"}}]}`)
	v, eos := testVocab()
	f.Fuzz(func(t *testing.T, schema string) {
		g, err := JSONSchema([]byte(schema))
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(uint64(len(schema)), 1))
		out, complete := decode(t, g, v, eos, rng, 200)
		if complete && (!g.Accepts([]byte(out)) || !json.Valid([]byte(out))) {
			t.Fatalf("schema %s: output %q accepted %v, valid JSON %v", schema, out, g.Accepts([]byte(out)), json.Valid([]byte(out)))
		}
		// The validator knows oneOf's exclusivity, which the compiler
		// does not enforce.
		if complete && !strings.Contains(schema, "oneOf") {
			if err := jsonschema.Validate([]byte(schema), []byte(out)); err != nil {
				t.Fatalf("schema %s: output %q: %v", schema, out, err)
			}
		}
	})
}

// FuzzGBNF: any grammar text either is refused with an error or
// compiles to a grammar that accepts its random outputs.
func FuzzGBNF(f *testing.F) {
	for _, src := range []string{arithmeticGBNF, jsonGBNF, "root ::= \"a\" | \"b\"+",
		"root ::= list\nlist ::= [a-z] (\",\" list)?", "root ::= [^x]{2,3} (\"(\" root \")\")?", "?start: x"} {
		f.Add(src)
	}
	v, eos := testVocab()
	f.Fuzz(func(t *testing.T, src string) {
		g, err := CompileGBNF(context.Background(), src)
		if err != nil {
			return
		}
		if g.MinLength() > 1<<20 {
			return // matches nothing
		}
		rng := rand.New(rand.NewPCG(uint64(len(src)), 3))
		out, complete := decode(t, g, v, eos, rng, 100)
		if complete && !g.Accepts([]byte(out)) {
			t.Fatalf("grammar %q: output %q not accepted", src, out)
		}
	})
}

// FuzzRegex: patterns compile or are refused; outputs match.
func FuzzRegex(f *testing.F) {
	for _, p := range []string{`[a-c]+x`, `(cat|dog)s?`, `(?i)é{1,3}`, `[^a]`, `\d{3}-\d{2}`, `^(?!\.)[a-z.]+$`, `(?=.*[0-9])\w{3}`} {
		f.Add(p)
	}
	v, eos := testVocab()
	f.Fuzz(func(t *testing.T, pattern string) {
		g, err := Regex(pattern)
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(uint64(len(pattern)), 2))
		if g.MinLength() > 1<<20 {
			return // matches nothing
		}
		out, complete := decode(t, g, v, eos, rng, 100)
		if complete && !g.Accepts([]byte(out)) {
			t.Fatalf("pattern %q: output %q not accepted", pattern, out)
		}
		// Go's own regexp agrees (anchors and lookaheads aside, which it
		// reads differently or not at all).
		if complete && !strings.ContainsAny(pattern, "^$") && !strings.Contains(pattern, `\A`) && !strings.Contains(pattern, `\z`) && !strings.Contains(pattern, "(?") {
			if re, err := regexp.Compile(`^(?:` + pattern + `)$`); err == nil && !re.MatchString(out) {
				t.Fatalf("pattern %q: output %q does not match with regexp", pattern, out)
			}
		}
	})
}
