package grammar

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvpilot/kvpilot/internal/util/testing/jsonschema"
)

// TestSchemaKeywords: each keyword accepts the documents it should and
// refuses the ones it should, exactly for integers and formats, soundly
// (never a document outside the range) for numbers.
func TestSchemaKeywords(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"type":"integer","minimum":-12,"maximum":130}`,
			[]string{"-12", "-9", "0", "7", "99", "100", "130"}, []string{"-13", "131", "1000", "-0012", "5.0"}},
		{`{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}`, []string{"1", "9"}, []string{"0", "10", "-1"}},
		{`{"type":"integer","minimum":3.5,"maximum":7.9}`, []string{"4", "7"}, []string{"3", "8"}},
		{`{"type":"integer","minimum":5,"exclusiveMinimum":true}`, []string{"6"}, []string{"5"}},
		{`{"type":"integer","minimum":1,"maximum":9007199254740991}`, []string{"1", "9007199254740991", "123456789"}, []string{"0", "-5", "9007199254740992"}},
		{`{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`, []string{"-9007199254740991", "0"}, []string{"-9007199254740992"}},
		{`{"type":"integer","multipleOf":7}`, []string{"0", "7", "-14", "700"}, []string{"1", "8", "-13"}},
		{`{"type":"integer","multipleOf":5,"minimum":10,"maximum":30}`, []string{"10", "25", "30"}, []string{"5", "35", "12"}},
		{`{"type":"number","multipleOf":3}`, []string{"3", "-9"}, []string{"4", "3.5"}},
		{`{"type":"number","minimum":0,"maximum":10}`, []string{"0", "10", "9.99", "0.5", "3"}, []string{"-0.5", "-1", "10.5", "11", "1e3"}},
		{`{"type":"number","exclusiveMinimum":-2.5,"maximum":-1}`, []string{"-2", "-1", "-1.5", "-2.4"}, []string{"-2.5", "-3", "0", "-0.5", "-2.50"}},
		{`{"type":"number","minimum":0.25}`, []string{"1", "1.5", "123", "0.25", "0.3"}, []string{"0", "0.1", "-1", "0.2499"}},
		{`{"type":"number","minimum":0,"maximum":0.5}`, []string{"0", "0.5", "0.50", "0.25", "0.4999"}, []string{"0.51", "0.5000001", "-0.1", "1"}},
		{`{"type":"number","exclusiveMinimum":2.5,"exclusiveMaximum":3}`, []string{"2.6", "2.500001", "2.99"}, []string{"2.5", "2.50", "3", "3.0", "2"}},
		{`{"type":"number","minimum":-2.5,"maximum":-1.25}`, []string{"-2.5", "-2", "-1.25", "-1.3", "-2.49"}, []string{"-2.51", "-1.2", "-1", "-3", "0"}},
		{`{"type":"number","exclusiveMaximum":0}`, []string{"-0.5", "-1", "-12.75"}, []string{"0", "-0", "-0.0", "0.5"}},
		// Exponents past ±40 are read as such, not computed exactly.
		{`{"type":"integer","minimum":1e-999999,"maximum":1e999999}`, []string{"1", "9999999999999999"}, []string{"0", "-1"}},
		{`{"type":"number","exclusiveMaximum":-5E-99999}`, []string{"-1", "-0.5"}, []string{"0", "1"}},
		{`{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false}`,
			[]string{`[]`, `[1]`, `[1,"a"]`}, []string{`[1,"a",2]`, `["a"]`}},
		{`{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"boolean"},"minItems":2,"maxItems":3}`,
			[]string{`[1,true]`, `[1,true,false]`}, []string{`[1]`, `[1,true,true,true]`, `[1,2]`}},
		{`{"type":"array","items":[{"const":"x"}],"additionalItems":false}`, []string{`["x"]`, `[]`}, []string{`["x","x"]`}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"minProperties":1,"maxProperties":2}`,
			[]string{`{"a":1}`, `{"b":1,"c":2}`, `{"a":1,"c":2}`}, []string{`{}`, `{"a":1,"b":2,"c":3}`}},
		{`{"type":"object","minProperties":2}`, []string{`{"x":1,"y":2}`, `{"x":1,"y":2,"z":3}`}, []string{`{}`, `{"x":1}`}},
		{`{"allOf":[{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"required":["a"]},{"properties":{"b":{"type":"string"}}},{"properties":{"a":{"maximum":5}}}]}`,
			[]string{`{"a":3}`, `{"a":0,"b":"x"}`}, []string{`{"a":6}`, `{"b":"x"}`, `{"a":-1}`}},
		{`{"$defs":{"base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},"allOf":[{"$ref":"#/$defs/base"},{"properties":{"tag":{"enum":["x","y"]}},"required":["tag"]}]}`,
			[]string{`{"id":1,"tag":"x"}`}, []string{`{"id":1}`, `{"tag":"x"}`}},
		{`{"$defs":{"pos":{"type":"integer","minimum":1}},"$ref":"#/$defs/pos","maximum":3}`, []string{"1", "3"}, []string{"0", "4"}},
		{`{"type":"string","format":"ipv4"}`, []string{`"192.168.0.1"`, `"0.0.0.0"`, `"255.255.255.255"`}, []string{`"256.1.1.1"`, `"1.2.3"`, `"01.2.3.4"`}},
		{`{"type":"string","format":"ipv6"}`, []string{`"::1"`, `"fe80::1"`, `"2001:db8:0:0:0:0:2:1"`, `"::"`}, []string{`"1::2::3"`, `"12345::"`, `"1.2.3.4"`}},
		{`{"type":"string","format":"hostname"}`, []string{`"example.com"`, `"a-b.c"`, `"localhost"`}, []string{`"-a.com"`, `"a..b"`, `"a_b.com"`}},
		{`{"type":"string","format":"uri"}`, []string{`"https://example.com/a/b?x=1#top"`, `"http://h:8080"`}, []string{`"example.com"`, `"http://"`, `"https://a b"`}},
		{`{"type":"string","format":"date"}`, []string{`"2024-02-28"`, `"1999-12-31"`}, []string{`"2024-02-30"`, `"2024-04-31"`, `"2024-13-01"`}},
		{`{"type":"string","format":"email","pattern":"^[a-z]+@example\\.com$"}`, []string{`"ann@example.com"`}, []string{`"ann@example.org"`, `"Ann@example.com"`}},
		{`{"type":"string","pattern":"^[a-z]+$","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`}, []string{`"a"`, `"abcd"`, `"AB"`}},
		{`{"anyOf":[{"type":"integer"},{"type":"string"}],"minimum":5}`, []string{"5", `"a"`}, []string{"4"}},
		// A required name properties does not list.
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a","b"]}`, []string{`{"a":1,"b":"x"}`}, []string{`{"a":1}`, `{"b":1}`}},
		// Bounded strings stay in the Basic Multilingual Plane, where code
		// points and UTF-16 units agree.
		{`{"type":"string","maxLength":2}`, []string{`"éa"`, `"\u00e9"`}, []string{`"😀"`, `"\ud83d\ude00"`, `"abc"`}},
		{`{"type":"string","pattern":"^.+$","maxLength":2}`, []string{`"é"`}, []string{`"😀"`}},
		// zod 3.25's email pattern, lookaheads and all.
		{`{"type":"string","pattern":"^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"}`,
			[]string{`"a.b@x.io"`, `"ann@mail.example.com"`}, []string{`".a@x.io"`, `"a..b@x.io"`, `"a.@x.io"`, `"a@x.i"`}},
		{`{"type":"string","pattern":"^(?=.*[0-9])[a-z0-9]{3}$"}`, []string{`"ab1"`, `"123"`}, []string{`"abc"`, `"ab12"`}},
	} {
		g, err := JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.schema, err)
			continue
		}
		for _, s := range tc.yes {
			if !g.Accepts([]byte(s)) {
				t.Errorf("%s: rejects %s", tc.schema, s)
			}
		}
		for _, s := range tc.no {
			if g.Accepts([]byte(s)) {
				t.Errorf("%s: accepts %s", tc.schema, s)
			}
		}
	}
}

