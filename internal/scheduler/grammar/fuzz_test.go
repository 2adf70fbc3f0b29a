package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// FuzzJSONSchema: any schema text either is refused with an error or
// compiles to a grammar whose random outputs it accepts and that are JSON.
func FuzzJSONSchema(f *testing.F) {
	f.Add(personSchema)
	f.Add(`{"anyOf":[{"type":"string","minLength":2,"maxLength":4},{"type":"integer"},{"const":{"k":[1,2]}}]}`)
	f.Add(`{"$defs":{"p":{"type":"object","properties":{"x":{"type":"integer"}}}},"$ref":"#/$defs/p"}`)
	f.Add(`{"type":"string","pattern":"^[a-z]+\\d?$"}`)
	f.Add(`{"type":"array","items":{"type":"boolean"},"maxItems":2}`)
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
	})
}

// FuzzRegex: patterns compile or are refused; outputs match.
func FuzzRegex(f *testing.F) {
	for _, p := range []string{`[a-c]+x`, `(cat|dog)s?`, `(?i)é{1,3}`, `[^a]`, `\d{3}-\d{2}`} {
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
	})
}
