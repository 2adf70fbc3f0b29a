package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
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
	"strict": true,
}

// handledKeywords are the keywords the compiler enforces.
var handledKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"minItems": true, "maxItems": true, "enum": true, "const": true, "anyOf": true, "oneOf": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true, "$ref": true,
}

// Limits that keep the automaton finite and decoding terminating.
const (
	maxWhitespace = 8  // whitespace bytes between tokens
	maxIntDigits  = 16 // digits of an integer part
	maxFracDigits = 16
	// maxAnyDepth is the nesting depth of values a schema leaves open
	// ({}, json_object, additionalProperties: true).
	maxAnyDepth = 4
)

// object is a JSON object with its key order.
type object struct {
	keys []string
	vals map[string]any
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
	if _, err := dec.Token(); err == nil {
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
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
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

// JSONSchema compiles a JSON schema: the output is one JSON document it
// accepts. The subset: type (one or a list), properties, required,
// additionalProperties (false, true or a schema; absent means false when
// properties are given, as in OpenAI's strict mode), items, minItems,
// maxItems, enum, const, anyOf, oneOf (as anyOf: exclusivity is not
// checked), minLength, maxLength, pattern, format (date, time, date-time,
// uuid, email), local $ref to $defs or definitions (not recursive).
// Annotations (title, description, default, examples…) are ignored; any
// other keyword is refused with a *SchemaError naming it. Properties are
// generated in the schema's order; whitespace between tokens is bounded.
func JSONSchema(schema []byte) (*Grammar, error) {
	n, err := schemaNode(schema)
	if err != nil {
		return nil, err
	}
	return newGrammar(n)
}

// schemaNode is JSONSchema's expression, for building larger grammars.
func schemaNode(schema []byte) (*node, error) {
	v, err := parseOrdered(schema)
	if err != nil {
		return nil, &SchemaError{Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	c := &schemaConv{root: v, refs: map[string]bool{}}
	n := c.conv(v, "#")
	if c.err != nil {
		return nil, c.err
	}
	return n, nil
}

// AnyJSONObject is response_format json_object: one JSON object, with
// values nested at most maxAnyDepth deep.
func AnyJSONObject() *Grammar {
	g, err := newGrammar(anyObject(maxAnyDepth))
	if err != nil {
		panic(err) // a fixed grammar: cannot fail
	}
	return g
}

type schemaConv struct {
	root any
	refs map[string]bool // refs being expanded (recursion check)
	err  error
}

func (c *schemaConv) fail(path, keyword, format string, args ...any) *node {
	if c.err == nil {
		c.err = &SchemaError{Path: path, Keyword: keyword, Reason: fmt.Sprintf(format, args...)}
	}
	return empty
}

func (c *schemaConv) conv(v any, path string) *node {
	if c.err != nil {
		return empty
	}
	switch t := v.(type) {
	case bool:
		if t {
			return anyValue(maxAnyDepth)
		}
		return c.fail(path, "", "false schema accepts nothing")
	case *object:
		return c.convObject(t, path)
	}
	return c.fail(path, "", "a schema must be an object or a boolean")
}

func (c *schemaConv) convObject(s *object, path string) *node {
	for _, k := range s.keys {
		if !handledKeywords[k] && !ignoredKeywords[k] {
			return c.fail(path, k, "is not supported by constrained decoding")
		}
	}
	if ref, ok := s.vals["$ref"]; ok {
		return c.convRef(ref, path)
	}
	if v, ok := s.vals["const"]; ok {
		return lit(compactJSON(v))
	}
	if v, ok := s.vals["enum"]; ok {
		l, ok := v.([]any)
		if !ok || len(l) == 0 {
			return c.fail(path, "enum", "must be a non-empty array")
		}
		parts := make([]*node, len(l))
		for i, e := range l {
			parts[i] = lit(compactJSON(e))
		}
		return alt(parts...)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if v, ok := s.vals[kw]; ok {
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return c.fail(path, kw, "must be a non-empty array")
			}
			parts := make([]*node, len(l))
			for i, sub := range l {
				parts[i] = c.conv(sub, fmt.Sprintf("%s/%s/%d", path, kw, i))
			}
			return alt(parts...)
		}
	}
	var types []string
	switch t := s.vals["type"].(type) {
	case nil:
		// Untyped: infer from the keywords present, else any value.
		switch {
		case s.vals["properties"] != nil || s.vals["additionalProperties"] != nil:
			types = []string{"object"}
		case s.vals["items"] != nil:
			types = []string{"array"}
		default:
			return anyValue(maxAnyDepth)
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

func (c *schemaConv) convRef(ref any, path string) *node {
	r, ok := ref.(string)
	if !ok {
		return c.fail(path, "$ref", "must be a string")
	}
	if c.refs[r] {
		return c.fail(path, "$ref", "%q is recursive; recursive schemas are not supported", r)
	}
	var target any = c.root
	if r != "#" {
		if !strings.HasPrefix(r, "#/") {
			return c.fail(path, "$ref", "%q: only local references (#/...) are supported", r)
		}
		for _, part := range strings.Split(r[2:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			o, ok := target.(*object)
			if !ok {
				return c.fail(path, "$ref", "%q does not resolve", r)
			}
			if target, ok = o.vals[part]; !ok {
				return c.fail(path, "$ref", "%q does not resolve", r)
			}
		}
	} else {
		return c.fail(path, "$ref", "%q is recursive; recursive schemas are not supported", r)
	}
	c.refs[r] = true
	n := c.conv(target, r)
	delete(c.refs, r)
	return n
}

func (c *schemaConv) intKeyword(s *object, path, kw string, def int) int {
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
// minItems/maxItems): lo defaults to 0, hi to -1 (no bound). It fails when
// lo exceeds hi or either is above maxRepeat.
func (c *schemaConv) countBounds(s *object, path, minKw, maxKw string) (lo, hi int, ok bool) {
	lo = c.intKeyword(s, path, minKw, 0)
	hi = c.intKeyword(s, path, maxKw, -1)
	if hi >= 0 && lo > hi {
		c.fail(path, minKw, "is more than %s", maxKw)
		return 0, 0, false
	}
	if lo > maxRepeat || hi > maxRepeat {
		c.fail(path, maxKw, "above %d is not supported", maxRepeat)
		return 0, 0, false
	}
	return lo, hi, true
}

func (c *schemaConv) convType(s *object, t, path string) *node {
	switch t {
	case "null":
		return lit("null")
	case "boolean":
		return alt(lit("true"), lit("false"))
	case "integer":
		return integer()
	case "number":
		return number()
	case "string":
		return c.convString(s, path)
	case "array":
		return c.convArray(s, path)
	case "object":
		return c.convObjectType(s, path)
	}
	return c.fail(path, "type", "unknown type %q", t)
}

func (c *schemaConv) convString(s *object, path string) *node {
	minLen, maxLen, ok := c.countBounds(s, path, "minLength", "maxLength")
	if !ok {
		return empty
	}
	if p, ok := s.vals["pattern"]; ok {
		if _, has := s.vals["format"]; has {
			return c.fail(path, "format", "together with pattern is not supported")
		}
		ps, ok := p.(string)
		if !ok {
			return c.fail(path, "pattern", "must be a string")
		}
		if minLen > 0 || maxLen >= 0 {
			return c.fail(path, "pattern", "together with minLength/maxLength is not supported")
		}
		return c.quotedRegex(path, "pattern", ps)
	}
	if f, ok := s.vals["format"]; ok {
		fs, _ := f.(string)
		pat, ok := formats[fs]
		if !ok {
			return c.fail(path, "format", "%q is not supported (supported: date, time, date-time, uuid, email)", fs)
		}
		return c.quotedRegex(path, "format", pat)
	}
	return concat(oneByte('"'), repeat(stringChar(), minLen, maxLen), oneByte('"'))
}

// quotedRegex is a JSON string whose contents match the regular expression
// pat (keyword kw's), escapes excluded.
func (c *schemaConv) quotedRegex(path, kw, pat string) *node {
	n, err := regexNode(pat, jsonSafe)
	if err != nil {
		return c.fail(path, kw, "%v", err)
	}
	return concat(oneByte('"'), n, oneByte('"'))
}

var formats = map[string]string{
	"date":      `[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])`,
	"time":      `([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?`,
	"date-time": `[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`,
	"uuid":      `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
	"email":     `[a-zA-Z0-9._%+-]{1,64}@[a-zA-Z0-9-]{1,63}(\.[a-zA-Z0-9-]{1,63}){1,8}`,
}

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

func (c *schemaConv) convArray(s *object, path string) *node {
	minItems, maxItems, ok := c.countBounds(s, path, "minItems", "maxItems")
	if !ok {
		return empty
	}
	item := anyValue(maxAnyDepth - 1)
	if it, ok := s.vals["items"]; ok {
		if _, isList := it.([]any); isList {
			return c.fail(path, "items", "as an array (tuple validation) is not supported; use prefixItems-free schemas")
		}
		item = c.conv(it, path+"/items")
	}
	return arrayOf(item, minItems, maxItems)
}

func arrayOf(item *node, minItems, maxItems int) *node {
	open, close := concat(oneByte('['), wsNode()), concat(wsNode(), oneByte(']'))
	more := concat(wsNode(), oneByte(','), wsNode(), item)
	var body *node
	switch {
	case maxItems == 0:
		body = empty
	case minItems == 0:
		rest := star(more)
		if maxItems > 0 {
			rest = repeat(more, 0, maxItems-1)
		}
		body = opt(concat(item, rest))
	default:
		maxRest := -1
		if maxItems > 0 {
			maxRest = maxItems - 1
		}
		body = concat(item, repeat(more, minItems-1, maxRest))
	}
	return concat(open, body, close)
}

func (c *schemaConv) convObjectType(s *object, path string) *node {
	props, _ := s.vals["properties"].(*object)
	if _, ok := s.vals["properties"]; ok && props == nil {
		return c.fail(path, "properties", "must be an object")
	}
	required := map[string]bool{}
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
			if props == nil || props.vals[name] == nil {
				return c.fail(path, "required", "names %q, which is not in properties", name)
			}
			required[name] = true
		}
	}
	// additionalProperties: absent means false when properties are given
	// (strict), any value otherwise.
	var extra *node
	switch ap := s.vals["additionalProperties"].(type) {
	case nil:
		if props == nil {
			extra = anyValue(maxAnyDepth - 1)
		}
	case bool:
		if ap {
			extra = anyValue(maxAnyDepth - 1)
		}
	default:
		extra = c.conv(ap, path+"/additionalProperties")
	}
	var names []string
	var values []*node
	if props != nil {
		for _, name := range props.keys {
			names = append(names, name)
			values = append(values, c.conv(props.vals[name], path+"/properties/"+name))
		}
	}
	return objectOf(names, values, required, extra)
}

// objectOf builds an object whose properties appear in the given order,
// required ones always and optional ones possibly not, then (when extra is
// set) any further keys with extra values.
func objectOf(names []string, values []*node, required map[string]bool, extra *node) *node {
	sep := concat(wsNode(), oneByte(','), wsNode())
	kv := func(i int) *node {
		return concat(lit(compactJSON(names[i])), wsNode(), oneByte(':'), wsNode(), values[i])
	}
	var extraKV *node
	if extra != nil {
		extraKV = concat(jsonString(), wsNode(), oneByte(':'), wsNode(), extra)
	}
	// first[i]: the members from i on, nothing emitted before; after[i]:
	// the same with a separator before each. Shared by pointer, so the
	// automaton stays linear in the number of properties.
	n := len(names)
	first := make([]*node, n+1)
	after := make([]*node, n+1)
	if extraKV != nil {
		after[n] = star(concat(sep, extraKV))
		first[n] = opt(concat(extraKV, after[n]))
	} else {
		after[n], first[n] = empty, empty
	}
	for i := n - 1; i >= 0; i-- {
		withI := concat(sep, kv(i), after[i+1])
		firstWithI := concat(kv(i), after[i+1])
		if required[names[i]] {
			after[i], first[i] = withI, firstWithI
		} else {
			after[i] = alt(withI, after[i+1])
			first[i] = alt(firstWithI, first[i+1])
		}
	}
	return concat(oneByte('{'), wsNode(), first[0], wsNode(), oneByte('}'))
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

// anyValue is any JSON value nested at most depth levels.
func anyValue(depth int) *node {
	scalars := []*node{jsonString(), number(), lit("true"), lit("false"), lit("null")}
	if depth <= 0 {
		return alt(scalars...)
	}
	return alt(append(scalars, anyObject(depth), arrayOf(anyValue(depth-1), 0, -1))...)
}

func anyObject(depth int) *node {
	return objectOf(nil, nil, nil, anyValue(depth-1))
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
