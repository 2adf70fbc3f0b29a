package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Values a template sees are Go values standing for Python's:
//
//	nil        None
//	bool       bool
//	int        int
//	float64    float
//	string     str
//	List       list
//	Tuple      tuple
//	*Dict      dict (insertion-ordered, as Python's)
//	Undefined  a name or attribute that has no value (Jinja's Undefined)
//
// and the template's own callables (*macro, Func), namespaces and loop
// objects.

// List is a Python list.
type List []any

// Tuple is a Python tuple.
type Tuple []any

// Undefined is what reading a missing name, key or attribute gives: it
// prints as "", is false and iterates as empty, and any other use is an
// error naming what was missing.
type Undefined struct {
	// Hint is Jinja's message for it ("'x' is undefined").
	Hint string
}

// Func is a Go function a template can call (raise_exception,
// strftime_now, namespace).
type Func func(args []any, kwargs *Dict) (any, error)

// Dict is a Python dict: keys in insertion order.
type Dict struct {
	keys []any
	vals map[any]any
}

// NewDict is an empty dict.
func NewDict() *Dict { return &Dict{vals: map[any]any{}} }

// Set sets d[k] = v, keeping k's position when it is already there. k
// must be hashable in Python's sense (str, int, float, bool, None, or a
// tuple of those); the engine checks before it sets a key a template
// gave.
func (d *Dict) Set(k, v any) {
	hk, ok := hashKey(k)
	if !ok {
		hk = "\x00unhashable:" + repr(k)
	}
	if _, ok := d.vals[hk]; !ok {
		d.keys = append(d.keys, plain(k))
	}
	d.vals[hk] = v
}

// Get is d[k].
func (d *Dict) Get(k any) (any, bool) {
	if d == nil {
		return nil, false
	}
	hk, ok := hashKey(k)
	if !ok {
		return nil, false
	}
	v, ok := d.vals[hk]
	return v, ok
}

// Len is len(d).
func (d *Dict) Len() int {
	if d == nil {
		return 0
	}
	return len(d.keys)
}

// Keys are d's keys in order.
func (d *Dict) Keys() []any {
	if d == nil {
		return nil
	}
	return d.keys
}

// hashKey is the Go map key for a Python key: True and 1, 1.0 and 1 are
// the same key in Python. ok is false for an unhashable key (a list, a
// dict).
func hashKey(k any) (any, bool) {
	switch t := k.(type) {
	case nil, int, string:
		return k, true
	case Markup:
		return string(t), true
	case bool:
		if t {
			return 1, true
		}
		return 0, true
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e18 {
			return int(t), true
		}
		return t, true
	case Tuple:
		parts := make([]string, len(t))
		for i, x := range t {
			hk, ok := hashKey(x)
			if !ok {
				return nil, false
			}
			parts[i] = fmt.Sprintf("%T:%v", hk, hk)
		}
		return "\x00tuple:" + strings.Join(parts, "\x00"), true
	}
	return nil, false
}

// namespace is the object namespace() makes: attributes set with
// {% set ns.x = … %}, which cross scopes.
type namespace struct{ attrs *Dict }

// generator is what Jinja's map, select, reject, selectattr,
// rejectattr, items, unique and reverse filters return in Python: a
// generator (or iterator), which iterates once, has no len(), no items by
// index and is not JSON.
type generator struct {
	items []any
	used  bool
}

func (g *generator) take() []any {
	if g.used {
		return nil
	}
	g.used = true
	return g.items
}

// dictView is what dict.items(), keys() and values() return in Python: it
// iterates and has a len(), but has no items by index and is not JSON.
type dictView struct {
	kind string // "items", "keys", "values"
	d    *Dict
}

func (v *dictView) list() List {
	out := make(List, 0, v.d.Len())
	for _, k := range v.d.keys {
		switch v.kind {
		case "items":
			out = append(out, Tuple{k, v.d.at(k)})
		case "keys":
			out = append(out, k)
		default:
			out = append(out, v.d.at(k))
		}
	}
	return out
}

// loopInfo is the `loop` variable of a for loop.
type loopInfo struct {
	index int
	items []any
	depth int
	// recurse runs the loop's body over other items (loop(items) in a
	// recursive loop).
	recurse func(items any) (string, error)
	// lastChanged is the arguments of the last loop.changed call.
	lastChanged Tuple
	changedSet  bool
}

func typeName(v any) string {
	switch t := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case List:
		return "list"
	case Tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case Undefined:
		return "Undefined"
	case *macro:
		return "Macro"
	case Func, *boundMethod:
		return "builtin_function_or_method"
	case *namespace:
		return "Namespace"
	case *loopInfo:
		return "LoopContext"
	case *generator:
		return "generator"
	case *dictView:
		return "dict_" + t.kind
	case Markup:
		return "Markup"
	}
	return fmt.Sprintf("%T", v)
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch t := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return t
	case int:
		return t != 0
	case float64:
		return t != 0
	case string:
		return t != ""
	case Markup:
		return t != ""
	case List:
		return len(t) > 0
	case Tuple:
		return len(t) > 0
	case *Dict:
		return t.Len() > 0
	case *dictView:
		return t.d.Len() > 0
	}
	return true
}

// toStr is Python's str(v), as Jinja prints a value.
func toStr(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case Markup:
		return string(t)
	case Undefined:
		return ""
	}
	return repr(v)
}

