package grammar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/kvpilot/kvpilot/internal/util/membudget"
)

// SchemaError is a schema the compiler refuses: Path is the JSON pointer of
// the offending subschema, Keyword the keyword (empty for a malformed
// schema).
type SchemaError struct {
	Path    string
	Keyword string
	Reason  string
}

func (e *SchemaError) Error() string {
	if e.Keyword != "" {
		return fmt.Sprintf("JSON schema at %s: %q %s", cmpOr(e.Path, "#"), e.Keyword, e.Reason)
	}
	return fmt.Sprintf("JSON schema at %s: %s", cmpOr(e.Path, "#"), e.Reason)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ignoredKeywords are annotations: they do not change which documents a
// schema accepts.
var ignoredKeywords = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "$schema": true, "$id": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true, "$defs": true, "definitions": true,
	"strict": true, "$anchor": true,
}

// handledKeywords are the keywords the compiler enforces.
var handledKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"prefixItems": true, "additionalItems": true, "minItems": true, "maxItems": true, "enum": true, "const": true,
	"anyOf": true, "oneOf": true, "allOf": true, "minLength": true, "maxLength": true, "pattern": true, "format": true,
	"$ref": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"multipleOf": true, "minProperties": true, "maxProperties": true,
}

// Limits that keep the automaton small and decoding terminating.
const (
	maxWhitespace = 8  // whitespace bytes between tokens
	maxIntDigits  = 16 // digits of an integer part
	maxFracDigits = 16
	// maxCountedProperties bounds minProperties/maxProperties: the object
	// automaton has a copy per count.
	maxCountedProperties = 64
	// maxSchemaNodes bounds the subschemas visited in one compile
	// (allOf merging and anyOf distribution copy subschemas).
	maxSchemaNodes = 1 << 16
	// ctxCheckEvery is how often (in nodes built for one place, see
	// stateFloor) a compile checks its context: an object member or a
	// string is a few KiB at most.
	ctxCheckEvery = 64
)

// object is a JSON object with its key order.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// parseOrdered decodes JSON keeping object key order (objects become
// *object; numbers json.Number).
func parseOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		_, err := dec.Token()
		return o, err
	case '[':
		var l []any
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := dec.Token()
		return l, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// SchemaOptions steer a schema compile.
type SchemaOptions struct {
	// Lenient drops the assertion keywords the compiler cannot enforce
	// (unknown keywords, uniqueItems, a pattern it cannot read…) instead
	// of refusing the schema; the structure is still enforced. Tool
	// parameters are compiled this way, as vLLM does.
	Lenient bool
}

// JSONSchema compiles a JSON schema: the output is one JSON document it
// accepts. See CompileJSONSchema.
func JSONSchema(schema []byte) (*Grammar, error) {
	g, _, err := CompileJSONSchema(context.Background(), schema, SchemaOptions{})
	return g, err
}

