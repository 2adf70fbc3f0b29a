package grammar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// XMLToolCallFormat is how a model writes tool calls with one tag pair per
// argument (Qwen3-Coder's and Qwen3.5's <function=…><parameter=…>, GLM's
// <arg_key>/<arg_value>): each call is Open + name + NameEnd, then per
// argument ArgOpen + key + ArgKeyEnd + value + ArgClose, then Close;
// calls are joined by Separator. A string argument's value is its raw
// text, which may not contain ValueTag (the tag that closes a value);
// other values are JSON.
type XMLToolCallFormat struct {
	Open, NameEnd, ArgOpen, ArgKeyEnd, ArgClose, Close, Separator string
	ValueTag                                                      string
}

// CompileXMLToolCalls compiles "the output is tool calls" written in f:
// exactly one call of one of tools, or with parallel one or more. The
// arguments are the tool's schema properties in the schema's order, the
// required ones always and the others optionally; each value follows its
// property's schema (compiled leniently: the keywords it cannot enforce
// are dropped and returned, as are a string's assertions other than its
// length and enum, its text being free). A tool whose schema lists no properties takes any arguments. It
// stops with ctx's error when ctx ends.
func CompileXMLToolCalls(ctx context.Context, f XMLToolCallFormat, tools []ToolSpec, parallel bool) (*Grammar, []string, error) {
	if len(tools) == 0 {
		return nil, nil, fmt.Errorf("no tools to call")
	}
	text, err := textWithout(f.ValueTag)
	if err != nil {
		return nil, nil, err
	}
	droppedSet := map[string]bool{}
	floor := &stateFloor{}
	calls := make([]*node, len(tools))
	for i, t := range tools {
		args, dropped, err := xmlArgumentsNode(ctx, f, t.Parameters, text, floor)
		if errors.Is(err, ErrTooLarge) {
			return nil, nil, err
		}
		if err != nil {
			return nil, nil, &ToolError{Index: i, Err: err}
		}
		for _, d := range dropped {
			droppedSet[d] = true
		}
		calls[i] = concat(lit(f.Open+t.Name+f.NameEnd), args, lit(f.Close))
	}
	call := alt(calls...)
	body := call
	if parallel {
		body = concat(call, star(concat(lit(f.Separator), call)))
	}
	g, err := newGrammar(ctx, body)
	if err != nil {
		return nil, nil, schemaCompileError(err)
	}
	return g, sortedSet(droppedSet), nil
}

// xmlArgumentsNode is a call's arguments in f.
func xmlArgumentsNode(ctx context.Context, f XMLToolCallFormat, params []byte, text *node, floor *stateFloor) (*node, []string, error) {
	anyArgs := func() *node {
		key := repeat(charExcept('<', '>', '\n'), 1, -1)
		return star(concat(lit(f.ArgOpen), key, lit(f.ArgKeyEnd), text, lit(f.ArgClose)))
	}
	props, required, err := toolParameters(params)
	if err != nil {
		return nil, nil, err
	}
	if props == nil {
		return anyArgs(), nil, nil
	}
	var parts []*node
	var dropped []string
	for _, k := range props.keys {
		val, d, err := xmlValueNode(ctx, props.vals[k], text, floor)
		if err != nil {
			return nil, nil, fmt.Errorf("properties.%s: %w", k, err)
		}
		dropped = append(dropped, d...)
		arg := concat(lit(f.ArgOpen+k+f.ArgKeyEnd), val, lit(f.ArgClose))
		if !required[k] {
			arg = opt(arg)
		}
		parts = append(parts, arg)
	}
	return concat(parts...), dropped, nil
}

// xmlValueNode is one argument's value: raw text for a string (one of its
// enum's strings when it has one), JSON following the schema otherwise.
func xmlValueNode(ctx context.Context, schema any, text *node, floor *stateFloor) (*node, []string, error) {
	s, ok := schema.(*object)
	if !ok || !stringSchema(s) {
		return valueNode(ctx, schema, SchemaOptions{Lenient: true}, floor)
	}
	if enum, ok := s.vals["enum"].([]any); ok && len(enum) > 0 {
		var alts []*node
		for _, e := range enum {
			if str, ok := e.(string); ok {
				alts = append(alts, lit(str))
			}
		}
		if len(alts) > 0 {
			return alt(alts...), nil, nil
		}
	}
	var dropped []string
	minLen, maxLen := 0, -1
	for _, k := range s.keys {
		switch k {
		case "type", "description", "title", "default", "examples", "enum":
		case "minLength", "maxLength":
			n, ok := s.vals[k].(json.Number)
			v, err := n.Int64()
			if !ok || err != nil || v < 0 || v > maxCountedLength {
				dropped = append(dropped, k)
				continue
			}
			if k == "minLength" {
				minLen = int(v)
			} else {
				maxLen = int(v)
			}
		default:
			dropped = append(dropped, k)
		}
	}
	if minLen > 0 || maxLen >= 0 {
		// Counted in characters of the text.
		return lengthOf(text, minLen, maxLen), dropped, nil
	}
	return text, dropped, nil
}

