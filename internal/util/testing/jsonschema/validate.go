// Package jsonschema is a small JSON Schema validator for tests: it checks
// documents produced by constrained decoding against their schema,
// independently of the grammar compiler that produced them. It covers the
// keywords the compiler accepts: type, properties, required,
// additionalProperties, minProperties, maxProperties, items, prefixItems,
// minItems, maxItems, enum, const, anyOf, oneOf, allOf, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength,
// pattern, format (date, time, date-time, uuid, email, uri, ipv4, ipv6,
// hostname, checked with the standard library's parsers) and local $ref.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net/mail"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Validate reports why doc (JSON text) does not satisfy schema (JSON
// text), or nil.
func Validate(schema, doc []byte) error {
	var s, d any
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("document is not JSON: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("document has trailing data")
	}
	v := validator{root: s}
	return v.check(s, d, "$")
}

type validator struct{ root any }

func (v validator) check(schema, doc any, at string) error {
	switch s := schema.(type) {
	case bool:
		if !s {
			return fmt.Errorf("%s: false schema", at)
		}
		return nil
	case map[string]any:
		return v.checkObject(s, doc, at)
	}
	return fmt.Errorf("%s: schema is %T", at, schema)
}

func (v validator) resolve(ref string) (any, error) {
	var cur any = v.root
	for _, p := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("ref %s does not resolve", ref)
		}
		cur = m[p]
	}
	return cur, nil
}

func typeOf(doc any) string {
	switch d := doc.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := d.Int64(); err == nil && !strings.ContainsAny(string(d), ".eE") {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", doc)
}

func normalize(x any) any {
	switch t := x.(type) {
	case json.Number:
		f, _ := t.Float64()
		return f
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			out[k] = normalize(e)
		}
		return out
	}
	return x
}