// CompileJSONSchema compiles a JSON schema: the output is one JSON
// document it accepts. Supported: type (one or a list), properties,
// required, additionalProperties (false, true or a schema; absent means
// false when properties are given, as in OpenAI's strict mode),
// minProperties, maxProperties, items (a schema, false, or a list as
// tuple), prefixItems, additionalItems, minItems, maxItems, enum, const,
// anyOf, oneOf (as anyOf: exclusivity is not checked), allOf (merged),
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf
// (integral), minLength, maxLength, pattern, format (date, time,
// date-time, uuid, email, uri, ipv4, ipv6, hostname), local $ref to
// $defs, definitions or the root (recursion included). Annotations
// (title, description, default, examples…) are ignored; any other
// keyword is refused with a *SchemaError naming it, or with
// opts.Lenient dropped and named in the returned list. Properties are
// generated in the schema's order; whitespace between tokens is bounded.
// The compile stops with ctx's error when ctx ends.
func CompileJSONSchema(ctx context.Context, schema []byte, opts SchemaOptions) (*Grammar, []string, error) {
	v, err := parseOrdered(schema)
	if err != nil {
		return nil, nil, &SchemaError{Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	c := newSchemaConv(ctx, v, opts, nil)
	n, dropped, err := c.convert()
	if err != nil {
		return nil, nil, err
	}
	g, err := newGrammar(ctx, n)
	if err != nil {
		return nil, nil, schemaCompileError(err)
	}
	if g.MinLength() >= int(inf) {
		return nil, nil, c.acceptsNothing()
	}
	return g, dropped, nil
}

// schemaCompileError names the keyword behind an automaton error.
func schemaCompileError(err error) error {
	var lr *LeftRecursionError
	if errors.As(err, &lr) {
		return &SchemaError{Keyword: "$ref", Reason: "is recursive without reading anything first: " + lr.Error()}
	}
	return err
}

// valueNode is the expression of a parsed schema, for building larger
// grammars; floor counts its states toward the automaton it goes into
// (nil: a floor of its own).
func valueNode(ctx context.Context, v any, opts SchemaOptions, floor *stateFloor) (*node, []string, error) {
	return newSchemaConv(ctx, v, opts, floor).convert()
}

func newSchemaConv(ctx context.Context, root any, opts SchemaOptions, floor *stateFloor) *schemaConv {
	if floor == nil {
		floor = &stateFloor{}
	}
	return &schemaConv{ctx: ctx, root: root, lenient: opts.Lenient, refs: map[string]*rule{}, formats: map[string]*node{},
		dropped: map[string]bool{}, floor: floor}
}

// convert is the expression of the whole schema and the keywords dropped.
func (c *schemaConv) convert() (*node, []string, error) {
	n := c.conv(c.root, rootPath("#"))
	if c.err != nil {
		return nil, nil, c.err
	}
	dropped := make([]string, 0, len(c.dropped))
	for k := range c.dropped {
		dropped = append(dropped, k)
	}
	sort.Strings(dropped)
	return n, dropped, nil
}

// AnyJSONObject is response_format json_object: one JSON object.
func AnyJSONObject() *Grammar {
	g, err := newGrammar(context.Background(), anyObject())
	if err != nil {
		panic(err) // a fixed grammar: cannot fail
	}
	return g
}

type schemaConv struct {
	ctx     context.Context
	root    any
	lenient bool
	dropped map[string]bool
	// refs are the rules of the references met so far: each is compiled
	// once, however often and however recursively it is referenced.
	refs    map[string]*rule
	formats map[string]*node
	nodes   int
	floor   *stateFloor
	// uncharged are the states counted (own) but not yet drawn on the
	// request's memory claim: they are drawn, BytesPerNFAState each, per
	// 1024, before their nodes are built.
	uncharged int
	// narrowed are the values left by keywords that narrow others, in
	// the order built.
	narrowed []narrowing
	err      error
}

// stateFloor counts, as nodes are built, the states of the nodes built
// for one place only (an object member, an enum value, a const, a
// string's or a number's characters), which the automaton compiles at
// least once each: a lower bound of its size, shared by the schemas
// compiled into one automaton (the tools of a tool call). Past
// MaxNFAStates the compile would be refused, so it is refused then,
// before the nodes take memory. (A part no document can use, such as
// items past maxItems, is never compiled but counts too: building it
// costs the same.)
type stateFloor struct {
	states int
	// adds counts the additions, to check ctx every so often.
	adds int
}

// compiledSize is the states n compiles to on its own: what a copy of n
// built for one place adds to an automaton at least.
func compiledSize(n *node) int {
	b := newBuilder(context.Background())
	b.compile(n, b.add(nstate{kind: nEnd}))
	return len(b.states) - 1
}

// The sizes of the expressions built afresh for each string and number.
var (
	stringCharStates    = sync.OnceValue(func() int { return compiledSize(stringChar()) })
	bmpStringCharStates = sync.OnceValue(func() int { return compiledSize(bmpStringChar()) })
	integerStates       = sync.OnceValue(func() int { return compiledSize(integer()) })
	numberStates        = sync.OnceValue(func() int { return compiledSize(number()) })
)

// narrowing is the values a keyword leaves of a subschema's (a format
// beside a pattern, a length bound, a multipleOf beside a range): when
// the whole schema accepts nothing, the first that leaves nothing is
// named.
type narrowing struct {
	n       *node // regular
	path    *schemaPath
	keyword string
	reason  string
}

func (c *schemaConv) narrow(n *node, path *schemaPath, keyword, format string, args ...any) {
	c.narrowed = append(c.narrowed, narrowing{n: n, path: path, keyword: keyword, reason: fmt.Sprintf(format, args...)})
}

// acceptsNothing is the error of a schema that accepts no document: the
// first keyword that leaves its subschema no value, else (none does) a
// required reference that never ends. The keywords are checked one by
// one, on this path only, within the state budget of one compile.
func (c *schemaConv) acceptsNothing() error {
	budget := MaxNFAStates
	for _, nw := range c.narrowed {
		p, err := compileProgram(c.ctx, nw.n)
		if ctxErr := c.ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			continue
		}
		if p.dist[p.starts[0]] >= inf {
			return &SchemaError{Path: nw.path.String(), Keyword: nw.keyword, Reason: nw.reason}
		}
		if budget -= len(p.nfa); budget < 0 {
			break
		}
	}
	if len(c.refs) > 0 {
		return &SchemaError{Keyword: "$ref", Reason: "accepts no finite document (a required reference never ends)"}
	}
	return &SchemaError{Reason: "accepts no document"}
}

// schemaPath is the JSON pointer of the subschema a compile is at, kept
// as its last steps and the path above them and spelled out only for an
// error: spelled out at every level, the pointers of a deep schema would
// cost its depth times their length.
type schemaPath struct {
	up *schemaPath
	// steps are "/"-prefixed steps below up, or, at the top, where the
	// path starts ("#" or a reference).
	steps string
}

func rootPath(start string) *schemaPath { return &schemaPath{steps: start} }

// to is the path steps further down.
func (p *schemaPath) to(steps ...string) *schemaPath {
	n := 0
	for _, s := range steps {
		n += 1 + len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range steps {
		b.WriteByte('/')
		b.WriteString(s)
	}
	return &schemaPath{up: p, steps: b.String()}
}

func (p *schemaPath) String() string {
	var parts []string
	for q := p; q != nil; q = q.up {
		parts = append(parts, q.steps)
	}
	slices.Reverse(parts)
	return strings.Join(parts, "")
}

func (c *schemaConv) fail(path *schemaPath, keyword, format string, args ...any) *node {
	if c.err == nil {
		c.err = &SchemaError{Path: path.String(), Keyword: keyword, Reason: fmt.Sprintf(format, args...)}
	}
	return empty
}

// unsupported handles an assertion the compiler cannot enforce: dropped
// (true) when lenient, else the compile fails.
func (c *schemaConv) unsupported(path *schemaPath, keyword, format string, args ...any) bool {
	if c.lenient {
		c.dropped[keyword] = true
		return true
	}
	c.fail(path, keyword, format, args...)
	return false
}

// own counts states of nodes about to be built for one place only (see
// stateFloor): false, with c.err set, once they pass MaxNFAStates or when
// ctx has ended.
func (c *schemaConv) own(states int) bool {
	if c.err != nil {
		return false
	}
	f := c.floor
	if f.states += states; f.states > MaxNFAStates {
		c.err = fmt.Errorf("%w: more than %d automaton states", ErrTooLarge, MaxNFAStates)
		return false
	}
	if f.adds++; f.adds%ctxCheckEvery == 0 {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			return false
		}
	}
	if c.uncharged += states; c.uncharged >= 1024 {
		if err := membudget.Charge(c.ctx, int64(c.uncharged)*BytesPerNFAState); err != nil {
			c.err = err
			return false
		}
		c.uncharged = 0
	}
	return true
}

func (c *schemaConv) conv(v any, path *schemaPath) *node {
	if c.err != nil {
		return empty
	}
	if c.nodes++; c.nodes > maxSchemaNodes {
		return c.fail(path, "", "more than %d subschemas to compile", maxSchemaNodes)
	}
	if c.nodes&63 == 0 {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			return empty
		}
	}
	switch t := v.(type) {
	case bool:
		if t {
			return anyValue()
		}
		return c.fail(path, "", "false schema accepts nothing")
	case *object:
		return c.convObject(t, path)
	}
	return c.fail(path, "", "a schema must be an object or a boolean")
}

