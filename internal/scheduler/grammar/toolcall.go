package grammar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// ToolSpec is a tool the output may call.
type ToolSpec struct {
	Name string
	// Parameters is the arguments' JSON schema; absent, null or {} mean
	// any object.
	Parameters json.RawMessage
}

// ToolCallFormat is how a model writes tool calls: each call is
// Prefix + {"name": "<name>", "<ArgsKey>": <arguments>} + Suffix, calls are
// joined by Separator, and the whole list is wrapped in Open and Close.
type ToolCallFormat struct {
	Open, Close    string
	Prefix, Suffix string
	Separator      string
	ArgsKey        string
}

// ToolError is a tool whose parameters schema cannot be compiled.
type ToolError struct {
	Index int
	Err   error
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("tools[%d].function.parameters: %v", e.Index, e.Err)
}

func (e *ToolError) Unwrap() error { return e.Err }

// ToolCalls compiles "the output is tool calls". See CompileToolCalls.
func ToolCalls(f ToolCallFormat, tools []ToolSpec, parallel bool) (*Grammar, error) {
	g, _, err := CompileToolCalls(context.Background(), f, tools, parallel)
	return g, err
}

// CompileToolCalls compiles "the output is tool calls": exactly one call
// of one of tools, or with parallel one or more. Arguments are always a
// JSON object following the tool's parameters schema, compiled leniently
// (as vLLM does): the assertion keywords it cannot enforce are dropped
// and returned. It stops with ctx's error when ctx ends.
func CompileToolCalls(ctx context.Context, f ToolCallFormat, tools []ToolSpec, parallel bool) (*Grammar, []string, error) {
	if len(tools) == 0 {
		return nil, nil, fmt.Errorf("no tools to call")
	}
	calls := make([]*node, len(tools))
	droppedSet := map[string]bool{}
	floor := &stateFloor{} // the tools' arguments go into one automaton
	for i, t := range tools {
		args, dropped, err := argumentsNode(ctx, t.Parameters, floor)
		if errors.Is(err, ErrTooLarge) {
			return nil, nil, err // the tools together, as the automaton would be
		}
		if err != nil {
			return nil, nil, &ToolError{Index: i, Err: err}
		}
		for _, d := range dropped {
			droppedSet[d] = true
		}
		calls[i] = concat(lit(f.Prefix), lit(`{"name": `+compactJSON(t.Name)+`, "`+f.ArgsKey+`": `), args, lit("}"), lit(f.Suffix))
	}
	call := alt(calls...)
	body := call
	if parallel {
		body = concat(call, star(concat(lit(f.Separator), call)))
	}
	g, err := newGrammar(ctx, concat(lit(f.Open), body, lit(f.Close)))
	if err != nil {
		return nil, nil, schemaCompileError(err)
	}
	return g, sortedSet(droppedSet), nil
}

// argumentsNode is a call's arguments: an object, whatever the schema
// leaves open. A schema that says nothing of the type ({}, only a
// description) means an object, as vLLM reads empty parameters.
func argumentsNode(ctx context.Context, params json.RawMessage, floor *stateFloor) (*node, []string, error) {
	if isAbsentSchema(params) {
		return anyObject(), nil, nil
	}
	v, err := parseOrdered(params)
	if err != nil {
		return nil, nil, &SchemaError{Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	if o, ok := v.(*object); ok && !assertions(o) {
		return anyObject(), nil, nil
	}
	if o, ok := v.(*object); ok && o.vals["type"] == nil && o.vals["$ref"] == nil && o.vals["anyOf"] == nil &&
		o.vals["oneOf"] == nil && o.vals["allOf"] == nil && o.vals["enum"] == nil && o.vals["const"] == nil {
		o.set("type", "object")
	}
	return valueNode(ctx, v, SchemaOptions{Lenient: true}, floor)
}

func isAbsentSchema(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// sortedSet is the members of set, sorted: the keywords a tool-call
// grammar dropped from its schemas, reported in a stable order.
func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
