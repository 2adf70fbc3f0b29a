package openai

import (
	"bytes"
	"encoding/json"
	"regexp"
)

// Tool is one entry of "tools" as the client sent it.
type Tool struct {
	Type     string       `json:"type"`
	Function *FunctionDef `json:"function"`
	// Raw is the whole object, handed to the chat template unchanged.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw object.
func (t *Tool) UnmarshalJSON(b []byte) error {
	type plain Tool
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*t = Tool(p)
	t.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// FunctionDef is a function tool (also a legacy "functions" entry).
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolFields are the chat request's tool-calling fields.
type ToolFields struct {
	Tools             []Tool          `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// Legacy function calling.
	Functions    []FunctionDef   `json:"functions"`
	FunctionCall json.RawMessage `json:"function_call"`
}

// Tool choices.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceNamed    = "named"
)

// ToolPlan is what a request asks of tool calling.
type ToolPlan struct {
	// Tools are the callable tools (legacy functions included).
	Tools []Tool
	// Choice is none, auto, required or named.
	Choice string
	// Named is the function tool_choice names.
	Named string
	// Parallel allows more than one call in a turn.
	Parallel bool
	// Legacy: the request used functions / function_call; the answer uses
	// message.function_call.
	Legacy bool
}

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// Resolve validates the tool fields: nil when the request has no tools; a
// 400 naming the field for what the server cannot honour.
func (f *ToolFields) Resolve() (*ToolPlan, *Error) {
	plan := &ToolPlan{Choice: ToolChoiceAuto, Parallel: true}
	if f.ParallelToolCalls != nil {
		plan.Parallel = *f.ParallelToolCalls
	}
	switch {
	case len(f.Tools) > 0 && len(f.Functions) > 0:
		return nil, BadRequest("functions", "give tools or the legacy functions, not both")
	case len(f.Functions) > 0:
		plan.Legacy = true
		plan.Parallel = false
		for i, fn := range f.Functions {
			raw, _ := json.Marshal(map[string]any{"type": "function", "function": fn})
			plan.Tools = append(plan.Tools, Tool{Type: "function", Function: &f.Functions[i], Raw: raw})
		}
		if !isAbsent(f.ToolChoice) {
			return nil, BadRequest("tool_choice", "tool_choice goes with tools; with functions use function_call")
		}
	default:
		for i, t := range f.Tools {
			switch {
			case t.Type != "function":
				return nil, BadRequest("tools", "tools[%d].type %q is not supported; only \"function\"", i, t.Type)
			case t.Function == nil:
				return nil, BadRequest("tools", "tools[%d].function is required", i)
			}
			plan.Tools = append(plan.Tools, t)
		}
		if !isAbsent(f.FunctionCall) {
			return nil, BadRequest("function_call", "function_call goes with functions; with tools use tool_choice")
		}
	}
	seen := map[string]bool{}
	for i, t := range plan.Tools {
		param := "tools"
		if plan.Legacy {
			param = "functions"
		}
		if !functionName.MatchString(t.Function.Name) {
			return nil, BadRequest(param, "%s[%d] name %q: want 1 to 64 letters, digits, '_', '.' or '-'", param, i, t.Function.Name)
		}
		if seen[t.Function.Name] {
			return nil, BadRequest(param, "%s[%d]: two tools are named %q", param, i, t.Function.Name)
		}
		seen[t.Function.Name] = true
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && p[0] != '{' && string(p) != "null" {
			return nil, BadRequest(param, "%s[%d].parameters must be a JSON schema object", param, i)
		}
	}

	choice, param := f.ToolChoice, "tool_choice"
	if plan.Legacy {
		choice, param = f.FunctionCall, "function_call"
	}
	if isAbsent(choice) {
		if len(plan.Tools) == 0 {
			return nil, nil
		}
		return plan, nil
	}
	var s string
	if json.Unmarshal(choice, &s) == nil {
		switch s {
		case ToolChoiceNone, ToolChoiceAuto:
			plan.Choice = s
		case ToolChoiceRequired:
			if plan.Legacy {
				return nil, BadRequest(param, "function_call %q: want none, auto or {\"name\": …}", s)
			}
			plan.Choice = s
		default:
			return nil, BadRequest(param, "%s %q: want none, auto, required or a named function", param, s)
		}
	} else {
		var named struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(choice, &named); err != nil {
			return nil, BadRequest(param, "%s must be a string or an object naming a function", param)
		}
		name := named.Name
		if !plan.Legacy {
			if named.Type != "function" || named.Function == nil {
				return nil, BadRequest(param, `tool_choice object must be {"type": "function", "function": {"name": …}}`)
			}
			name = named.Function.Name
		}
		if !seen[name] {
			return nil, BadRequest(param, "%s names function %q, which is not among the request's tools", param, name)
		}
		plan.Choice, plan.Named = ToolChoiceNamed, name
	}
	if len(plan.Tools) == 0 && plan.Choice != ToolChoiceNone {
		return nil, BadRequest(param, "%s is set but the request has no tools", param)
	}
	if len(plan.Tools) == 0 {
		return nil, nil
	}
	return plan, nil
}

// ToolCall is a call in a response message.
type ToolCall struct {
	// Index is set in streamed deltas only.
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is a call's function and its JSON-text arguments.
type ToolCallFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// FunctionCall is the legacy message.function_call.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
