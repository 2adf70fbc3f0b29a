package grammar

import (
	"encoding/json"
	"fmt"
)

// ToolSpec is a tool the output may call.
type ToolSpec struct {
	Name string
	// Parameters is the arguments' JSON schema; empty means any object.
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

// ToolCalls compiles "the output is tool calls": exactly one call of one
// of tools, or with parallel one or more. Arguments follow each tool's
// parameters schema.
func ToolCalls(f ToolCallFormat, tools []ToolSpec, parallel bool) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("no tools to call")
	}
	calls := make([]*node, len(tools))
	for i, t := range tools {
		args := anyObject(maxAnyDepth)
		if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
			n, err := schemaNode(t.Parameters)
			if err != nil {
				return nil, &ToolError{Index: i, Err: err}
			}
			args = n
		}
		calls[i] = concat(lit(f.Prefix), lit(`{"name": `+compactJSON(t.Name)+`, "`+f.ArgsKey+`": `), args, lit("}"), lit(f.Suffix))
	}
	call := alt(calls...)
	body := call
	if parallel {
		body = concat(call, star(concat(lit(f.Separator), call)))
	}
	return newGrammar(concat(lit(f.Open), body, lit(f.Close)))
}
