package jinja

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// builtinGlobals are Jinja's global functions that chat templates call.
var builtinGlobals = map[string]any{
	"namespace": Func(func(args []any, kwargs *Dict) (any, error) {
		ns := &namespace{attrs: NewDict()}
		for _, a := range args {
			d, ok := a.(*Dict)
			if !ok {
				return nil, fmt.Errorf("TypeError: namespace() takes a dict, not %s", typeName(a))
			}
			for _, k := range d.keys {
				ns.attrs.Set(k, d.at(k))
			}
		}
		for _, k := range kwargs.Keys() {
			v, _ := kwargs.Get(k)
			ns.attrs.Set(k, v)
		}
		return ns, nil
	}),
	"range": Func(func(args []any, kwargs *Dict) (any, error) {
		if kwargs.Len() > 0 || len(args) == 0 || len(args) > 3 {
			return nil, errors.New("TypeError: range expects 1 to 3 integer arguments")
		}
		n := make([]int, len(args))
		for i, a := range args {
			v, ok := asInt(a)
			if !ok {
				return nil, fmt.Errorf("TypeError: '%s' object cannot be interpreted as an integer", typeName(a))
			}
			n[i] = v
		}
		start, stop, step := 0, n[0], 1
		if len(n) > 1 {
			start, stop = n[0], n[1]
		}
		if len(n) > 2 {
			step = n[2]
		}
		if step == 0 {
			return nil, errors.New("ValueError: range() arg 3 must not be zero")
		}
		// Jinja's sandbox caps ranges at MAX_RANGE items.
		const maxRange = 100000
		out := List{}
		for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
			if len(out) == maxRange {
				return nil, fmt.Errorf("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d)", maxRange)
			}
			out = append(out, i)
		}
		return out, nil
	}),
	"dict": Func(func(args []any, kwargs *Dict) (any, error) {
		d := NewDict()
		for _, a := range args {
			src, ok := a.(*Dict)
			if !ok {
				return nil, fmt.Errorf("dict() of %s is not supported", typeName(a))
			}
			for _, k := range src.keys {
				d.Set(k, src.at(k))
			}
		}
		for _, k := range kwargs.Keys() {
			v, _ := kwargs.Get(k)
			d.Set(k, v)
		}
		return d, nil
	}),
}

type filterFunc func(r *renderer, v any, args []any, kwargs *Dict, s *scope) (any, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"tojson":     filterToJSON,
		"length":     filterLength,
		"count":      filterLength,
		"trim":       filterTrim,
		"string":     filterString,
		"safe":       func(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) { return Markup(toStr(v)), nil },
		"default":    filterDefault,
		"d":          filterDefault,
		"join":       filterJoin,
		"upper":      strFilter(strings.ToUpper),
		"lower":      strFilter(strings.ToLower),
		"capitalize": strFilter(pyCapitalize),
		"title":      strFilter(pyTitle),
		"items":      filterItems,
		"dictsort":   filterDictsort,
		"list":       filterList,
		"replace":    filterReplace,
		"selectattr": selectFilter(true, true),
		"rejectattr": selectFilter(true, false),
		"select":     selectFilter(false, true),
		"reject":     selectFilter(false, false),
		"map":        filterMap,
		"indent":     filterIndent,
		"unique":     filterUnique,
		"sort":       filterSort,
		"min":        minMax(-1),
		"max":        minMax(1),
		"int":        filterInt,
		"float":      filterFloat,
		"first":      filterFirst,
		"last":       filterLast,
		"abs":        filterAbs,
		"round":      filterRound,
		"wordcount": func(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
			return len(strings.Fields(toStr(v))), nil
		},
		"reverse": filterReverse,
		"sum":     filterSum,
		"attr":    filterAttr,
		"escape":  filterEscape,
		"e":       filterEscape,
		"forceescape": func(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
			return Markup(htmlEscape(toStr(v))), nil
		},
		"format":   filterFormat,
		"truncate": filterTruncate,
		"center":   filterCenter,
		"batch":    filterBatch,
		"slice":    filterSlice,
	}
}