// treeSchema is recursive: a node has children, which are nodes.
const treeSchema = `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string","maxLength":6},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name","children"]}},"$ref":"#/$defs/node"}`

// TestRecursiveSchemas: recursive references compile once (the size does
// not grow with the nesting they allow) and match at any depth.
func TestRecursiveSchemas(t *testing.T) {
	g, err := JSONSchema([]byte(treeSchema))
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"name":"leaf","children":[]}`
	for range 40 {
		doc = `{"name":"n","children":[` + doc + `,{"name":"x","children":[]}]}`
	}
	if !g.Accepts([]byte(doc)) {
		t.Error("rejects a tree 41 deep")
	}
	if g.Accepts([]byte(strings.Replace(doc, `"leaf"`, `"leaves!!"`, 1))) {
		t.Error("accepts a name past maxLength deep down")
	}
	if g.Accepts([]byte(doc[:len(doc)-1])) {
		t.Error("accepts an unclosed tree")
	}
	// Comments nesting through an anyOf, a list of them, and the root
	// referring to itself.
	for _, s := range []string{
		`{"$defs":{"c":{"type":"object","properties":{"text":{"type":"string"},"replies":{"type":"array","items":{"$ref":"#/$defs/c"},"maxItems":3}},"required":["text"]}},"type":"array","items":{"$ref":"#/$defs/c"}}`,
		`{"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#"}}]}`,
	} {
		if _, err := JSONSchema([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// chainSchema is issue 20's schema: dN = anyOf[dN-1, array of dN-1],
// which a compiler expanding references copies 2^N times.
func chainSchema(depth int) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"d0":{"type":"string","maxLength":4}`)
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, `,"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"type":"array","items":{"$ref":"#/$defs/d%d"}}]}`, i, i-1, i-1)
	}
	fmt.Fprintf(&b, `},"$ref":"#/$defs/d%d"}`, depth)
	return b.String()
}

