package grammar

import (
	"context"
	"errors"
	"fmt"
)

// PythonicToolCallFormat is how a model writes tool calls as a Python
// call list (Llama 3.2 / 4 pythonic templates, LFM2):
// Begin + [name(key=value, …), …] + End. Each value is JSON, which is
// also the Python literal the model's reader takes it for (true, false
// and null read as JSON's).
type PythonicToolCallFormat struct {
	Begin, End string
}

// CompilePythonicToolCalls compiles "the output is tool calls" written in
// f: exactly one call of one of tools, or with parallel one or more. The
// keyword arguments are the tool's schema properties in the schema's
// order, the required ones always and the others optionally, joined by
// ", "; each value is JSON following its property's schema (compiled
// leniently, the keywords it cannot enforce dropped and returned). A tool
// whose schema lists no properties takes any keyword arguments. It stops
// with ctx's error when ctx ends.
func CompilePythonicToolCalls(ctx context.Context, f PythonicToolCallFormat, tools []ToolSpec, parallel bool) (*Grammar, []string, error) {
	if len(tools) == 0 {
		return nil, nil, fmt.Errorf("no tools to call")
	}
	droppedSet := map[string]bool{}
	floor := &stateFloor{}
	calls := make([]*node, len(tools))
	for i, t := range tools {
		args, dropped, err := pythonicArgumentsNode(ctx, t.Parameters, floor)
		if errors.Is(err, ErrTooLarge) {
			return nil, nil, err
		}
		if err != nil {
			return nil, nil, &ToolError{Index: i, Err: err}
		}
		for _, d := range dropped {
			droppedSet[d] = true
		}
		calls[i] = concat(lit(t.Name+"("), args, lit(")"))
	}
	call := alt(calls...)
	body := call
	if parallel {
		body = concat(call, star(concat(lit(", "), call)))
	}
	g, err := newGrammar(ctx, concat(lit(f.Begin+"["), body, lit("]"+f.End)))
	if err != nil {
		return nil, nil, schemaCompileError(err)
	}
	return g, sortedSet(droppedSet), nil
}

// pythonicArgumentsNode is a call's keyword arguments.
func pythonicArgumentsNode(ctx context.Context, params []byte, floor *stateFloor) (*node, []string, error) {
	anyArgs := func() *node {
		letter := alt(utf8Range('a', 'z'), utf8Range('A', 'Z'), lit("_"))
		key := concat(letter, star(alt(letter, utf8Range('0', '9'))))
		kw := concat(key, lit("="), anyValue())
		return opt(concat(kw, star(concat(lit(", "), kw))))
	}
	props, required, err := toolParameters(params)
	if err != nil {
		return nil, nil, err
	}
	if props == nil {
		return anyArgs(), nil, nil
	}
	var dropped []string
	args := make([]*node, len(props.keys))
	for i, k := range props.keys {
		val, d, err := valueNode(ctx, props.vals[k], SchemaOptions{Lenient: true}, floor)
		if err != nil {
			return nil, nil, fmt.Errorf("properties.%s: %w", k, err)
		}
		dropped = append(dropped, d...)
		args[i] = concat(lit(k+"="), val)
	}
	// The first argument written has no comma before it: one branch per
	// argument that may come first (those up to the first required one),
	// each followed by the later ones, each after ", ".
	var firsts []*node
	for j, k := range props.keys {
		var tail []*node
		tail = append(tail, args[j])
		for m := j + 1; m < len(props.keys); m++ {
			later := concat(lit(", "), args[m])
			if !required[props.keys[m]] {
				later = opt(later)
			}
			tail = append(tail, later)
		}
		firsts = append(firsts, concat(tail...))
		if required[k] {
			return alt(firsts...), dropped, nil
		}
	}
	// No argument is required: none at all is a call too.
	return opt(alt(firsts...)), dropped, nil
}