// constantTimeFilters do not go over their input: they are not charged
// for its items (messages|length in a loop over messages is no work).
var constantTimeFilters = map[string]bool{
	"length": true, "count": true, "first": true, "last": true, "default": true, "d": true,
	"attr": true, "int": true, "float": true, "abs": true, "round": true,
}

// pythonFilters are the filters Python's Jinja2 has that this engine does
// not: a template using one outside an if is refused when parsed (with a
// message saying so), inside one when the filter runs.
var pythonFilters = map[string]bool{
	"filesizeformat": true, "groupby": true, "pprint": true, "random": true, "striptags": true,
	"urlencode": true, "urlize": true, "wordwrap": true, "xmlattr": true,
}

func filterAttr(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("attr", args, kwargs, "name")
	if err != nil {
		return nil, err
	}
	name, ok := a[0].(string)
	if !ok {
		return nil, errors.New("TypeError: attribute name must be a string")
	}
	// A dict's keys are not its attributes: only its methods are.
	if d, ok := v.(*Dict); ok {
		if dictMethods[name] || unsafeMethods["dict"][name] {
			return getAttr(d, name)
		}
		return Undefined{Hint: fmt.Sprintf("'dict object' has no attribute '%s'", name)}, nil
	}
	return getAttr(v, name)
}

func filterEscape(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
	if m, ok := v.(Markup); ok {
		return m, nil
	}
	return Markup(htmlEscape(toStr(v))), nil
}

func filterFormat(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	if len(args) > 0 && kwargs.Len() > 0 {
		return nil, errors.New("FilterArgumentError: can't handle positional and keyword arguments at the same time")
	}
	if kwargs.Len() > 0 {
		return nil, errors.New("format with keyword arguments is not supported")
	}
	return percentFormat(toStr(v), Tuple(args))
}

func filterCenter(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("center", args, kwargs, "width")
	if err != nil {
		return nil, err
	}
	width := 80
	if a[0] != nil {
		if width, _ = asInt(a[0]); width > 1<<20 {
			return nil, errors.New("center width too large")
		}
	}
	s := toStr(v)
	n := len([]rune(s))
	if width <= n {
		return s, nil
	}
	// CPython's str.center: left = pad/2 + (pad & width & 1).
	pad := width - n
	left := pad/2 + (pad & width & 1)
	return strings.Repeat(" ", left) + s + strings.Repeat(" ", pad-left), nil
}