// repr is Python's repr(v).
func repr(v any) string {
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

func writeRepr(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if t {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int:
		b.WriteString(strconv.Itoa(t))
	case float64:
		b.WriteString(floatRepr(t))
	case string:
		b.WriteString(strRepr(t))
	case Markup:
		b.WriteString("Markup(" + strRepr(string(t)) + ")")
	case Undefined:
		b.WriteString("")
	case List:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x)
		}
		b.WriteByte(']')
	case Tuple:
		b.WriteByte('(')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x)
		}
		if len(t) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *Dict:
		b.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, t.at(k))
		}
		b.WriteByte('}')
	case *namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, t.attrs)
		b.WriteString(">")
	case *dictView:
		b.WriteString(typeName(t) + "(")
		writeRepr(b, t.list())
		b.WriteString(")")
	default:
		fmt.Fprintf(b, "<%s object>", typeName(v))
	}
}

// floatRepr is Python's repr of a float: the shortest text that reads
// back, with ".0" on integral values and exponents from 1e16 and below
// 1e-4.
func floatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Python writes at least two exponent digits, as Go does.
		mant, exp, _ := strings.Cut(s, "e")
		return mant + "e" + exp
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// strRepr is Python's repr of a str: single quotes unless the text has
// one and no double quote.
func strRepr(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		// Python escapes what is not printable (controls, format
		// characters, spaces other than ' ', unassigned code points).
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// equal is Python's ==.
func equal(a, b any) bool {
	a, b = plain(a), plain(b)
	switch x := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case bool, int, float64:
		fa, ok1 := number(a)
		fb, ok2 := number(b)
		return ok1 && ok2 && fa == fb
	case string:
		y, ok := b.(string)
		return ok && x == y
	case List:
		y, ok := b.(List)
		return ok && equalSeq(x, y)
	case Tuple:
		y, ok := b.(Tuple)
		return ok && equalSeq(x, y)
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			v, ok := y.Get(k)
			if !ok || !equal(x.at(k), v) {
				return false
			}
		}
		return true
	}
	return a == b
}

func equalSeq(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// number is v as a float when it is a Python number (bools are ints).
func number(v any) (float64, bool) {
	switch t := v.(type) {
	case bool:
		if t {
			return 1, true
		}
		return 0, true
	case int:
		return float64(t), true
	case float64:
		return t, true
	}
	return 0, false
}

// compare is Python's ordering of a and b (-1, 0, 1), for <, sort, min.
func compare(a, b any) (int, error) {
	a, b = plain(a), plain(b)
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			switch {
			case fa < fb:
				return -1, nil
			case fa > fb:
				return 1, nil
			}
			return 0, nil
		}
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case List, Tuple:
		xs, ys := seqOf(a), seqOf(b)
		if _, same := b.(List); same == isList(a) && ys != nil {
			for i := 0; i < len(xs) && i < len(ys); i++ {
				if !equal(xs[i], ys[i]) {
					return compare(xs[i], ys[i])
				}
			}
			switch {
			case len(xs) < len(ys):
				return -1, nil
			case len(xs) > len(ys):
				return 1, nil
			}
			return 0, nil
		}
	}
	return 0, fmt.Errorf("TypeError: '<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
}

func isList(v any) bool { _, ok := v.(List); return ok }

func seqOf(v any) []any {
	switch t := v.(type) {
	case List:
		return t
	case Tuple:
		return t
	}
	return nil
}

// iterate is Python's iter(v) for the values templates loop over: a
// list's or tuple's items, a dict's keys, a string's characters; Undefined
// is empty.
func iterate(v any) ([]any, error) {
	v = plain(v)
	switch t := v.(type) {
	case List:
		return t, nil
	case Tuple:
		return t, nil
	case *Dict:
		return append([]any(nil), t.keys...), nil
	case string:
		out := make([]any, 0, len(t))
		for _, r := range t {
			out = append(out, string(r))
		}
		return out, nil
	case Undefined:
		return nil, nil
	case *generator:
		return t.take(), nil
	case *dictView:
		return t.list(), nil
	}
	return nil, fmt.Errorf("TypeError: '%s' object is not iterable", typeName(v))
}

// length is Python's len(v).
func length(v any) (int, error) {
	v = plain(v)
	switch t := v.(type) {
	case string:
		return len([]rune(t)), nil
	case List:
		return len(t), nil
	case Tuple:
		return len(t), nil
	case *Dict:
		return t.Len(), nil
	case Undefined:
		return 0, nil
	case *dictView:
		return t.d.Len(), nil
	}
	return 0, fmt.Errorf("TypeError: object of type '%s' has no len()", typeName(v))
}

// sortValues sorts vs as Python's sorted does (stable), by key(v).
func sortValues(vs []any, key func(any) any, reverse bool) error {
	var err error
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := key(vs[i]), key(vs[j])
		if reverse {
			a, b = b, a
		}
		c, e := compare(a, b)
		if e != nil && err == nil {
			err = e
		}
		return c < 0
	})
	return err
}

// Markup is a str marked safe by the safe filter (markupsafe's Markup):
// it behaves as a str, except that `+` HTML-escapes the plain str on the
// other side, as Python's does even with autoescape off.
type Markup string

// plain is v with a Markup demoted to str, for the operations where
// Python's Markup acts as a plain str.
func plain(v any) any {
	if m, ok := v.(Markup); ok {
		return string(m)
	}
	return v
}

// htmlEscape is markupsafe's escape.
func htmlEscape(s string) string {
	if !strings.ContainsAny(s, `&<>'"`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '\'':
			b.WriteString("&#39;")
		case '"':
			b.WriteString("&#34;")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// at is the value of a key of d.keys.
func (d *Dict) at(k any) any {
	v, _ := d.Get(k)
	return v
}

// Str is Python's str(v) of a template value, as a template prints it.
func Str(v any) string { return toStr(v) }