// assertions reports whether s has keywords other than annotations and
// those listed.
func assertions(s *object, except ...string) bool {
	for _, k := range s.keys {
		if !ignoredKeywords[k] && !slices.Contains(except, k) {
			return true
		}
	}
	return false
}

// without is s less the keywords listed.
func without(s *object, drop ...string) *object {
	return keeping(s, func(k string) bool { return !slices.Contains(drop, k) })
}

// keeping is s with only the keywords keep reports true for.
func keeping(s *object, keep func(k string) bool) *object {
	o := &object{vals: map[string]any{}}
	for _, k := range s.keys {
		if keep(k) {
			o.set(k, s.vals[k])
		}
	}
	return o
}

func (c *schemaConv) convObject(s *object, path *schemaPath) *node {
	// Dropped in one pass: a copy of s per unknown keyword would be
	// quadratic in a schema made of them.
	unknown := false
	for _, k := range s.keys {
		if !handledKeywords[k] && !ignoredKeywords[k] {
			if !c.unsupported(path, k, "is not supported by constrained decoding") {
				return empty
			}
			unknown = true
		}
	}
	if unknown {
		s = keeping(s, func(k string) bool { return handledKeywords[k] || ignoredKeywords[k] })
	}
	if _, ok := s.vals["allOf"]; ok {
		merged := c.mergeAllOf(s, path)
		if c.err != nil {
			return empty
		}
		return c.convObject(merged, path)
	}
	if ref, ok := s.vals["$ref"]; ok {
		if assertions(s, "$ref") {
			// Keywords beside a reference apply too: the two merge.
			return c.convObject(&object{keys: []string{"allOf"}, vals: map[string]any{
				"allOf": []any{&object{keys: []string{"$ref"}, vals: map[string]any{"$ref": ref}}, without(s, "$ref")}}}, path)
		}
		return c.convRef(ref, path)
	}
	if v, ok := s.vals["const"]; ok {
		text := compactJSON(v)
		if !c.own(len(text)) {
			return empty
		}
		return lit(text)
	}
	if v, ok := s.vals["enum"]; ok {
		l, ok := v.([]any)
		if !ok || len(l) == 0 {
			return c.fail(path, "enum", "must be a non-empty array")
		}
		parts := make([]*node, len(l))
		for i, e := range l {
			text := compactJSON(e)
			if !c.own(len(text)) {
				return empty
			}
			parts[i] = lit(text)
		}
		return alt(parts...)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if v, ok := s.vals[kw]; ok {
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return c.fail(path, kw, "must be a non-empty array")
			}
			rest := without(s, kw)
			parts := make([]*node, len(l))
			for i, sub := range l {
				if assertions(rest) {
					// Keywords beside the alternatives apply to each.
					sub = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{sub, rest}}}
				}
				parts[i] = c.conv(sub, path.to(kw, strconv.Itoa(i)))
			}
			return alt(parts...)
		}
	}
	var types []string
	switch t := s.vals["type"].(type) {
	case nil:
		// Untyped: infer from the keywords present, else any value.
		switch {
		case s.vals["properties"] != nil || s.vals["additionalProperties"] != nil ||
			s.vals["minProperties"] != nil || s.vals["maxProperties"] != nil:
			types = []string{"object"}
		case s.vals["items"] != nil || s.vals["prefixItems"] != nil || s.vals["minItems"] != nil || s.vals["maxItems"] != nil:
			types = []string{"array"}
		case s.vals["minLength"] != nil || s.vals["maxLength"] != nil || s.vals["pattern"] != nil || s.vals["format"] != nil:
			types = []string{"string"}
		case s.vals["minimum"] != nil || s.vals["maximum"] != nil || s.vals["exclusiveMinimum"] != nil ||
			s.vals["exclusiveMaximum"] != nil || s.vals["multipleOf"] != nil:
			types = []string{"number"}
		default:
			return anyValue()
		}
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			str, ok := e.(string)
			if !ok {
				return c.fail(path, "type", "must be a string or an array of strings")
			}
			types = append(types, str)
		}
	default:
		return c.fail(path, "type", "must be a string or an array of strings")
	}
	parts := make([]*node, 0, len(types))
	for _, t := range types {
		parts = append(parts, c.convType(s, t, path))
	}
	if len(parts) == 0 {
		return c.fail(path, "type", "is an empty list")
	}
	return alt(parts...)
}

