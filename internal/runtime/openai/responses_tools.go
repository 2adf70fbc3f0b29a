package openai

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// What the model sees of a Responses request's tools:
//
//   - a function tool, as it is;
//   - a namespace (Codex's multi_agent_v1, the Agents SDK's
//     toolNamespace): each of its function tools, under the flat name
//     FlatToolName(namespace, name) and with the namespace's description
//     before its own. The model's calls of a flat name come back as
//     function_call items that name the namespace and the function apart
//     ({"namespace": "multi_agent_v1", "name": "spawn_agent"}), as
//     OpenAI's API writes them and Codex dispatches them; a function_call
//     input item naming a namespace renders under the flat name again;
//   - a built-in tool (web_search, file_search, code_interpreter, mcp,
//     custom, …), which this server does not run: left out, and named in
//     Dropped so the server can say so (X-Kvpilot-Tools-Dropped). Asking
//     for one by tool_choice is a 400 naming tool_choice.
//
// Any other type is a 400 naming tools.

// NamespaceSeparator joins a namespace and its function's name into the
// name the model sees. "__" rather than "." keeps the name within the
// characters OpenAI allows in a function name ([a-zA-Z0-9_-]), the names
// templates and models are used to.
const NamespaceSeparator = "__"

// FlatToolName is the name the model sees for function name of namespace
// ns (name itself outside a namespace).
func FlatToolName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + NamespaceSeparator + name
}

// builtinTools are the tool types OpenAI runs itself, or that name tools
// with a format other than a JSON-schema function (custom's free-form
// grammar, local_shell's and apply_patch's own items): none runs here.
var builtinTools = []string{
	"web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
	"file_search", "code_interpreter", "image_generation", "computer_use_preview", "computer_use",
	"local_shell", "shell", "apply_patch", "mcp", "custom", "tool_search",
}

// QualifiedName is a function's namespace and own name.
type QualifiedName struct{ Namespace, Name string }

// responseTools is what resolveTools made of "tools".
type responseTools struct {
	// functions are the tools the model sees, namespaced ones flattened.
	functions []ResponseTool
	// qualified maps the flat name of a namespaced function to its parts.
	qualified map[string]QualifiedName
	// dropped are the built-in tools, as "type" or "type:name".
	dropped []string
}

// resolveTools flattens namespaces and drops built-in tools, refusing
// what fits neither with a 400 naming the tool.
func resolveTools(tools []ResponseTool) (responseTools, *Error) {
	var out responseTools
	seen := map[string]string{} // flat name → the path of the tool that has it
	add := func(t ResponseTool, ns, path string) *Error {
		switch {
		case !isAbsent(t.Parameters) && bytes.TrimSpace(t.Parameters)[0] != '{':
			return BadRequest("tools", "%s.parameters must be a JSON schema object", path)
		case !functionName.MatchString(FlatToolName(ns, t.Name)):
			if ns != "" {
				return BadRequest("tools", "%s.name %q: in namespace %q the model sees it as %q, which must be 1 to 64 letters, digits, '_', '.' or '-'",
					path, t.Name, ns, FlatToolName(ns, t.Name))
			}
			return BadRequest("tools", "%s.name %q: want 1 to 64 letters, digits, '_', '.' or '-'", path, t.Name)
		}
		own, flat := t.Name, FlatToolName(ns, t.Name)
		if other, ok := seen[flat]; ok {
			return BadRequest("tools", "%s: the model would see it as %q, the name of %s too", path, flat, other)
		}
		seen[flat] = path
		t.Name = flat
		out.functions = append(out.functions, t)
		if ns != "" {
			if out.qualified == nil {
				out.qualified = map[string]QualifiedName{}
			}
			out.qualified[flat] = QualifiedName{Namespace: ns, Name: own}
		}
		return nil
	}
	dropped := func(t ResponseTool, ns string) string {
		if t.Name == "" {
			return t.Type
		}
		return t.Type + ":" + FlatToolName(ns, t.Name)
	}
	for i, t := range tools {
		path := "tools[" + strconv.Itoa(i) + "]"
		switch {
		case t.Type == "function":
			if err := add(t, "", path); err != nil {
				return responseTools{}, err
			}
		case t.Type == "namespace":
			if !functionName.MatchString(t.Name) {
				return responseTools{}, BadRequest("tools", "%s.name %q: a namespace needs a name of 1 to 64 letters, digits, '_', '.' or '-'", path, t.Name)
			}
			for j, m := range t.Tools {
				mpath := path + ".tools[" + strconv.Itoa(j) + "]"
				switch {
				case m.Type == "function":
					if t.Description != "" {
						m.Description = strings.TrimSpace(t.Description + "\n\n" + m.Description)
					}
					if err := add(m, t.Name, mpath); err != nil {
						return responseTools{}, err
					}
				case m.Type == "custom":
					out.dropped = append(out.dropped, dropped(m, t.Name))
				default:
					return responseTools{}, BadRequest("tools", "%s.type %q is not supported in a namespace: want function (or custom, which does not run here)", mpath, m.Type)
				}
			}
		case slices.Contains(builtinTools, t.Type):
			out.dropped = append(out.dropped, dropped(t, ""))
		default:
			return responseTools{}, BadRequest("tools", "%s.type %q is not supported: want function, namespace, or a built-in tool (which does not run here)", path, t.Type)
		}
	}
	return out, nil
}