// chainMemoryBound is what compiling the depth-16 chain may allocate.
const chainMemoryBound = 64 << 20

// TestDeepRefChainBounded: the depth-16 chain compiles under
// chainMemoryBound bytes allocated (measured in this process), its size
// linear in the depth, and its outputs validate.
func TestDeepRefChainBounded(t *testing.T) {
	schema := chainSchema(16)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g, err := JSONSchema([]byte(schema))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > chainMemoryBound {
		t.Fatalf("compiling allocated %d bytes, bound %d", alloc, chainMemoryBound)
	}
	g8, err := JSONSchema([]byte(chainSchema(8)))
	if err != nil {
		t.Fatal(err)
	}
	if n, n8 := g.NumNFAStates(), g8.NumNFAStates(); n > 3*n8 {
		t.Errorf("depth 16 has %d states, depth 8 %d: not linear", n, n8)
	}
	v, eos := testVocab()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 10 {
		out, complete := decode(t, g, v, eos, rng, 200)
		if !complete {
			t.Fatalf("incomplete output %q", out)
		}
		if err := jsonschema.Validate([]byte(schema), []byte(out)); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
	}
}

// bigSchema is a schema that takes a while to compile: many properties
// of intersected formats.
func bigSchema(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","format":"email","pattern":"^[a-z.]{1,40}@[a-z]{1,30}\\.com$","maxLength":60}`, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// checkCountingContext counts the times a compile checks it (Err) and
// ends at the check numbered endAt (never when endAt is 0): it cancels a
// compile after an amount of its work, not of wall-clock time.
type checkCountingContext struct {
	context.Context
	endAt  int64
	checks atomic.Int64
	once   sync.Once
	done   chan struct{}
}

func newCheckCountingContext(endAt int64) *checkCountingContext {
	return &checkCountingContext{Context: context.Background(), endAt: endAt, done: make(chan struct{})}
}

func (c *checkCountingContext) Err() error {
	if n := c.checks.Add(1); c.endAt > 0 && n >= c.endAt {
		c.once.Do(func() { close(c.done) })
		return context.Canceled
	}
	return nil
}

func (c *checkCountingContext) Done() <-chan struct{} { return c.done }

// TestCompileStopsWhenCancelled: a compile whose context ends half-way
// stops at its next check with the context's error, and a refused
// compile's memory is returned.
func TestCompileStopsWhenCancelled(t *testing.T) {
	schema := []byte(bigSchema(150))
	whole := newCheckCountingContext(0)
	if _, _, err := CompileJSONSchema(whole, schema, SchemaOptions{}); err != nil && !errors.Is(err, ErrTooLarge) {
		t.Fatalf("uncancelled: %v", err)
	}
	total := whole.checks.Load()
	if total < 8 {
		t.Fatalf("the whole compile checks its context %d times: too few to end it half-way", total)
	}
	half := newCheckCountingContext(total / 2)
	if _, _, err := CompileJSONSchema(half, schema, SchemaOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("ended at check %d of %d: %v, want %v", total/2, total, err, context.Canceled)
	}
	// The check that saw the end is the last: nothing runs after it.
	if n := half.checks.Load(); n != total/2 {
		t.Errorf("the compile checked its context %d times, ended at check %d: it went on after the end", n, total/2)
	}
	// A compile refused at the state budget leaves nothing behind.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, _, err := CompileJSONSchema(context.Background(), []byte(bigSchema(400)), SchemaOptions{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("bigSchema(400): %v, want the state budget's refusal", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 8<<20 {
		t.Errorf("the heap grew %d bytes across a refused compile", grown)
	}
}

