package chatformat

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// paramTypes returns the JSON schema types of a tool's parameters, by
// parameter name: formats that write argument values as untyped text
// (Qwen3-Coder's and GLM's XML) are converted with them, as vLLM's
// parsers do. A parameter the schema leaves untyped maps to "".
func paramTypes(tools []Tool, name string) map[string][]string {
	for _, t := range tools {
		if t.Name != name {
			continue
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(t.Parameters, &schema) != nil {
			return nil
		}
		out := make(map[string][]string, len(schema.Properties))
		for k, raw := range schema.Properties {
			out[k] = schemaTypes(raw)
		}
		return out
	}
	return nil
}

// schemaTypes is a property schema's types: its "type" (one or a list),
// or those of its anyOf/oneOf branches.
func schemaTypes(raw json.RawMessage) []string {
	var s struct {
		Type  json.RawMessage   `json:"type"`
		AnyOf []json.RawMessage `json:"anyOf"`
		OneOf []json.RawMessage `json:"oneOf"`
		Enum  []any             `json:"enum"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	var one string
	var many []string
	switch {
	case json.Unmarshal(s.Type, &one) == nil:
		return []string{one}
	case json.Unmarshal(s.Type, &many) == nil:
		return many
	}
	var out []string
	for _, b := range append(s.AnyOf, s.OneOf...) {
		out = append(out, schemaTypes(b)...)
	}
	if len(out) == 0 && len(s.Enum) > 0 {
		// An enum without a type: strings when all its values are, as
		// the forced-call grammar writes them raw.
		for _, v := range s.Enum {
			if _, ok := v.(string); !ok {
				return nil
			}
		}
		return []string{"string"}
	}
	return out
}

// typedValue is the JSON of an argument value written as text: kept as a
// string when the schema allows a string (or the parameter is unknown),
// else read as the JSON value the schema's type asks for; text that does
// not read as one is kept as a string rather than lost.
func typedValue(text string, types []string, known bool) []byte {
	str := func() []byte { return jsonString(text) }
	if !known {
		return str()
	}
	if len(types) == 0 {
		// Untyped: a JSON value when the text is one.
		if t := strings.TrimSpace(text); t != "" && json.Valid([]byte(t)) {
			return compactJSON(t)
		}
		return str()
	}
	for _, t := range types {
		if t == "string" {
			return str()
		}
	}
	t := strings.TrimSpace(text)
	for _, ty := range types {
		switch ty {
		case "null":
			if t == "null" || t == "None" {
				return []byte("null")
			}
		case "integer":
			if _, err := strconv.ParseInt(t, 10, 64); err == nil {
				return []byte(t)
			}
		case "number":
			if f, err := strconv.ParseFloat(t, 64); err == nil && json.Valid([]byte(t)) {
				_ = f
				return []byte(t)
			}
		case "boolean":
			switch strings.ToLower(t) {
			case "true", "false":
				return []byte(strings.ToLower(t))
			}
		default: // object, array
			if json.Valid([]byte(t)) {
				return compactJSON(t)
			}
		}
	}
	return str()
}

func compactJSON(t string) []byte {
	var b bytes.Buffer
	if json.Compact(&b, []byte(t)) != nil {
		return []byte(t)
	}
	return b.Bytes()
}

// argsWriter writes a call's arguments object one argument at a time.
type argsWriter struct {
	types map[string][]string
	n     int
}

// arg is the JSON text that adds key's value to the object.
func (w *argsWriter) arg(key, value string) []byte {
	var b []byte
	if w.n == 0 {
		b = append(b, '{')
	} else {
		b = append(b, ", "...)
	}
	w.n++
	b = append(b, jsonString(key)...)
	b = append(b, ": "...)
	types, known := w.types[key]
	if w.types == nil {
		// A tool the request does not list, or one without properties:
		// each value is read as JSON when it is JSON.
		known = true
	}
	return append(b, typedValue(value, types, known)...)
}

// end closes the object.
func (w *argsWriter) end() []byte {
	if w.n == 0 {
		return []byte("{}")
	}
	return []byte("}")
}

// jsonString is s as a JSON string, with <, > and & as themselves (the
// values are code and markup, read by people in the clients' logs).
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}