// Qualified is the namespace and own name of the function the model
// called by name; a function outside a namespace is itself.
func (r *ResponsesRequest) Qualified(name string) QualifiedName {
	if q, ok := r.tools.qualified[name]; ok {
		return q
	}
	return QualifiedName{Name: name}
}

// chatToolChoice translates a Responses tool_choice into the chat form.
// A named function may name its namespace apart (as a function_call item
// does) or go by its flat name.
func (r *ResponsesRequest) chatToolChoice() (json.RawMessage, *Error) {
	var s string
	if json.Unmarshal(r.ToolChoice, &s) == nil {
		return r.ToolChoice, nil // none, auto, required: checked as the chat field
	}
	var named struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if err := json.Unmarshal(r.ToolChoice, &named); err != nil {
		return nil, BadRequest("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "name": …}`)
	}
	switch {
	case slices.Contains(builtinTools, named.Type):
		return nil, BadRequest("tool_choice", "tool_choice names the built-in tool type %q, which does not run on this server (it is left out of the tools the model sees)", named.Type)
	case named.Type != "function" || named.Name == "":
		return nil, BadRequest("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "name": …}; allowed_tools is not supported`)
	}
	out, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": FlatToolName(named.Namespace, named.Name)}})
	return out, nil
}

// Reasoning efforts and summaries OpenAI defines.
var (
	reasoningEfforts   = []string{"none", "minimal", "low", "medium", "high", "xhigh"}
	reasoningSummaries = []string{"auto", "concise", "detailed", "none"}
)

// check refuses values OpenAI does not define, naming the field.
func (p *ReasoningParam) check() *Error {
	switch {
	case p == nil:
	case p.Effort != nil && !slices.Contains(reasoningEfforts, *p.Effort):
		return BadRequest("reasoning.effort", "reasoning.effort %q: want one of %s", *p.Effort, strings.Join(reasoningEfforts, ", "))
	case p.Summary != nil && !slices.Contains(reasoningSummaries, *p.Summary):
		return BadRequest("reasoning.summary", "reasoning.summary %q: want one of %s", *p.Summary, strings.Join(reasoningSummaries, ", "))
	}
	return nil
}

// templateKwargs are the chat template's variables: the request's own,
// and reasoning.effort (effortKwargs).
func (r *ResponsesRequest) templateKwargs() TemplateKwargs {
	if r.Reasoning == nil || r.Reasoning.Effort == nil {
		return r.ChatTemplateKwargs
	}
	return effortKwargs(r.ChatTemplateKwargs, *r.Reasoning.Effort)
}

// effortKwargs adds a reasoning effort to a request's template variables:
// as reasoning_effort (gpt-oss's templates read it), and effort none as
// enable_thinking false too (Qwen3's, GLM's and DeepSeek's switch, so a
// model that thinks does not), each unless the request set that
// variable itself. A template that reads neither renders as before.
func effortKwargs(in TemplateKwargs, effort string) TemplateKwargs {
	kw := make(TemplateKwargs, len(in)+2)
	for k, v := range in {
		kw[k] = v
	}
	if _, ok := kw["reasoning_effort"]; !ok {
		kw["reasoning_effort"], _ = json.Marshal(effort)
	}
	if _, ok := kw["enable_thinking"]; !ok && effort == "none" {
		kw["enable_thinking"] = json.RawMessage("false")
	}
	return kw
}

// includeChanges are the include values OpenAI defines, each with what it
// would add here: "" for a part of an item this server never produces
// (there is nothing to include), else why it is refused.
var includeChanges = map[string]string{
	"reasoning.encrypted_content":           "",
	"web_search_call.results":               "",
	"web_search_call.action.sources":        "",
	"file_search_call.results":              "",
	"code_interpreter_call.outputs":         "",
	"computer_call_output.output.image_url": "",
	"message.input_image.image_url":         "",
	"message.output_text.logprobs":          "logprobs are not supported on /v1/responses",
}

// checkInclude accepts an include value that asks for nothing here and
// refuses the others, naming include.
func checkInclude(v string) *Error {
	why, known := includeChanges[v]
	switch {
	case !known:
		return BadRequest("include", "include %q is not a value OpenAI defines", v)
	case why != "":
		return BadRequest("include", "include %q is not supported: %s", v, why)
	}
	return nil
}