// resolve returns the subschema a local reference names.
func (c *schemaConv) resolve(ref any, path *schemaPath) (string, any, bool) {
	r, ok := ref.(string)
	if !ok {
		c.fail(path, "$ref", "must be a string")
		return "", nil, false
	}
	if r == "#" {
		return r, c.root, true
	}
	if !strings.HasPrefix(r, "#/") {
		c.fail(path, "$ref", "%q: only local references (#/...) are supported", r)
		return "", nil, false
	}
	var target any = c.root
	for _, part := range strings.Split(r[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		o, ok := target.(*object)
		if !ok {
			c.fail(path, "$ref", "%q does not resolve", r)
			return "", nil, false
		}
		if target, ok = o.vals[part]; !ok {
			c.fail(path, "$ref", "%q does not resolve", r)
			return "", nil, false
		}
	}
	return r, target, true
}

// convRef is a call of the reference's rule, compiled the first time.
func (c *schemaConv) convRef(ref any, path *schemaPath) *node {
	r, target, ok := c.resolve(ref, path)
	if !ok {
		return empty
	}
	if rl, ok := c.refs[r]; ok {
		return call(rl)
	}
	rl := &rule{name: r}
	c.refs[r] = rl
	rl.body = c.conv(target, rootPath(r))
	return call(rl)
}

func (c *schemaConv) intKeyword(s *object, path *schemaPath, kw string, def int) int {
	v, ok := s.vals[kw]
	if !ok {
		return def
	}
	num, ok := v.(json.Number)
	if !ok {
		c.fail(path, kw, "must be a non-negative integer")
		return def
	}
	i, err := strconv.Atoi(string(num))
	if err != nil || i < 0 {
		c.fail(path, kw, "must be a non-negative integer")
		return def
	}
	return i
}

// countBounds reads a pair of count keywords (minLength/maxLength,
// minItems/maxItems, minProperties/maxProperties): lo defaults to 0, hi
// to -1 (no bound). It fails when lo exceeds hi, or either is above limit
// (unless lenient).
func (c *schemaConv) countBounds(s *object, path *schemaPath, minKw, maxKw string, limit int) (lo, hi int, ok bool) {
	lo = c.intKeyword(s, path, minKw, 0)
	hi = c.intKeyword(s, path, maxKw, -1)
	if c.err != nil {
		return 0, 0, false
	}
	if hi >= 0 && lo > hi {
		c.fail(path, minKw, "is more than %s", maxKw)
		return 0, 0, false
	}
	// Past the limit a bound is dropped when lenient (the automaton has a
	// state per count).
	if lo > limit {
		if !c.unsupported(path, minKw, "above %d is not supported", limit) {
			return 0, 0, false
		}
		lo = 0
	}
	if hi > limit {
		if !c.unsupported(path, maxKw, "above %d is not supported", limit) {
			return 0, 0, false
		}
		hi = -1
	}
	return lo, hi, true
}

func (c *schemaConv) convType(s *object, t string, path *schemaPath) *node {
	switch t {
	case "null":
		return lit("null")
	case "boolean":
		return alt(lit("true"), lit("false"))
	case "integer", "number":
		return c.convNumber(s, t, path)
	case "string":
		return c.convString(s, path)
	case "array":
		return c.convArray(s, path)
	case "object":
		return c.convObjectType(s, path)
	}
	return c.fail(path, "type", "unknown type %q", t)
}

// numberKeyword reads a numeric keyword.
func (c *schemaConv) numberKeyword(s *object, path *schemaPath, kw string) (*big.Rat, bool) {
	v, ok := s.vals[kw]
	if !ok {
		return nil, false
	}
	num, ok := v.(json.Number)
	if !ok {
		c.fail(path, kw, "must be a number")
		return nil, false
	}
	r, ok := exactNumber(string(num))
	if !ok {
		c.fail(path, kw, "must be a number")
		return nil, false
	}
	return r, true
}

// maxExponent bounds the decimal exponents read exactly: beyond it a
// value is as good as unbounded (or as zero, its sign kept) for every
// bound and multiple the compiler writes, and an exact 1e999999 would
// cost time and memory.
const maxExponent = 40

// exactNumber reads a JSON number as an exact rational, its exponent
// clamped to ±maxExponent.
func exactNumber(s string) (*big.Rat, bool) {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > maxExponent || exp < -maxExponent {
			mant, ok := new(big.Rat).SetString(s[:i])
			if !ok {
				return nil, false
			}
			e := maxExponent
			if err == nil && exp < 0 || err != nil && strings.HasPrefix(s[i+1:], "-") {
				e = -maxExponent
			}
			return mant.Mul(mant, new(big.Rat).SetFrac(pow10Int(max(e, 0)), pow10Int(max(-e, 0)))), true
		}
	}
	return new(big.Rat).SetString(s)
}

