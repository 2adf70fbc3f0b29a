package grammar

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// convertSchema parses and converts a schema, stopping before the
// automaton is built.
func convertSchema(ctx context.Context, schema []byte, opts SchemaOptions) (*node, []string, error) {
	v, err := parseOrdered(schema)
	if err != nil {
		return nil, nil, err
	}
	return valueNode(ctx, v, opts, nil)
}

// wideObjectSchema is an object of n required properties, each of the
// schema value.
func wideObjectSchema(n int, value string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":%s`, i, value)
	}
	b.WriteString(`},"required":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d"`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// nestedObjectSchema is depth objects, each the one required property
// "a" of the one around it, an integer innermost.
func nestedObjectSchema(depth int) string {
	return strings.Repeat(`{"type":"object","properties":{"a":`, depth) + `{"type":"integer"}` +
		strings.Repeat(`},"required":["a"]}`, depth)
}

// BenchmarkSchemaConversion is the conversion of a schema to its
// expression (before the automaton is built) for wide and deep objects:
// its time and allocations should grow linearly with the schema.
func BenchmarkSchemaConversion(b *testing.B) {
	for _, bc := range []struct {
		name   string
		schema string
	}{
		{"properties=1000", wideObjectSchema(1000, `{}`)},
		{"properties=5000", wideObjectSchema(5000, `{}`)},
		{"depth=1000", nestedObjectSchema(1000)},
		{"depth=4000", nestedObjectSchema(4000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := convertSchema(context.Background(), []byte(bc.schema), SchemaOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// allocated is the bytes f allocates (in this process: tests of this
// package do not run in parallel).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLargeSchemasCompileInLinearMemory: schemas near the request limits
// that once took memory quadratic in their size (wide and deep objects,
// long property names, keywords dropped one by one, nested GBNF groups,
// counted objects) are converted, or refused at the state bound, within
// a few times their size.
func TestLargeSchemasCompileInLinearMemory(t *testing.T) {
	ctx := context.Background()
	convert := func(schema string, opts SchemaOptions) func() error {
		return func() error {
			_, _, err := convertSchema(ctx, []byte(schema), opts)
			return err
		}
	}
	compile := func(schema string) func() error {
		return func() error {
			_, _, err := CompileJSONSchema(ctx, []byte(schema), SchemaOptions{})
			return err
		}
	}
	longName := strings.Repeat("n", 1000)
	var unknown strings.Builder
	unknown.WriteString(`{"type":"string"`)
	for i := range 10000 {
		fmt.Fprintf(&unknown, `,"x-%d":0`, i)
	}
	unknown.WriteString(`}`)
	var counted strings.Builder
	counted.WriteString(`{"type":"object","maxProperties":64,"properties":{`)
	for i := range 4000 {
		if i > 0 {
			counted.WriteByte(',')
		}
		fmt.Fprintf(&counted, `"p%d":{"type":"integer"}`, i)
	}
	counted.WriteString(`}}`)
	list := func(n int, format string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(format, i)
		}
		return strings.Join(items, ",")
	}
	var tools []ToolSpec
	for i := range 200 {
		props := list(200, `"p%d":{"type":"string"}`)
		tools = append(tools, ToolSpec{Name: fmt.Sprintf("f%d", i), Parameters: []byte(`{"type":"object","properties":{` + props + `}}`)})
	}
	const depth = 20000
	nestedGroups := "root ::= " + strings.Repeat(`"a" (`, depth) + `"b"` + strings.Repeat(")", depth)
	for _, tc := range []struct {
		name    string
		run     func() error
		tooBig  bool // refused at the state bound
		maxSize uint64
	}{
		// Before: 2.9 GB.
		{"convert 5,000 required properties", convert(wideObjectSchema(5000, `{}`), SchemaOptions{}), false, 32 << 20},
		// The request of the report. Before: 3.0 GB.
		{"compile 5,000 required integer properties", compile(wideObjectSchema(5000, `{"type":"integer"}`)), true, 64 << 20},
		// Before: 2.1 GB at depth 4,000.
		{"convert objects nested 4,900 deep", convert(nestedObjectSchema(4900), SchemaOptions{}), false, 64 << 20},
		// The JSON pointers alone were 500 MB.
		{"compile objects nested 1,000 deep under 1,000-byte names", compile(
			strings.Repeat(`{"type":"object","properties":{"`+longName+`":`, 1000) + `{"type":"integer"}` +
				strings.Repeat(`},"required":["`+longName+`"]}`, 1000)), true, 64 << 20},
		// A copy of the schema per keyword dropped. Before: 10 GB.
		{"convert 10,000 unknown keywords leniently", convert(unknown.String(), SchemaOptions{Lenient: true}), false, 32 << 20},
		// 65 counts of members per property. Before: 650 MB to convert.
		{"compile 4,000 properties under maxProperties", compile(counted.String()), true, 96 << 20},
		// The merged properties copied per subschema. Before: 2.4 GB.
		{"compile allOf of 5,000 subschemas of a property each", compile(`{"allOf":[` + list(5000, `{"properties":{"p%d":{}}}`) + `]}`), true, 160 << 20},
		// Each value of one enum written out for each of the other's.
		// Before: 2.3 GB.
		{"convert allOf of two enums of 3,000 values", convert(`{"allOf":[{"enum":[`+list(3000, `"a%d"`)+`]},{"enum":[`+list(3000, `"b%d"`)+`,"a7"]}]}`, SchemaOptions{}), false, 16 << 20},
		// Each string's characters built afresh: the tools together are
		// refused as soon as they pass the state bound. Before: 800 MB.
		{"compile a call of 200 tools of 200 string properties", func() error {
			_, _, err := CompileToolCalls(ctx, ToolCallFormat{ArgsKey: "arguments"}, tools, false)
			return err
		}, true, 64 << 20},
		// Before: 1.6 GB.
		{"compile GBNF groups nested 20,000 deep", func() error { _, err := CompileGBNF(ctx, nestedGroups); return err }, false, 32 << 20},
	} {
		var err error
		size := allocated(func() { err = tc.run() })
		if tc.tooBig && !errors.Is(err, ErrTooLarge) || !tc.tooBig && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if size > tc.maxSize {
			t.Errorf("%s: allocated %d MiB, bound %d MiB", tc.name, size>>20, tc.maxSize>>20)
		}
		t.Logf("%s: %d MiB", tc.name, size>>20)
	}
}

// leavingCtx is a client that leaves once the process has allocated
// after bytes more than at start: Err reports context.Canceled from
// then on.
type leavingCtx struct {
	context.Context
	start, after uint64
}

func (c *leavingCtx) Err() error {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if m.TotalAlloc-c.start > c.after {
		return context.Canceled
	}
	return nil
}

// TestLeavingStopsSchemaConversion: a client that leaves half-way
// through a wide object's conversion, while its members are built, stops
// the compile within a bounded amount of work (the members built between
// two checks of the context), not at the end of the conversion.
func TestLeavingStopsSchemaConversion(t *testing.T) {
	schema := []byte(wideObjectSchema(8000, `{}`))
	whole := allocated(func() {
		if _, _, err := convertSchema(context.Background(), schema, SchemaOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	ctx := &leavingCtx{Context: context.Background(), start: m.TotalAlloc, after: whole / 2}
	_, _, err := CompileJSONSchema(ctx, schema, SchemaOptions{})
	runtime.ReadMemStats(&m)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("compile after the client left: %v", err)
	}
	if after := m.TotalAlloc - ctx.start - ctx.after; after > 1<<20 {
		t.Errorf("allocated %d KiB after the client left (the whole conversion allocates %d KiB)", after>>10, whole>>10)
	}
}

// TestStateFloorIsALowerBound: the states a conversion counts as it
// builds are never more than the automaton compiled from it has, so a
// schema refused early for them is one the automaton's bound would have
// refused. (Random schemas whose every part some document uses: a part
// none can use counts but is never compiled.)
func TestStateFloorIsALowerBound(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(21, 22))
	counted, compiled := 0, 0
	for range 200 {
		s := randomSchema(rng, 3)
		v, err := parseOrdered([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		floor := &stateFloor{}
		n, _, err := valueNode(ctx, v, SchemaOptions{}, floor)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		g, err := newGrammar(ctx, n)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if floor.states > g.NumNFAStates() {
			t.Errorf("%s: %d states counted while building, %d compiled", s, floor.states, g.NumNFAStates())
		}
		counted += floor.states
		compiled += g.NumNFAStates()
	}
	t.Logf("%d states counted while building, %d compiled", counted, compiled)
}