func (v validator) checkObject(s map[string]any, doc any, at string) error {
	if ref, ok := s["$ref"].(string); ok {
		target, err := v.resolve(ref)
		if err != nil {
			return err
		}
		return v.check(target, doc, at)
	}
	if c, ok := s["const"]; ok && !reflect.DeepEqual(normalize(c), normalize(doc)) {
		return fmt.Errorf("%s: %v is not the const %v", at, doc, c)
	}
	if e, ok := s["enum"].([]any); ok {
		found := false
		for _, x := range e {
			if reflect.DeepEqual(normalize(x), normalize(doc)) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %v not in enum %v", at, doc, e)
		}
	}
	if subs, ok := s["anyOf"].([]any); ok {
		var errs []string
		for _, sub := range subs {
			err := v.check(sub, doc, at)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err.Error())
		}
		if errs != nil {
			return fmt.Errorf("%s: no anyOf branch matches: %s", at, strings.Join(errs, "; "))
		}
	}
	if subs, ok := s["allOf"].([]any); ok {
		for _, sub := range subs {
			if err := v.check(sub, doc, at); err != nil {
				return fmt.Errorf("%s: allOf: %w", at, err)
			}
		}
	}
	if subs, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, sub := range subs {
			if v.check(sub, doc, at) == nil {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: %d oneOf branches match", at, n)
		}
	}
	dt := typeOf(doc)
	if t, ok := s["type"]; ok {
		var types []string
		switch tt := t.(type) {
		case string:
			types = []string{tt}
		case []any:
			for _, x := range tt {
				types = append(types, x.(string))
			}
		}
		okType := false
		for _, want := range types {
			if want == dt || (want == "number" && dt == "integer") {
				okType = true
			}
		}
		if !okType {
			return fmt.Errorf("%s: %s is not of type %v", at, dt, t)
		}
	}
	switch d := doc.(type) {
	case string:
		n := utf8.RuneCountInString(d)
		if m, ok := num(s["minLength"]); ok && float64(n) < m {
			return fmt.Errorf("%s: string shorter than %v", at, m)
		}
		if m, ok := num(s["maxLength"]); ok && float64(n) > m {
			return fmt.Errorf("%s: string longer than %v", at, m)
		}
		if p, ok := s["pattern"].(string); ok {
			re, err := regexp.Compile(p)
			if err != nil {
				return err
			}
			if !re.MatchString(d) {
				return fmt.Errorf("%s: %q does not match %q", at, d, p)
			}
		}
		if f, ok := s["format"].(string); ok && !formatOK(f, d) {
			return fmt.Errorf("%s: %q is not a %s", at, d, f)
		}
	case []any:
		if m, ok := num(s["minItems"]); ok && float64(len(d)) < m {
			return fmt.Errorf("%s: fewer than %v items", at, m)
		}
		if m, ok := num(s["maxItems"]); ok && float64(len(d)) > m {
			return fmt.Errorf("%s: more than %v items", at, m)
		}
		prefix, _ := s["prefixItems"].([]any)
		for i, e := range d {
			sub, ok := s["items"]
			if i < len(prefix) {
				sub, ok = prefix[i], true
			}
			if ok {
				if err := v.check(sub, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		if m, ok := num(s["minProperties"]); ok && float64(len(d)) < m {
			return fmt.Errorf("%s: fewer than %v properties", at, m)
		}
		if m, ok := num(s["maxProperties"]); ok && float64(len(d)) > m {
			return fmt.Errorf("%s: more than %v properties", at, m)
		}
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := d[r.(string)]; !ok {
					return fmt.Errorf("%s: missing required %q", at, r)
				}
			}
		}
		for k, val := range d {
			if ps, ok := props[k]; ok {
				if err := v.check(ps, val, at+"."+k); err != nil {
					return err
				}
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					return fmt.Errorf("%s: additional property %q", at, k)
				}
			case map[string]any:
				if err := v.check(ap, val, at+"."+k); err != nil {
					return err
				}
			}
		}
	case json.Number:
		f, _ := d.Float64()
		if math.IsInf(f, 0) {
			return fmt.Errorf("%s: number out of range", at)
		}
		r, ok := new(big.Rat).SetString(string(d))
		if !ok {
			return fmt.Errorf("%s: %s is not a number", at, d)
		}
		for _, b := range []struct {
			kw   string
			fail func(c int) bool
		}{
			{"minimum", func(c int) bool { return c < 0 }},
			{"exclusiveMinimum", func(c int) bool { return c <= 0 }},
			{"maximum", func(c int) bool { return c > 0 }},
			{"exclusiveMaximum", func(c int) bool { return c >= 0 }},
		} {
			if lim, ok := rat(s[b.kw]); ok && b.fail(r.Cmp(lim)) {
				return fmt.Errorf("%s: %s fails %s %v", at, d, b.kw, s[b.kw])
			}
		}
		if k, ok := rat(s["multipleOf"]); ok && !new(big.Rat).Quo(r, k).IsInt() {
			return fmt.Errorf("%s: %s is not a multiple of %v", at, d, s["multipleOf"])
		}
	}
	return nil
}

// rat reads a schema number exactly (schemas decode with UseNumber).
func rat(x any) (*big.Rat, bool) {
	switch n := x.(type) {
	case json.Number:
		return new(big.Rat).SetString(string(n))
	case float64:
		return new(big.Rat).SetFloat64(n), true
	}
	return nil, false
}

// formatOK checks a format with the standard library's parsers, apart
// from the patterns the compiler writes formats with.
func formatOK(format, s string) bool {
	switch format {
	case "date":
		_, err := time.Parse("2006-01-02", s)
		return err == nil
	case "time":
		_, err := time.Parse("15:04:05.999999999Z07:00", s)
		return err == nil
	case "date-time":
		_, err := time.Parse(time.RFC3339Nano, s)
		return err == nil
	case "uuid":
		return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`).MatchString(s)
	case "email":
		a, err := mail.ParseAddress(s)
		return err == nil && a.Address == s && a.Name == ""
	case "uri":
		u, err := url.Parse(s)
		return err == nil && u.Scheme != "" && u.Host != ""
	case "ipv4":
		ip, err := netip.ParseAddr(s)
		return err == nil && ip.Is4()
	case "ipv6":
		ip, err := netip.ParseAddr(s)
		return err == nil && ip.Is6() && ip.Zone() == ""
	case "hostname":
		if len(s) == 0 || len(s) > 253 {
			return false
		}
		for _, l := range strings.Split(s, ".") {
			if !regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`).MatchString(l) {
				return false
			}
		}
		return true
	}
	return true
}

func num(x any) (float64, bool) {
	f, ok := x.(float64)
	return f, ok
}