func pow10Int(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

// bounds reads one side of a range: the plain keyword (inclusive), the
// exclusive one (a number, or draft 4's boolean turning the plain one
// exclusive); the tighter wins.
func (c *schemaConv) bounds(s *object, path *schemaPath, plain, excl string, lower bool) bound {
	var b bound
	if v, ok := c.numberKeyword(s, path, plain); ok {
		b = bound{set: true, v: v}
	}
	switch e := s.vals[excl].(type) {
	case nil:
	case bool:
		b.exclusive = e && b.set
	default:
		v, ok := c.numberKeyword(s, path, excl)
		if !ok {
			break
		}
		cmp := 0
		if b.set {
			cmp = v.Cmp(b.v)
		}
		if !b.set || (lower && cmp >= 0) || (!lower && cmp <= 0) {
			b = bound{set: true, v: v, exclusive: true}
		}
	}
	return b
}

func (c *schemaConv) convNumber(s *object, t string, path *schemaPath) *node {
	lo := c.bounds(s, path, "minimum", "exclusiveMinimum", true)
	hi := c.bounds(s, path, "maximum", "exclusiveMaximum", false)
	if c.err != nil {
		return empty
	}
	integral := t == "integer"
	var mult *node
	if k, ok := c.numberKeyword(s, path, "multipleOf"); ok {
		switch {
		case k.Sign() <= 0:
			return c.fail(path, "multipleOf", "must be greater than 0")
		case !k.IsInt():
			if !c.unsupported(path, "multipleOf", "%s is not an integer; only integral multipleOf is supported", k.RatString()) {
				return empty
			}
		case k.Num().Cmp(big.NewInt(maxMultipleOf)) > 0:
			if !c.unsupported(path, "multipleOf", "above %d is not supported", maxMultipleOf) {
				return empty
			}
		default:
			// Multiples of an integer are integers.
			integral = true
			if k.Num().Int64() > 1 {
				mult = multipleOfDFA(int(k.Num().Int64()))
			}
		}
	}
	if c.err != nil {
		return empty
	}
	var n *node
	switch {
	case integral && !lo.set && !hi.set:
		if !c.own(integerStates()) {
			return empty
		}
		n = integer()
	case integral:
		first, last := intBounds(lo, hi)
		f, l, ok := clampRange(first, last)
		if !ok {
			kw := "minimum"
			if !lo.set {
				kw = "maximum"
			}
			return c.fail(path, kw, "leaves no integer of at most %d digits", maxIntDigits)
		}
		n = intRange(f, l)
	case lo.set || hi.set:
		n = boundedNumber(lo, hi)
		if n == nothing {
			kw := "minimum"
			if !lo.set {
				kw = "maximum"
			}
			return c.fail(path, kw, "leaves no number")
		}
	default:
		if !c.own(numberStates()) {
			return empty
		}
		n = number()
	}
	if mult != nil {
		n = and(n, mult)
		if lo.set || hi.set {
			c.narrow(n, path, "multipleOf", "leaves no multiple of %s within the bounds", s.vals["multipleOf"])
		}
	}
	return n
}

func (c *schemaConv) convString(s *object, path *schemaPath) *node {
	minLen, maxLen, ok := c.countBounds(s, path, "minLength", "maxLength", maxRepeat)
	if !ok {
		return empty
	}
	var parts []*node
	// what is what the string's values are narrowed to, for errors.
	var what []string
	if p, ok := s.vals["pattern"]; ok {
		ps, ok := p.(string)
		if !ok {
			return c.fail(path, "pattern", "must be a string")
		}
		n, err := patternNode(c.ctx, ps, jsonSafe)
		if ctxErr := c.ctx.Err(); ctxErr != nil {
			c.err = ctxErr
			return empty
		}
		if err != nil {
			if !c.unsupported(path, "pattern", "%v", err) {
				return empty
			}
		} else {
			parts = append(parts, n)
			what = append(what, "the pattern")
			c.narrow(n, path, "pattern", "accepts no string")
		}
	}
	if f, ok := s.vals["format"]; ok {
		fs, _ := f.(string)
		if pat, ok := formats[fs]; ok {
			if c.formats[fs] == nil {
				// One node per format, so the automaton compiles it once
				// (as a rule) however many strings use it.
				c.formats[fs] = mustRegex(pat)
			}
			parts = append(parts, c.formats[fs])
			if len(parts) > 1 {
				c.narrow(and(parts[0], parts[1]), path, "format", "%q accepts no string the pattern accepts", fs)
			}
			what = append(what, fmt.Sprintf("format %q", fs))
		} else if !c.unsupported(path, "format", "%q is not supported (supported: %s)", fs, formatNames()) {
			return empty
		}
	}
	if len(parts) == 0 {
		char, charStates := stringChar, stringCharStates
		if maxLen >= 0 {
			char, charStates = bmpStringChar, bmpStringCharStates
		}
		if !c.own(2 + charStates()) {
			return empty
		}
		return concat(oneByte('"'), repeat(char(), minLen, maxLen), oneByte('"'))
	}
	n := parts[0]
	for _, p := range parts[1:] {
		n = and(n, p)
	}
	if minLen > 0 || maxLen >= 0 {
		// Counted in characters of the unescaped text, which a pattern or
		// format writes without escapes.
		n = lengthOf(n, minLen, maxLen)
		kw, count := "minLength", fmt.Sprintf("of %d to %d", minLen, maxLen)
		switch {
		case maxLen < 0:
			count = fmt.Sprintf("of at least %d", minLen)
		case minLen == 0:
			kw, count = "maxLength", fmt.Sprintf("of at most %d", maxLen)
		}
		verb := "accepts"
		if len(what) > 1 {
			verb = "accept"
		}
		c.narrow(n, path, kw, "leaves no string %s characters that %s %s", count, strings.Join(what, " and "), verb)
	}
	return concat(oneByte('"'), n, oneByte('"'))
}

func mustRegex(pat string) *node {
	n, err := regexNode(pat, jsonSafe)
	if err != nil {
		panic(fmt.Sprintf("format pattern %q: %v", pat, err))
	}
	return n
}

func formatNames() string {
	names := make([]string, 0, len(formats))
	for k := range formats {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// formats are regular subsets of what each format accepts (so a
// validator in its strict mode accepts every output): dates name days
// that exist (leaving out 29 February), times carry a time zone, host
// names have at most four labels of at most 32 characters.
var formats = map[string]string{
	"date":      dateRe,
	"time":      timeRe,
	"date-time": dateRe + "T" + timeRe,
	"uuid":      `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
	"email":     `[a-zA-Z0-9_+-]+(\.[a-zA-Z0-9_+-]+)*@(` + openLabelRe + `\.)+[a-zA-Z]{2,8}`,
	"hostname":  labelRe + `(\.` + labelRe + `){0,3}`,
	"ipv4":      ipv4Re + `(\.` + ipv4Re + `){3}`,
	"ipv6":      ipv6Re,
	"uri": `[a-zA-Z][a-zA-Z0-9+.-]*://` + openLabelRe + `(\.` + openLabelRe + `)*(:[0-9]{1,5})?` +
		`(/(` + uriChar + `)*)*(\?(` + uriChar + `|/|\?)*)?(#(` + uriChar + `|/|\?)*)?`,
}

const (
	dateRe  = `[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))`
	timeRe  = `([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`
	labelRe = `[a-zA-Z0-9]([a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?`
	// openLabelRe is a host label where the format puts no bound on its
	// length (emails, URIs).
	openLabelRe = `[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?`
	ipv4Re      = `(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
	h16         = `[0-9a-fA-F]{1,4}`
	ipv6Re      = `((` + h16 + `:){7}` + h16 + `|(` + h16 + `:){1,7}:|(` + h16 + `:){1,6}:` + h16 +
		`|(` + h16 + `:){1,5}(:` + h16 + `){1,2}|(` + h16 + `:){1,4}(:` + h16 + `){1,3}|(` + h16 + `:){1,3}(:` + h16 + `){1,4}` +
		`|(` + h16 + `:){1,2}(:` + h16 + `){1,5}|` + h16 + `:(:` + h16 + `){1,6}|:((:` + h16 + `){1,7}|:))`
	uriChar = `[a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-F]{2}`
)

// jsonSafe removes from [lo, hi] the runes a JSON string must escape.
func jsonSafe(lo, hi rune) [][2]rune {
	var out [][2]rune
	add := func(l, h rune) {
		l, h = max(l, lo), min(h, hi)
		if l <= h {
			out = append(out, [2]rune{l, h})
		}
	}
	add(0x20, '"'-1)
	add('"'+1, '\\'-1)
	add('\\'+1, 0x10ffff)
	return out
}

// jsonSafeChar is one character a JSON string holds unescaped.
func jsonSafeChar() *node {
	var parts []*node
	for _, r := range jsonSafe(0, 0x10ffff) {
		parts = append(parts, utf8Range(r[0], r[1]))
	}
	return alt(parts...)
}

func (c *schemaConv) convArray(s *object, path *schemaPath) *node {
	minItems, maxItems, ok := c.countBounds(s, path, "minItems", "maxItems", maxRepeat)
	if !ok {
		return empty
	}
	var prefix []*node
	prefixKw := "prefixItems"
	rest, restKw := anyValue(), "items"
	if l, isList := s.vals["items"].([]any); isList {
		// Draft 4 tuples: items is the list, additionalItems the rest.
		prefix, prefixKw = nil, "items"
		for i, sub := range l {
			prefix = append(prefix, c.conv(sub, path.to("items", strconv.Itoa(i))))
		}
		restKw = "additionalItems"
	} else if p, ok := s.vals["prefixItems"]; ok {
		l, ok := p.([]any)
		if !ok {
			return c.fail(path, "prefixItems", "must be an array of schemas")
		}
		for i, sub := range l {
			prefix = append(prefix, c.conv(sub, path.to("prefixItems", strconv.Itoa(i))))
		}
	}
	if it, ok := s.vals[restKw]; ok {
		if b, isBool := it.(bool); isBool && !b {
			rest = nil
		} else {
			rest = c.conv(it, path.to(restKw))
		}
	}
	if c.err != nil {
		return empty
	}
	if rest == nil && minItems > len(prefix) {
		return c.fail(path, "minItems", "is more than the %d items %s allows", len(prefix), prefixKw)
	}
	return arrayOf(prefix, rest, minItems, maxItems)
}

// arrayOf is a JSON array whose items are prefix in order, then rest
// (nil: none), between minItems and maxItems (-1: no bound) items.
func arrayOf(prefix []*node, rest *node, minItems, maxItems int) *node {
	sep := concat(wsNode(), oneByte(','), wsNode())
	// tail is the items from len(prefix) on.
	tail := empty
	if rest != nil {
		lo, hi := max(0, minItems-len(prefix)), -1
		if maxItems >= 0 {
			hi = max(0, maxItems-len(prefix))
		}
		tail = separated(rest, sep, lo, hi, len(prefix) > 0)
	}
	body := tail
	for i := len(prefix) - 1; i >= 0; i-- {
		if maxItems >= 0 && i >= maxItems {
			body = empty
			continue
		}
		with := concat(prefix[i], body)
		if i > 0 {
			with = concat(sep, with)
		}
		if i < minItems {
			body = with
		} else {
			body = opt(with)
		}
	}
	return concat(oneByte('['), wsNode(), body, wsNode(), oneByte(']'))
}

// separated is between lo and hi (-1: no bound) items with sep between
// them, and before the first too when leading.
func separated(item, sep *node, lo, hi int, leading bool) *node {
	if leading {
		return repeat(concat(sep, item), lo, hi)
	}
	if hi == 0 {
		return empty
	}
	more := concat(sep, item)
	restHi := -1
	if hi > 0 {
		restHi = hi - 1
	}
	if lo == 0 {
		return opt(concat(item, repeat(more, 0, restHi)))
	}
	return concat(item, repeat(more, lo-1, restHi))
}

func (c *schemaConv) convObjectType(s *object, path *schemaPath) *node {
	props, _ := s.vals["properties"].(*object)
	if _, ok := s.vals["properties"]; ok && props == nil {
		return c.fail(path, "properties", "must be an object")
	}
	minProps, maxProps, ok := c.countBounds(s, path, "minProperties", "maxProperties", maxCountedProperties)
	if !ok {
		return empty
	}
	// additionalProperties: absent means false when properties are given
	// (strict), any value otherwise.
	var extra *node
	switch ap := s.vals["additionalProperties"].(type) {
	case nil:
		if props == nil {
			extra = anyValue()
		}
	case bool:
		if ap {
			extra = anyValue()
		}
	default:
		extra = c.conv(ap, path.to("additionalProperties"))
	}
	required := map[string]bool{}
	// unlisted are required names properties does not list: they are
	// written after the listed ones, with additionalProperties' values
	// (any value when it is absent).
	var unlisted []string
	if r, ok := s.vals["required"]; ok {
		l, ok := r.([]any)
		if !ok {
			return c.fail(path, "required", "must be an array of strings")
		}
		for _, e := range l {
			name, ok := e.(string)
			if !ok {
				return c.fail(path, "required", "must be an array of strings")
			}
			if (props == nil || props.vals[name] == nil) && !required[name] {
				if ap, isBool := s.vals["additionalProperties"].(bool); isBool && !ap {
					return c.fail(path, "required", "names %q, which is not in properties, and additionalProperties is false", name)
				}
				unlisted = append(unlisted, name)
			}
			required[name] = true
		}
	}
	var names []string
	var values []*node
	if props != nil {
		for _, name := range props.keys {
			names = append(names, name)
			values = append(values, c.conv(props.vals[name], path.to("properties", name)))
		}
	}
	for _, name := range unlisted {
		v := extra
		if v == nil {
			v = anyValue()
		}
		names = append(names, name)
		values = append(values, v)
	}
	if c.err != nil {
		return empty
	}
	n := objectOf(names, values, required, extra, minProps, maxProps, c.own)
	if c.err != nil {
		return empty
	}
	if n == nil {
		return c.fail(path, "minProperties", "and maxProperties cannot be met by the properties allowed")
	}
	return n
}

// objectOf builds an object whose properties appear in the given order,
// required ones always and optional ones possibly not, then (when extra is
// set) any further keys with extra values; between minProps and maxProps
// (-1: no bound) members in all. nil when no object qualifies. own,
// when set, is told before each member is built the fewest automaton
// states the member's own nodes compile to; when it returns false the
// build stops (its result is then to be discarded).
func objectOf(names []string, values []*node, required map[string]bool, extra *node, minProps, maxProps int, own func(states int) bool) *node {
	sep := concat(wsNode(), oneByte(','), wsNode())
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = compactJSON(name)
	}
	// kv is built afresh for each member: its name, colon and whitespace
	// compile to a state per byte and per optional byte at least.
	kv := func(i int) *node {
		return concat(lit(keys[i]), wsNode(), oneByte(':'), wsNode(), values[i])
	}
	kvStates := func(i int) int { return len(keys[i]) + 1 + 2*maxWhitespace }
	var extraKV *node
	if extra != nil {
		extraKV = concat(jsonString(), wsNode(), oneByte(':'), wsNode(), extra)
	}
	// Members are counted up to the bound that matters; build(i, k,
	// first) is the members from i on after k (first: none written).
	// Shared by pointer, so the automaton stays linear in the number of
	// properties times the count.
	limit := maxProps + 1
	if maxProps < 0 {
		limit = minProps
	}
	type key struct {
		i, k  int
		first bool
	}
	memo := map[key]*node{}
	n := len(names)
	stopped := false
	var build func(i, k int, first bool) *node
	build = func(i, k int, first bool) *node {
		if stopped || maxProps >= 0 && k > maxProps {
			return nil
		}
		mk := key{i, k, first}
		if r, ok := memo[mk]; ok {
			return r
		}
		var r *node
		if i == n {
			lo, hi := max(0, minProps-k), -1
			if maxProps >= 0 {
				hi = maxProps - k
			}
			switch {
			case extraKV != nil:
				r = separated(extraKV, sep, lo, hi, !first)
			case lo == 0:
				r = empty
			}
		} else {
			next := min(k+1, limit)
			var alts []*node
			if with := build(i+1, next, false); with != nil {
				if own != nil && !own(kvStates(i)) {
					stopped = true
					return nil
				}
				m := concat(kv(i), with)
				if !first {
					m = concat(sep, m)
				}
				alts = append(alts, m)
			}
			if !required[names[i]] {
				if skip := build(i+1, k, first); skip != nil {
					alts = append(alts, skip)
				}
			}
			if len(alts) > 0 {
				r = alt(alts...)
			}
		}
		if stopped {
			return nil
		}
		memo[mk] = r
		return r
	}
	body := build(0, 0, true)
	if body == nil {
		return nil
	}
	return concat(oneByte('{'), wsNode(), body, wsNode(), oneByte('}'))
}

func wsNode() *node {
	return repeat(alt(oneByte(' '), oneByte('\n'), oneByte('\t')), 0, maxWhitespace)
}

func stringChar() *node {
	return alt(
		byteRange(0x20, 0x21), byteRange(0x23, 0x5b), byteRange(0x5d, 0x7f),
		utf8Range(0x80, 0x10ffff),
		concat(oneByte('\\'), alt(oneByte('"'), oneByte('\\'), oneByte('/'), oneByte('b'), oneByte('f'),
			oneByte('n'), oneByte('r'), oneByte('t'),
			concat(oneByte('u'), repeat(alt(byteRange('0', '9'), byteRange('a', 'f'), byteRange('A', 'F')), 4, 4)))),
	)
}

// bmpStringChar is stringChar within the Basic Multilingual Plane (no
// 4-byte UTF-8, no surrogate escapes): where a length is bounded, a
// character then counts one whether counted in code points (JSON Schema)
// or in UTF-16 units (JavaScript's length, which zod checks).
func bmpStringChar() *node {
	hex := alt(byteRange('0', '9'), byteRange('a', 'f'), byteRange('A', 'F'))
	notD := alt(byteRange('0', '9'), byteRange('a', 'c'), byteRange('e', 'f'), byteRange('A', 'C'), byteRange('E', 'F'))
	lowHalf := alt(byteRange('0', '7'))
	return alt(
		byteRange(0x20, 0x21), byteRange(0x23, 0x5b), byteRange(0x5d, 0x7f),
		utf8Range(0x80, 0xffff),
		concat(oneByte('\\'), alt(oneByte('"'), oneByte('\\'), oneByte('/'), oneByte('b'), oneByte('f'),
			oneByte('n'), oneByte('r'), oneByte('t'),
			concat(oneByte('u'), alt(concat(notD, hex, hex, hex), concat(alt(oneByte('d'), oneByte('D')), lowHalf, hex, hex))))),
	)
}

func jsonString() *node {
	return concat(oneByte('"'), star(stringChar()), oneByte('"'))
}

func digits(min, max int) *node { return repeat(byteRange('0', '9'), min, max) }

func integer() *node {
	return concat(opt(oneByte('-')), alt(oneByte('0'), concat(byteRange('1', '9'), digits(0, maxIntDigits-1))))
}

func number() *node {
	frac := opt(concat(oneByte('.'), digits(1, maxFracDigits)))
	exp := opt(concat(alt(oneByte('e'), oneByte('E')), opt(alt(oneByte('+'), oneByte('-'))), digits(1, 2)))
	return concat(integer(), frac, exp)
}

// jsonValue is the rule of any JSON value: objects and arrays nest by
// calling it again, so the nesting depth is not bounded by the grammar
// (the token budget bounds it when decoding).
var jsonValue = &rule{name: "json value"}

func init() {
	jsonValue.body = alt(jsonString(), number(), lit("true"), lit("false"), lit("null"),
		objectOf(nil, nil, nil, call(jsonValue), 0, -1, nil), arrayOf(nil, call(jsonValue), 0, -1))
}

// anyValue is any JSON value.
func anyValue() *node { return call(jsonValue) }

func anyObject() *node { return objectOf(nil, nil, nil, anyValue(), 0, -1, nil) }

// CanonicalJSON is data without insignificant whitespace, object keys
// kept in their order (which decides the order properties are written
// in): a key for caching compiled schemas.
func CanonicalJSON(data []byte) (string, error) {
	v, err := parseOrdered(data)
	if err != nil {
		return "", err
	}
	return compactJSON(v), nil
}

// compactJSON is v as JSON without insignificant whitespace, object keys
// in their order.
func compactJSON(v any) string {
	var b strings.Builder
	writeCompact(&b, v)
	return b.String()
}

// writeCompactObject writes vals as a JSON object, its members in the
// order of keys.
func writeCompactObject(b *strings.Builder, keys []string, vals map[string]any) {
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeCompact(b, k)
		b.WriteByte(':')
		writeCompact(b, vals[k])
	}
	b.WriteByte('}')
}

func writeCompact(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case json.Number:
		b.WriteString(string(t))
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e15 {
			b.WriteString(strconv.FormatInt(int64(t), 10))
		} else {
			b.WriteString(strconv.FormatFloat(t, 'g', -1, 64))
		}
	case string:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(t) // a string always encodes
		b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCompact(b, e)
		}
		b.WriteByte(']')
	case *object:
		writeCompactObject(b, t.keys, t.vals)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		writeCompactObject(b, keys, t)
	default:
		out, _ := json.Marshal(t)
		b.Write(out)
	}
}
