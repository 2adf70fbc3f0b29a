package jinja

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// runTest is Jinja's `v is name(args)`, with Python's notion of each
// type (a bool is a number; a dict, a string and a list are sequences).
func (r *renderer) runTest(name string, v any, args []any, _ *scope) (bool, error) {
	arg := func() (any, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("TypeError: test %s takes one argument", name)
		}
		return args[0], nil
	}
	if name == "escaped" {
		_, ok := v.(Markup)
		return ok, nil
	}
	v = plain(v)
	_, undef := v.(Undefined)
	switch name {
	case "defined":
		return !undef, nil
	case "undefined":
		return undef, nil
	case "none":
		return v == nil, nil
	case "string":
		_, ok := v.(string)
		return ok, nil
	case "mapping":
		_, ok := v.(*Dict)
		return ok, nil
	case "iterable":
		switch v.(type) {
		case string, List, Tuple, *Dict, Undefined, *generator, *dictView:
			return true, nil
		}
		return false, nil
	case "sequence":
		switch v.(type) {
		case string, List, Tuple, *Dict, Undefined:
			return true, nil
		}
		return false, nil
	case "number":
		switch v.(type) {
		case int, float64, bool:
			return true, nil
		}
		return false, nil
	case "integer":
		_, ok := v.(int)
		return ok, nil
	case "float":
		_, ok := v.(float64)
		return ok, nil
	case "boolean":
		_, ok := v.(bool)
		return ok, nil
	case "true":
		return v == true, nil
	case "false":
		return v == false, nil
	case "callable":
		switch v.(type) {
		case *macro, Func, *boundMethod:
			return true, nil
		}
		return false, nil
	case "odd", "even", "divisibleby":
		i, ok := asInt(v)
		if !ok {
			return false, fmt.Errorf("TypeError: test %s needs an integer, not %s", name, typeName(v))
		}
		switch name {
		case "odd":
			return i%2 != 0, nil
		case "even":
			return i%2 == 0, nil
		}
		a, err := arg()
		if err != nil {
			return false, err
		}
		n, ok := asInt(a)
		if !ok || n == 0 {
			return false, errors.New("divisibleby needs a non-zero integer")
		}
		return i%n == 0, nil
	case "lower", "upper":
		s := toStr(v)
		if name == "lower" {
			return strings.ToLower(s) == s, nil
		}
		return strings.ToUpper(s) == s, nil
	case "eq", "equalto", "==", "ne", "!=", "lt", "<", "le", "<=", "gt", ">", "ge", ">=", "lessthan", "greaterthan", "in", "sameas":
		a, err := arg()
		if err != nil {
			return false, err
		}
		op := map[string]string{
			"eq": "==", "equalto": "==", "==": "==", "ne": "!=", "!=": "!=", "lt": "<", "lessthan": "<", "<": "<",
			"le": "<=", "<=": "<=", "gt": ">", "greaterthan": ">", ">": ">", "ge": ">=", ">=": ">=", "in": "in",
		}[name]
		if name == "sameas" {
			return v == a || (v == nil && a == nil), nil
		}
		return compareOp(op, v, a)
	case "filter", "test":
		// "x is filter": x names a filter.
		n, _ := v.(string)
		if name == "filter" {
			_, ok := filters[n]
			return ok, nil
		}
		return knownTest(n), nil
	}
	if strings.ContainsFunc(name, unicode.IsSpace) || name == "" {
		return false, fmt.Errorf("bad test name %q", name)
	}
	return false, fmt.Errorf("TemplateRuntimeError: No test named '%s'", name)
}

// testNames are the tests runTest knows.
var testNames = map[string]bool{
	"defined": true, "undefined": true, "none": true, "string": true, "mapping": true, "iterable": true,
	"sequence": true, "number": true, "integer": true, "float": true, "boolean": true, "true": true,
	"false": true, "callable": true, "odd": true, "even": true, "divisibleby": true, "lower": true,
	"upper": true, "eq": true, "equalto": true, "==": true, "ne": true, "!=": true, "lt": true, "<": true,
	"le": true, "<=": true, "gt": true, ">": true, "ge": true, ">=": true, "lessthan": true,
	"greaterthan": true, "in": true, "sameas": true, "escaped": true, "filter": true, "test": true,
}

func knownTest(name string) bool { return testNames[name] }