func filterBatch(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("batch", args, kwargs, "linecount", "fill_with")
	if err != nil {
		return nil, err
	}
	n, ok := asInt(a[0])
	if !ok || n <= 0 {
		return nil, errors.New("batch needs a positive line count")
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var out []any
	var tmp List
	for _, it := range items {
		if len(tmp) == n {
			out = append(out, tmp)
			tmp = nil
		}
		tmp = append(tmp, it)
	}
	if len(tmp) > 0 {
		if a[1] != nil {
			for len(tmp) < n {
				tmp = append(tmp, a[1])
			}
		}
		out = append(out, tmp)
	}
	return &generator{items: out}, nil
}

func filterSlice(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("slice", args, kwargs, "slices", "fill_with")
	if err != nil {
		return nil, err
	}
	slices, ok := asInt(a[0])
	if !ok || slices <= 0 || slices > 1<<16 {
		return nil, errors.New("slice needs a positive number of slices")
	}
	seq, err := iterate(v)
	if err != nil {
		return nil, err
	}
	per, extra, offset := len(seq)/slices, len(seq)%slices, 0
	var out []any
	for i := 0; i < slices; i++ {
		start := offset + i*per
		if i < extra {
			offset++
		}
		end := offset + (i+1)*per
		tmp := append(List{}, seq[start:end]...)
		if a[1] != nil && i >= extra {
			tmp = append(tmp, a[1])
		}
		out = append(out, tmp)
	}
	return &generator{items: out}, nil
}

// filterArgs binds a filter's arguments (after the value) by position or
// keyword to names, Python-style.
func filterArgs(name string, args []any, kwargs *Dict, names ...string) ([]any, error) {
	if len(args) > len(names) {
		return nil, fmt.Errorf("TypeError: filter %s takes at most %d arguments", name, len(names))
	}
	out := make([]any, len(names))
	set := make([]bool, len(names))
	for i, a := range args {
		out[i], set[i] = a, true
	}
	for _, k := range kwargs.Keys() {
		found := false
		for i, n := range names {
			if n == k {
				if set[i] {
					return nil, fmt.Errorf("TypeError: filter %s got multiple values for argument '%s'", name, n)
				}
				out[i], _ = kwargs.Get(k)
				set[i], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("TypeError: filter %s got an unexpected keyword argument '%v'", name, k)
		}
	}
	return out, nil
}

func (r *renderer) applyFilter(f *filterExpr, v any, s *scope) (any, error) {
	args, err := r.evalArgs(f.args, s)
	if err != nil {
		return nil, err
	}
	kwargs, err := r.evalKwargs(f.kwargs, s)
	if err != nil {
		return nil, err
	}
	out, err := r.callFilter(f.name, v, args, kwargs, s)
	if err != nil {
		var te *Error
		if errors.As(err, &te) {
			return nil, err
		}
		return nil, &Error{Line: f.line, Err: err}
	}
	return out, nil
}

func (r *renderer) callFilter(name string, v any, args []any, kwargs *Dict, s *scope) (any, error) {
	fn, ok := filters[name]
	if !ok {
		if pythonFilters[name] {
			return nil, fmt.Errorf("filter '%s' is not supported by kvpilot's Jinja engine", name)
		}
		return nil, fmt.Errorf("TemplateAssertionError: No filter named '%s'", name)
	}
	if !constantTimeFilters[name] {
		if err := r.charge(cost(v)); err != nil {
			return nil, err
		}
	}
	// Filters see a Markup as the str it is, but for those that keep it.
	if m, ok := v.(Markup); ok {
		switch name {
		case "safe", "string":
		case "trim":
			out, err := fn(r, string(m), args, kwargs, s)
			if str, ok := out.(string); ok {
				return Markup(str), err
			}
			return out, err
		default:
			v = string(m)
		}
	}
	return fn(r, v, args, kwargs, s)
}

// filterString is soft_str: a str (or Markup) stays as it is.
func filterString(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
	if m, ok := v.(Markup); ok {
		return m, nil
	}
	return toStr(v), nil
}

func strFilter(f func(string) string) filterFunc {
	return func(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) { return f(toStr(v)), nil }
}

func filterLength(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) { return length(v) }

func filterTrim(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("trim", args, kwargs, "chars")
	if err != nil {
		return nil, err
	}
	return pyStrip(toStr(v), a[0], true, true)
}

func filterDefault(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("default", args, kwargs, "default_value", "boolean")
	if err != nil {
		return nil, err
	}
	if a[0] == nil && len(args) == 0 {
		if _, ok := kwargs.Get("default_value"); !ok {
			a[0] = ""
		}
	}
	if _, undef := v.(Undefined); undef || (truthy(a[1]) && !truthy(v)) {
		return a[0], nil
	}
	return v, nil
}

func filterJoin(r *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("join", args, kwargs, "d", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	sep := ""
	if a[0] != nil {
		sep = toStr(a[0])
	}
	parts := make([]string, len(items))
	for i, x := range items {
		if a[1] != nil {
			if x, err = attrGetter(x, a[1]); err != nil {
				return nil, err
			}
		}
		parts[i] = toStr(x)
	}
	return strings.Join(parts, sep), nil
}

func filterItems(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
	switch d := v.(type) {
	case Undefined:
		return &generator{}, nil
	case *Dict:
		return &generator{items: (&dictView{kind: "items", d: d}).list()}, nil
	}
	return nil, errors.New("TypeError: Can only get item pairs from a mapping.")
}

func filterDictsort(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("dictsort", args, kwargs, "case_sensitive", "by", "reverse")
	if err != nil {
		return nil, err
	}
	d, ok := v.(*Dict)
	if !ok {
		return nil, fmt.Errorf("TypeError: dictsort needs a dict, not %s", typeName(v))
	}
	pos := 0
	switch a[1] {
	case nil, "key":
	case "value":
		pos = 1
	default:
		return nil, errors.New(`FilterArgumentError: You can only sort by either "key" or "value"`)
	}
	list := (&dictView{kind: "items", d: d}).list()
	err = sortValues(list, func(x any) any {
		k := x.(Tuple)[pos]
		if !truthy(a[0]) {
			return ignoreCase(k)
		}
		return k
	}, truthy(a[2]))
	return list, err
}

func ignoreCase(v any) any {
	if s, ok := v.(string); ok {
		return strings.ToLower(s)
	}
	return v
}

func filterList(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return append(List{}, items...), nil
}

func filterReplace(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("replace", args, kwargs, "old", "new", "count")
	if err != nil {
		return nil, err
	}
	n := -1
	if a[2] != nil {
		n, _ = asInt(a[2])
	}
	return pyReplace(toStr(v), toStr(a[0]), toStr(a[1]), n), nil
}

// attrGetter is Jinja's make_attrgetter: "a.b" or an integer index.
func attrGetter(v any, attr any) (any, error) {
	if name, ok := attr.(string); ok {
		for _, part := range strings.Split(name, ".") {
			var err error
			if i, convErr := strconv.Atoi(part); convErr == nil {
				v, err = getItem(v, i)
			} else {
				v, err = getItem(v, part)
			}
			if err != nil {
				return nil, err
			}
		}
		return v, nil
	}
	return getItem(v, attr)
}

func selectFilter(byAttr, keep bool) filterFunc {
	return func(r *renderer, v any, args []any, kwargs *Dict, s *scope) (any, error) {
		if !truthy(v) {
			return &generator{}, nil
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		off := 0
		var attr any
		if byAttr {
			if len(args) == 0 {
				return nil, errors.New("FilterArgumentError: Missing parameter for attribute name")
			}
			attr, off = args[0], 1
		}
		out := List{}
		for _, it := range items {
			x := it
			if byAttr {
				if x, err = attrGetter(it, attr); err != nil {
					return nil, err
				}
			}
			var ok bool
			if len(args) > off {
				name, isStr := args[off].(string)
				if !isStr {
					return nil, errors.New("TypeError: test name must be a string")
				}
				if ok, err = r.runTest(name, x, args[off+1:], s); err != nil {
					return nil, err
				}
			} else {
				ok = truthy(x)
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return &generator{items: out}, nil
	}
}

func filterMap(r *renderer, v any, args []any, kwargs *Dict, s *scope) (any, error) {
	if !truthy(v) {
		return &generator{}, nil
	}
	g, err := mapItems(r, v, args, kwargs, s)
	if err != nil {
		return nil, err
	}
	return &generator{items: g}, nil
}

func mapItems(r *renderer, v any, args []any, kwargs *Dict, s *scope) (List, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make(List, 0, len(items))
	if attr, ok := kwargs.Get("attribute"); ok && len(args) == 0 {
		def, hasDef := kwargs.Get("default")
		for _, it := range items {
			x, err := attrGetter(it, attr)
			if err != nil {
				return nil, err
			}
			if _, undef := x.(Undefined); undef && hasDef {
				x = def
			}
			out = append(out, x)
		}
		return out, nil
	}
	if len(args) == 0 {
		return nil, errors.New("FilterArgumentError: map requires a filter argument")
	}
	name, ok := args[0].(string)
	if !ok {
		return nil, errors.New("TypeError: map's filter name must be a string")
	}
	for _, it := range items {
		x, err := r.callFilter(name, it, args[1:], kwargs, s)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// filterIndent is Jinja's indent, with its quirk of splitting the text
// with a newline appended.
func filterIndent(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("indent", args, kwargs, "width", "first", "blank")
	if err != nil {
		return nil, err
	}
	indent := "    "
	switch w := a[0].(type) {
	case nil:
	case string:
		indent = w
	case int:
		indent = strings.Repeat(" ", max(w, 0))
	default:
		return nil, fmt.Errorf("TypeError: indent width must be an int or str, not %s", typeName(w))
	}
	lines := splitLines(toStr(v) + "\n")
	var rv string
	if truthy(a[2]) {
		rv = strings.Join(lines, "\n"+indent)
	} else {
		rv = lines[0]
		if len(lines) > 1 {
			rest := make([]string, len(lines)-1)
			for i, l := range lines[1:] {
				if l != "" {
					l = indent + l
				}
				rest[i] = l
			}
			rv += "\n" + strings.Join(rest, "\n")
		}
	}
	if truthy(a[1]) {
		rv = indent + rv
	}
	return rv, nil
}

// splitLines is Python's str.splitlines() for "\n", "\r\n" and "\r".
func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			out = append(out, s[start:i])
			start = i + 1
		case '\r':
			out = append(out, s[start:i])
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func filterUnique(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("unique", args, kwargs, "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := List{}
	seen := map[any]bool{}
	for _, it := range items {
		k := it
		if a[1] != nil {
			if k, err = attrGetter(it, a[1]); err != nil {
				return nil, err
			}
		}
		if !truthy(a[0]) {
			k = ignoreCase(k)
		}
		// Python keeps the seen values in a set.
		hk, ok := hashKey(k)
		if !ok {
			return nil, fmt.Errorf("TypeError: unhashable type: '%s'", typeName(k))
		}
		if !seen[hk] {
			seen[hk] = true
			out = append(out, it)
		}
	}
	return &generator{items: out}, nil
}

func filterSort(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("sort", args, kwargs, "reverse", "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := append(List{}, items...)
	var keyErr error
	err = sortValues(out, func(x any) any {
		if a[2] != nil {
			var e error
			if x, e = attrGetter(x, a[2]); e != nil && keyErr == nil {
				keyErr = e
			}
		}
		if !truthy(a[1]) {
			return ignoreCase(x)
		}
		return x
	}, truthy(a[0]))
	if keyErr != nil {
		return nil, keyErr
	}
	return out, err
}

func minMax(sign int) filterFunc {
	return func(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
		a, err := filterArgs("min", args, kwargs, "case_sensitive", "attribute")
		if err != nil {
			return nil, err
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{Hint: "No aggregated item, sequence was empty."}, nil
		}
		key := func(x any) (any, error) {
			if a[1] != nil {
				var e error
				if x, e = attrGetter(x, a[1]); e != nil {
					return nil, e
				}
			}
			if !truthy(a[0]) {
				return ignoreCase(x), nil
			}
			return x, nil
		}
		best := items[0]
		bk, err := key(best)
		if err != nil {
			return nil, err
		}
		for _, it := range items[1:] {
			k, err := key(it)
			if err != nil {
				return nil, err
			}
			c, err := compare(k, bk)
			if err != nil {
				return nil, err
			}
			if c*sign > 0 {
				best, bk = it, k
			}
		}
		return best, nil
	}
}

func filterInt(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("int", args, kwargs, "default", "base")
	if err != nil {
		return nil, err
	}
	def := 0
	if a[0] != nil {
		def, _ = asInt(a[0])
	}
	switch t := v.(type) {
	case int:
		return t, nil
	case bool:
		i, _ := asInt(t)
		return i, nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return def, nil
		}
		return int(t), nil
	case string:
		s := strings.TrimSpace(strings.ReplaceAll(t, "_", ""))
		base := 10
		if a[1] != nil {
			if base, _ = asInt(a[1]); base != 0 && (base < 2 || base > 36) {
				return def, nil
			}
			if base != 10 {
				// Python accepts the base's prefix (0b, 0o, 0x) too.
				body := strings.TrimLeft(s, "+-")
				if len(body) > 2 && body[0] == '0' && strings.ContainsRune(map[int]string{0: "bBoOxX", 2: "bB", 8: "oO", 16: "xX"}[base], rune(body[1])) {
					s = s[:len(s)-len(body)] + body[2:]
					if base == 0 {
						base = map[byte]int{'b': 2, 'B': 2, 'o': 8, 'O': 8, 'x': 16, 'X': 16}[body[1]]
					}
				}
				if base == 0 {
					base = 10
				}
			}
		}
		if i, err := strconv.ParseInt(s, base, 64); err == nil {
			return int(i), nil
		}
		// Jinja's quirk: what int(s, base) refuses is read as a float,
		// whatever the base ("42.23"|int is 42, "12"|int(base=2) is 12).
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int(f), nil
		}
	}
	return def, nil
}

func filterFloat(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("float", args, kwargs, "default")
	if err != nil {
		return nil, err
	}
	if f, ok := number(v); ok {
		return f, nil
	}
	if s, ok := v.(string); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, nil
		}
	}
	if a[0] == nil {
		return 0.0, nil
	}
	return a[0], nil
}

func filterFirst(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{Hint: "No first item, sequence was empty."}, nil
	}
	return items[0], nil
}

func filterLast(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{Hint: "No last item, sequence was empty."}, nil
	}
	return items[len(items)-1], nil
}

func filterAbs(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
	switch t := v.(type) {
	case int:
		if t < 0 {
			return -t, nil
		}
		return t, nil
	case float64:
		return math.Abs(t), nil
	}
	return nil, fmt.Errorf("TypeError: bad operand type for abs(): '%s'", typeName(v))
}

func filterRound(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("round", args, kwargs, "precision", "method")
	if err != nil {
		return nil, err
	}
	f, ok := number(v)
	if !ok {
		return nil, fmt.Errorf("TypeError: round needs a number, not %s", typeName(v))
	}
	p, _ := asInt(a[0])
	m := math.Pow(10, float64(p))
	switch a[1] {
	case "floor":
		return math.Floor(f*m) / m, nil
	case "ceil":
		return math.Ceil(f*m) / m, nil
	}
	return math.RoundToEven(f*m) / m, nil
}

func filterReverse(_ *renderer, v any, _ []any, _ *Dict, _ *scope) (any, error) {
	if s, ok := v.(string); ok {
		rs := []rune(s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs), nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make(List, len(items))
	for i, x := range items {
		out[len(items)-1-i] = x
	}
	return &generator{items: out}, nil
}

func filterSum(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("sum", args, kwargs, "attribute", "start")
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var total any = 0
	if a[1] != nil {
		total = a[1]
	}
	for _, x := range items {
		if a[0] != nil {
			if x, err = attrGetter(x, a[0]); err != nil {
				return nil, err
			}
		}
		if total, err = arith("+", total, x); err != nil {
			return nil, err
		}
	}
	return total, nil
}

// filterTruncate is Jinja's truncate, with its default leeway of 5.
func filterTruncate(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("truncate", args, kwargs, "length", "killwords", "end", "leeway")
	if err != nil {
		return nil, err
	}
	n, end, leeway := 255, "...", 5
	if a[0] != nil {
		n, _ = asInt(a[0])
	}
	if a[2] != nil {
		end = toStr(a[2])
	}
	if a[3] != nil {
		leeway, _ = asInt(a[3])
	}
	endLen := len([]rune(end))
	if n < endLen {
		return nil, fmt.Errorf("AssertionError: expected length >= %d, got %d", endLen, n)
	}
	if leeway < 0 {
		return nil, fmt.Errorf("AssertionError: expected leeway >= 0, got %d", leeway)
	}
	s := []rune(toStr(v))
	if len(s) <= n+leeway {
		return string(s), nil
	}
	head := string(s[:n-endLen])
	if truthy(a[1]) {
		return head + end, nil
	}
	if i := strings.LastIndex(head, " "); i >= 0 {
		head = head[:i]
	}
	return head + end, nil
}
