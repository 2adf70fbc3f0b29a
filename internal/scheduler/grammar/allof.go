package grammar

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// maxRefChain bounds the references followed to merge one subschema.
const maxRefChain = 32

// mergeAllOf merges s's allOf subschemas and its other keywords into one
// schema, where they merge: properties unite (a property in several
// merges again), required lists unite, types and enums intersect, bounds
// take the tightest, other keywords must agree. References are followed;
// a recursive one cannot be merged. What does not merge fails naming
// allOf.
func (c *schemaConv) mergeAllOf(s *object, path *schemaPath) *object {
	return c.mergeAll(s, path, 0)
}

func (c *schemaConv) mergeAll(s *object, path *schemaPath, depth int) *object {
	subs, ok := s.vals["allOf"].([]any)
	if !ok || len(subs) == 0 {
		c.fail(path, "allOf", "must be a non-empty array")
		return nil
	}
	all := append([]any{without(s, "allOf")}, subs...)
	mg := &merger{merged: &object{vals: map[string]any{}}}
	merged := mg.merged
	var closed []*object // subschemas that bar properties beyond theirs
	for i, sub := range all {
		o := c.flatten(sub, path, depth)
		if c.err != nil {
			return nil
		}
		if o == nil {
			continue // true: no constraint
		}
		if ap, ok := o.vals["additionalProperties"]; ok && ap != true {
			closed = append(closed, o)
		}
		for _, k := range o.keys {
			if err := mg.merge(k, o.vals[k]); err != "" {
				c.fail(path.to("allOf", strconv.Itoa(max(0, i-1))), "allOf", "does not merge: %s", err)
				return nil
			}
		}
	}
	// A subschema closed to other properties conflicts with properties
	// another one adds.
	if props, ok := merged.vals["properties"].(*object); ok {
		for _, o := range closed {
			own, _ := o.vals["properties"].(*object)
			for _, name := range props.keys {
				if own == nil || own.vals[name] == nil {
					c.fail(path, "allOf", "does not merge: property %q is added where another subschema allows no other properties", name)
					return nil
				}
			}
		}
	}
	return merged
}

// flatten returns sub as an object without references or allOf at its
// top: nil for true.
func (c *schemaConv) flatten(sub any, path *schemaPath, depth int) *object {
	switch t := sub.(type) {
	case bool:
		if t {
			return nil
		}
		c.fail(path, "allOf", "has a false subschema: nothing matches")
		return nil
	case *object:
		if depth > maxRefChain {
			c.fail(path, "allOf", "does not merge: references nest more than %d deep (a recursive reference?)", maxRefChain)
			return nil
		}
		if c.nodes++; c.nodes > maxSchemaNodes {
			c.fail(path, "", "more than %d subschemas to compile", maxSchemaNodes)
			return nil
		}
		if c.nodes&63 == 0 {
			if err := c.ctx.Err(); err != nil {
				c.err = err
				return nil
			}
		}
		if ref, ok := t.vals["$ref"]; ok {
			_, target, ok := c.resolve(ref, path)
			if !ok {
				return nil
			}
			rest := without(t, "$ref")
			return c.flatten(&object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{target, rest}}}, path, depth+1)
		}
		if _, ok := t.vals["allOf"]; ok {
			return c.mergeAll(t, path, depth+1)
		}
		return t
	}
	c.fail(path, "allOf", "subschemas must be objects or booleans")
	return nil
}

// merger merges subschemas' keywords into merged. The properties and
// required it merges are its own, and grow in place: merging n
// subschemas costs their size, not n times the size merged so far.
type merger struct {
	merged *object
	// ownProperties is merged's properties, a copy of the first
	// subschema's that the others' are added to; nil before.
	ownProperties *object
	// required holds the names (as JSON) in merged's required once a
	// second list has been merged into it; nil before.
	required map[string]bool
}

// merge merges keyword k's value v into merged; it returns why not.
func (mg *merger) merge(k string, v any) string {
	m := mg.merged
	old, ok := m.vals[k]
	if !ok || ignoredKeywords[k] {
		if !ok {
			m.set(k, v)
		}
		return ""
	}
	switch k {
	case "properties":
		a, aok := old.(*object)
		b, bok := v.(*object)
		if !aok || !bok {
			return "properties must be objects"
		}
		if mg.ownProperties == nil {
			mg.ownProperties = &object{keys: slices.Clone(a.keys), vals: make(map[string]any, len(a.keys))}
			for _, name := range a.keys {
				mg.ownProperties.vals[name] = a.vals[name]
			}
			m.vals[k] = mg.ownProperties
		}
		out := mg.ownProperties
		for _, name := range b.keys {
			if prev, ok := out.vals[name]; ok {
				out.vals[name] = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{prev, b.vals[name]}}}
				continue
			}
			out.set(name, b.vals[name])
		}
	case "required":
		// Names compared as JSON: a list may hold anything (the schema
		// is refused later), lists included, which == cannot compare.
		if mg.required == nil {
			a, _ := old.([]any)
			mg.required = make(map[string]bool, len(a))
			for _, e := range a {
				mg.required[compactJSON(e)] = true
			}
			m.vals[k] = slices.Clone(a)
		}
		out := m.vals[k].([]any)
		b, _ := v.([]any)
		for _, e := range b {
			if j := compactJSON(e); !mg.required[j] {
				mg.required[j] = true
				out = append(out, e)
			}
		}
		m.vals[k] = out
	case "type":
		a, b := typeSet(old), typeSet(v)
		var out []any
		for _, t := range a {
			switch {
			case slices.Contains(b, t):
				out = append(out, t)
			case t == "integer" && slices.Contains(b, "number"):
				out = append(out, t)
			case t == "number" && slices.Contains(b, "integer"):
				out = append(out, "integer")
			}
		}
		if len(out) == 0 {
			return fmt.Sprintf("the types %s and %s do not intersect", compactJSON(old), compactJSON(v))
		}
		m.vals[k] = out
	case "enum":
		a, _ := old.([]any)
		b, _ := v.([]any)
		inB := make(map[string]bool, len(b))
		for _, f := range b {
			inB[compactJSON(f)] = true
		}
		var out []any
		for _, e := range a {
			if inB[compactJSON(e)] {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return "the enums have no value in common"
		}
		m.vals[k] = out
	case "minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties":
		return tighter(m, k, old, v, 1)
	case "maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties":
		return tighter(m, k, old, v, -1)
	default:
		if compactJSON(old) != compactJSON(v) {
			return fmt.Sprintf("two subschemas set %q differently", k)
		}
	}
	return ""
}

func typeSet(v any) []any {
	switch t := v.(type) {
	case string:
		return []any{t}
	case []any:
		return t
	}
	return nil
}

// tighter keeps the larger (sign 1) or smaller (-1) of two numbers.
func tighter(m *object, k string, old, v any, sign int) string {
	a, aok := old.(json.Number)
	b, bok := v.(json.Number)
	if !aok || !bok {
		if compactJSON(old) != compactJSON(v) {
			return fmt.Sprintf("two subschemas set %q differently", k)
		}
		return ""
	}
	ra, ok1 := exactNumber(string(a))
	rb, ok2 := exactNumber(string(b))
	if !ok1 || !ok2 {
		return fmt.Sprintf("%q must be a number", k)
	}
	if rb.Cmp(ra)*sign > 0 {
		m.vals[k] = v
	}
	return ""
}