// TestLenientDropsAssertions: tool parameters keep their structure and
// drop (and report) what cannot be enforced; strict compiles refuse it.
func TestLenientDropsAssertions(t *testing.T) {
	schema := `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true},"x":{"type":"number","multipleOf":0.5},"s":{"type":"string","format":"color","pattern":"(a)\\1"},"url":{"type":"string","format":"uri","maxLength":2083}},"required":["tags"]}`
	g, dropped, err := CompileJSONSchema(context.Background(), []byte(schema), SchemaOptions{Lenient: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"format", "maxLength", "multipleOf", "pattern", "uniqueItems"}, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if !g.Accepts([]byte(`{"tags":["a","a"],"x":1.25}`)) || g.Accepts([]byte(`{"x":1}`)) || g.Accepts([]byte(`{"tags":[1]}`)) {
		t.Error("structure not enforced")
	}
	if _, _, err := CompileJSONSchema(context.Background(), []byte(schema), SchemaOptions{}); err == nil {
		t.Error("strict compile accepted uniqueItems")
	}
	tg, dropped, err := CompileToolCalls(context.Background(), ToolCallFormat{ArgsKey: "arguments"},
		[]ToolSpec{{Name: "f", Parameters: []byte(schema)}, {Name: "g", Parameters: []byte(`{}`)}, {Name: "h"}}, false)
	if err != nil || len(dropped) != 5 {
		t.Fatalf("tools: %v, dropped %v", err, dropped)
	}
	for _, call := range []string{`{"name": "g", "arguments": {"k":[1]}}`, `{"name": "h", "arguments": {}}`} {
		if !tg.Accepts([]byte(call)) {
			t.Errorf("rejects %s", call)
		}
	}
	for _, call := range []string{`{"name": "g", "arguments": 5}`, `{"name": "h", "arguments": "x"}`} {
		if tg.Accepts([]byte(call)) {
			t.Errorf("accepts %s: arguments must be an object", call)
		}
	}
}

// TestRandomOutputsOfNewKeywordsValidate: whatever the model prefers, the
// outputs of schemas using bounds, tuples, counts, allOf, formats and
// recursion validate (checked by a validator that shares nothing with the
// compiler, formats by the standard library's parsers).
func TestRandomOutputsOfNewKeywordsValidate(t *testing.T) {
	v, eos := testVocab()
	rng := rand.New(rand.NewPCG(9, 9))
	for _, s := range []string{
		`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9007199254740991},"m":{"type":"number","minimum":0,"maximum":10},"k":{"type":"integer","multipleOf":3,"exclusiveMaximum":100}},"required":["n","m","k"]}`,
		`{"type":"number","exclusiveMinimum":-3.5,"exclusiveMaximum":-1.25}`,
		`{"type":"array","prefixItems":[{"type":"integer","minimum":-5,"maximum":5},{"enum":["a","b"]}],"items":false,"minItems":1}`,
		`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"integer"}},"additionalProperties":{"type":"integer"},"minProperties":2,"maxProperties":3}`,
		`{"allOf":[{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"required":["a"]},{"properties":{"a":{"maximum":9},"b":{"type":"string","maxLength":3}}}]}`,
		`{"type":"object","properties":{"ip4":{"type":"string","format":"ipv4"},"ip6":{"type":"string","format":"ipv6"},"host":{"type":"string","format":"hostname"},"uri":{"type":"string","format":"uri"},"mail":{"type":"string","format":"email","pattern":"^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"},"when":{"type":"string","format":"date-time"},"at":{"type":"string","format":"time"}},"required":["ip4","ip6","host","uri","mail","when","at"]}`,
		treeSchema,
		chainSchema(6),
	} {
		g, err := JSONSchema([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		for range 15 {
			out, complete := decode(t, g, v, eos, rng, 600)
			if !complete {
				t.Fatalf("%s: incomplete output %q", s, out)
			}
			if err := jsonschema.Validate([]byte(s), []byte(out)); err != nil {
				t.Fatalf("%s: output %q: %v", s, out, err)
			}
		}
	}
}

// TestStatesStayBounded: decoding a grammar that nests without bound,
// concurrently, keeps meeting new stacks; the states interned stay within
// maxStates (the tables start afresh, matchers keep what they hold) and
// every output is still matched.
func TestStatesStayBounded(t *testing.T) {
	// Two brackets return to two places: stacks are strings over them.
	g, err := CompileGBNF(context.Background(), "root ::= \"[\" root? \"]\" | \"(\" root? \")\"")
	if err != nil {
		t.Fatal(err)
	}
	v, eos := testVocab()
	done := make(chan error, 4)
	for w := range 4 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 150 {
				m := g.NewMatcher(v, []int32{eos})
				var out []byte
				for i := range 400 {
					mask := m.Mask(400 - i)
					var allowed []int32
					for id := range int32(v.Size()) {
						if mask[id>>6]&(1<<(uint(id)&63)) != 0 {
							allowed = append(allowed, id)
						}
					}
					if len(allowed) == 0 {
						done <- fmt.Errorf("no token allowed after %q", out)
						return
					}
					tok := allowed[rng.IntN(len(allowed))]
					if open := []int32{'[', '('}[rng.IntN(2)]; slices.Contains(allowed, open) && rng.IntN(4) > 0 {
						tok = open // nest: deeper stacks are new ones
					}
					if !m.Advance(tok) {
						done <- fmt.Errorf("allowed token %d refused", tok)
						return
					}
					if tok == eos {
						break
					}
					if out = append(out, v.TokenBytes(tok)...); m.Done() {
						break
					}
				}
				if !g.Accepts(out) {
					done <- fmt.Errorf("output %q not matched", out)
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	g.mu.Lock()
	n, resets := len(g.index), g.resets
	g.mu.Unlock()
	if n > maxStates || resets == 0 {
		t.Errorf("%d states interned (bound %d), tables started afresh %d times (want some)", n, maxStates, resets)
	}
}