// maxCountedLength bounds the minLength and maxLength a raw string value
// is held to: the automaton has a state per count.
const maxCountedLength = 4096

// stringSchema reports a schema of strings: type string, or an enum of
// strings alone with no type (the template writes its value raw, and the
// reader keeps it a string).
func stringSchema(s *object) bool {
	if t, ok := s.vals["type"]; ok {
		return t == "string"
	}
	enum, ok := s.vals["enum"].([]any)
	if !ok || len(enum) == 0 {
		return false
	}
	for _, e := range enum {
		if _, ok := e.(string); !ok {
			return false
		}
	}
	return true
}

// textWithout is any text that does not contain tag. Text is runs of
// characters other than tag's first, and of proper prefixes of tag each
// followed by a character that does not continue it (or by another
// prefix); it may end in prefixes. This is exact when tag's first
// character occurs nowhere else in it, as in a closing tag.
func textWithout(tag string) (*node, error) {
	if len(tag) < 2 || slices.Contains([]byte(tag[1:]), tag[0]) {
		return nil, fmt.Errorf("value tag %q: its first character must not recur in it", tag)
	}
	first := tag[0]
	prefixes := make([]*node, 0, len(tag)-1)
	broken := make([]*node, 0, len(tag)-1)
	for k := 1; k < len(tag); k++ {
		prefixes = append(prefixes, lit(tag[:k]))
		broken = append(broken, concat(lit(tag[:k]), charExcept(tag[k], first)))
	}
	anyPrefix := alt(prefixes...)
	segment := alt(charExcept(first), concat(star(anyPrefix), alt(broken...)))
	return concat(star(segment), star(anyPrefix)), nil
}

// charExcept is one UTF-8 character other than the ASCII bytes given.
func charExcept(bs ...byte) *node {
	slices.Sort(bs)
	var parts []*node
	lo := rune(0)
	for _, b := range bs {
		if rune(b) > lo {
			parts = append(parts, utf8Range(lo, rune(b)-1))
		}
		lo = rune(b) + 1
	}
	parts = append(parts, utf8Range(lo, 0x10ffff))
	return alt(parts...)
}

// HeaderToolCallFormat is how a model writes a call whose name is in a
// header and whose body is the JSON arguments (gpt-oss's harmony:
// <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}):
// each call is Open + name + NameEnd + arguments + Close, calls joined by
// Separator, the list between Begin and End (DeepSeek's and Kimi's call
// sections).
type HeaderToolCallFormat struct {
	Begin, End                      string
	Open, NameEnd, Close, Separator string
}

// CompileHeaderToolCalls compiles "the output is tool calls" written in
// f, the arguments a JSON object following each tool's schema as in
// CompileToolCalls.
func CompileHeaderToolCalls(ctx context.Context, f HeaderToolCallFormat, tools []ToolSpec, parallel bool) (*Grammar, []string, error) {
	if len(tools) == 0 {
		return nil, nil, fmt.Errorf("no tools to call")
	}
	calls := make([]*node, len(tools))
	droppedSet := map[string]bool{}
	floor := &stateFloor{}
	for i, t := range tools {
		args, dropped, err := argumentsNode(ctx, t.Parameters, floor)
		if errors.Is(err, ErrTooLarge) {
			return nil, nil, err
		}
		if err != nil {
			return nil, nil, &ToolError{Index: i, Err: err}
		}
		for _, d := range dropped {
			droppedSet[d] = true
		}
		calls[i] = concat(lit(f.Open+t.Name+f.NameEnd), args, lit(f.Close))
	}
	call := alt(calls...)
	body := call
	if parallel {
		body = concat(call, star(concat(lit(f.Separator), call)))
	}
	g, err := newGrammar(ctx, concat(lit(f.Begin), body, lit(f.End)))
	if err != nil {
		return nil, nil, schemaCompileError(err)
	}
	return g, sortedSet(droppedSet), nil
}

// toolParameters reads a tool's parameters schema as the argument shapes
// (XML, pythonic) need it: its properties in their order and the required
// ones. props is nil when the schema is absent or names no property: any
// arguments then.
func toolParameters(params []byte) (props *object, required map[string]bool, err error) {
	if isAbsentSchema(params) {
		return nil, nil, nil
	}
	v, err := parseOrdered(params)
	if err != nil {
		return nil, nil, &SchemaError{Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	o, ok := v.(*object)
	if !ok {
		return nil, nil, &SchemaError{Reason: "parameters is not a JSON object"}
	}
	props, _ = o.vals["properties"].(*object)
	if props == nil || len(props.keys) == 0 {
		return nil, nil, nil
	}
	required = map[string]bool{}
	if rs, ok := o.vals["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	return props, required, nil
}
