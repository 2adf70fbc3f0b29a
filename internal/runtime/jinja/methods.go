package jinja

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// boundMethod is obj.name read as a value: a method of a str, list, dict
// or loop, called later.
type boundMethod struct {
	recv any
	name string
}

// Methods templates may read, by receiver type. Python's mutating list and
// dict methods are absent on purpose: transformers renders in Jinja's
// ImmutableSandboxedEnvironment, where reading them gives an unusable
// value (unsafeMethods).
var (
	strMethods = map[string]bool{
		"strip": true, "lstrip": true, "rstrip": true, "split": true, "rsplit": true,
		"startswith": true, "endswith": true, "replace": true, "upper": true, "lower": true,
		"title": true, "capitalize": true, "format": true, "find": true, "rfind": true,
		"count": true, "join": true, "splitlines": true, "isdigit": true, "isalpha": true,
		"isalnum": true, "isspace": true, "islower": true, "isupper": true, "removeprefix": true,
		"removesuffix": true, "index": true,
	}
	dictMethods   = map[string]bool{"get": true, "items": true, "keys": true, "values": true, "copy": true}
	listMethods   = map[string]bool{"index": true, "count": true, "copy": true}
	unsafeMethods = map[string]map[string]bool{
		"list": {"append": true, "extend": true, "insert": true, "pop": true, "remove": true, "reverse": true, "sort": true, "clear": true},
		"dict": {"pop": true, "popitem": true, "setdefault": true, "update": true, "clear": true},
	}
)

// getAttr is Jinja's `obj.name`: a Python attribute (methods of str, list
// and dict) first, else the item obj[name], else Undefined.
func getAttr(obj any, name string) (any, error) {
	obj = plain(obj)
	switch t := obj.(type) {
	case Undefined:
		return nil, undefinedError(t)
	case *Dict:
		if dictMethods[name] {
			return &boundMethod{t, name}, nil
		}
		if unsafeMethods["dict"][name] {
			return unsafe(name, "dict"), nil
		}
		if v, ok := t.Get(name); ok {
			return v, nil
		}
		return Undefined{Hint: fmt.Sprintf("'dict object' has no attribute '%s'", name)}, nil
	case string:
		if strMethods[name] {
			return &boundMethod{t, name}, nil
		}
	case List:
		if listMethods[name] {
			return &boundMethod{t, name}, nil
		}
		if unsafeMethods["list"][name] {
			return unsafe(name, "list"), nil
		}
	case *namespace:
		if v, ok := t.attrs.Get(name); ok {
			return v, nil
		}
		return Undefined{Hint: fmt.Sprintf("'Namespace' object has no attribute '%s'", name)}, nil
	case *loopInfo:
		return t.attr(name)
	}
	return Undefined{Hint: fmt.Sprintf("'%s' has no attribute '%s'", reprForHint(obj), name)}, nil
}

func unsafe(name, typ string) Undefined {
	return Undefined{Hint: fmt.Sprintf("access to attribute '%s' of '%s' object is unsafe.", name, typ)}
}

func reprForHint(v any) string {
	switch v.(type) {
	case nil, bool, int, float64:
		return repr(v)
	}
	return typeName(v) + " object"
}

// getItem is Jinja's `obj[key]`: the item, else the attribute named key,
// else Undefined.
func getItem(obj any, key any) (any, error) {
	obj, key = plain(obj), plain(key)
	switch t := obj.(type) {
	case Undefined:
		return nil, undefinedError(t)
	case *Dict:
		if v, ok := t.Get(key); ok {
			return v, nil
		}
	case List, Tuple, string:
		i, ok := asInt(key)
		if ok {
			switch s := t.(type) {
			case string:
				rs := []rune(s)
				if i < 0 {
					i += len(rs)
				}
				if i >= 0 && i < len(rs) {
					return string(rs[i]), nil
				}
			default:
				xs := seqOf(t)
				if i < 0 {
					i += len(xs)
				}
				if i >= 0 && i < len(xs) {
					return xs[i], nil
				}
			}
			return Undefined{Hint: fmt.Sprintf("%s object has no element %v", typeName(obj), key)}, nil
		}
	case *namespace, *loopInfo:
		if name, ok := key.(string); ok {
			return getAttr(obj, name)
		}
	}
	if name, ok := key.(string); ok {
		if v, err := getAttr(obj, name); err == nil {
			if _, undef := v.(Undefined); !undef {
				return v, nil
			}
		}
	}
	return Undefined{Hint: fmt.Sprintf("%s has no element %s", reprForHint(obj), repr(key))}, nil
}

func (l *loopInfo) attr(name string) (any, error) {
	n := len(l.items)
	switch name {
	case "index":
		return l.index + 1, nil
	case "index0":
		return l.index, nil
	case "revindex":
		return n - l.index, nil
	case "revindex0":
		return n - l.index - 1, nil
	case "first":
		return l.index == 0, nil
	case "last":
		return l.index == n-1, nil
	case "length":
		return n, nil
	case "depth":
		return l.depth, nil
	case "depth0":
		return l.depth - 1, nil
	case "previtem":
		if l.index == 0 {
			return Undefined{Hint: "there is no previous item"}, nil
		}
		return l.items[l.index-1], nil
	case "nextitem":
		if l.index == n-1 {
			return Undefined{Hint: "there is no next item"}, nil
		}
		return l.items[l.index+1], nil
	case "cycle", "changed":
		return &boundMethod{l, name}, nil
	}
	return Undefined{Hint: fmt.Sprintf("'LoopContext' object has no attribute '%s'", name)}, nil
}

// argsOf checks a method's arguments: at least min positional, at most
// max, no keywords but those named.
func argsOf(name string, args []any, kwargs *Dict, minArgs, maxArgs int, kw ...string) ([]any, error) {
	for _, k := range kwargs.Keys() {
		ok := false
		for i, w := range kw {
			if k == w {
				ok = true
				v, _ := kwargs.Get(k)
				for len(args) <= i {
					args = append(args, nil)
				}
				args[i] = v
			}
		}
		if !ok {
			return nil, fmt.Errorf("TypeError: %s() got an unexpected keyword argument '%v'", name, k)
		}
	}
	if len(args) < minArgs || len(args) > maxArgs {
		return nil, fmt.Errorf("TypeError: %s() takes %d to %d arguments (%d given)", name, minArgs, maxArgs, len(args))
	}
	for len(args) < maxArgs {
		args = append(args, nil)
	}
	return args, nil
}

func (r *renderer) callMethod(m *boundMethod, args []any, kwargs *Dict) (any, error) {
	for i := range args {
		args[i] = plain(args[i])
	}
	switch recv := m.recv.(type) {
	case string:
		return strMethod(recv, m.name, args, kwargs)
	case *Dict:
		return dictMethod(recv, m.name, args, kwargs)
	case List:
		return listMethod(recv, m.name, args, kwargs)
	case *loopInfo:
		if m.name == "changed" {
			// True on the first call and when the arguments differ from
			// the last call's.
			v := Tuple(args)
			if recv.changedSet && equal(recv.lastChanged, v) {
				return false, nil
			}
			recv.lastChanged, recv.changedSet = v, true
			return true, nil
		}
		if len(args) == 0 {
			return nil, errors.New("TypeError: no items for cycling given")
		}
		return args[recv.index%len(args)], nil
	}
	return nil, fmt.Errorf("TypeError: cannot call %s", m.name)
}

func dictMethod(d *Dict, name string, args []any, kwargs *Dict) (any, error) {
	switch name {
	case "get":
		a, err := argsOf("get", args, kwargs, 1, 2)
		if err != nil {
			return nil, err
		}
		if v, ok := d.Get(a[0]); ok {
			return v, nil
		}
		return a[1], nil
	case "items", "keys", "values":
		if _, err := argsOf(name, args, kwargs, 0, 0); err != nil {
			return nil, err
		}
		return &dictView{kind: name, d: d}, nil
	case "copy":
		c := NewDict()
		for _, k := range d.keys {
			c.Set(k, d.at(k))
		}
		return c, nil
	}
	return nil, fmt.Errorf("AttributeError: 'dict' object has no attribute '%s'", name)
}

func listMethod(l List, name string, args []any, kwargs *Dict) (any, error) {
	switch name {
	case "index", "count":
		a, err := argsOf(name, args, kwargs, 1, 1)
		if err != nil {
			return nil, err
		}
		n := 0
		for i, x := range l {
			if equal(x, a[0]) {
				if name == "index" {
					return i, nil
				}
				n++
			}
		}
		if name == "index" {
			return nil, fmt.Errorf("ValueError: %s is not in list", repr(a[0]))
		}
		return n, nil
	case "copy":
		return append(List{}, l...), nil
	}
	return nil, fmt.Errorf("AttributeError: 'list' object has no attribute '%s'", name)
}

func strArg(fn string, v any) (string, error) {
	v = plain(v)
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("TypeError: %s arg must be None or str, not %s", fn, typeName(v))
	}
	return s, nil
}

// pyStrip is str.strip/lstrip/rstrip: whitespace, or the characters of
// chars.
func pyStrip(s string, chars any, left, right bool) (string, error) {
	cut := isSpaceRune
	if chars != nil {
		cs, err := strArg("strip", chars)
		if err != nil {
			return "", err
		}
		cut = func(r rune) bool { return strings.ContainsRune(cs, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s, nil
}

func strMethod(s, name string, args []any, kwargs *Dict) (any, error) {
	switch name {
	case "strip", "lstrip", "rstrip":
		a, err := argsOf(name, args, kwargs, 0, 1)
		if err != nil {
			return nil, err
		}
		return pyStrip(s, a[0], name != "rstrip", name != "lstrip")
	case "split", "rsplit":
		a, err := argsOf(name, args, kwargs, 0, 2, "sep", "maxsplit")
		if err != nil {
			return nil, err
		}
		n := -1
		if a[1] != nil {
			m, ok := asInt(a[1])
			if !ok {
				return nil, errors.New("TypeError: maxsplit must be an integer")
			}
			n = m
		}
		return pySplit(s, a[0], n, name == "rsplit")
	case "startswith", "endswith":
		a, err := argsOf(name, args, kwargs, 1, 1)
		if err != nil {
			return nil, err
		}
		test := strings.HasPrefix
		if name == "endswith" {
			test = strings.HasSuffix
		}
		var cands []any
		switch p := a[0].(type) {
		case string:
			cands = []any{p}
		case Tuple:
			cands = p
		default:
			return nil, fmt.Errorf("TypeError: %s first arg must be str or a tuple of str, not %s", name, typeName(a[0]))
		}
		for _, c := range cands {
			cs, ok := c.(string)
			if !ok {
				return nil, fmt.Errorf("TypeError: tuple for %s must only contain str, not %s", name, typeName(c))
			}
			if test(s, cs) {
				return true, nil
			}
		}
		return false, nil
	case "replace":
		a, err := argsOf(name, args, kwargs, 2, 3)
		if err != nil {
			return nil, err
		}
		old, err := strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		repl, err := strArg(name, a[1])
		if err != nil {
			return nil, err
		}
		n := -1
		if a[2] != nil {
			n, _ = asInt(a[2])
		}
		return pyReplace(s, old, repl, n), nil
	case "upper":
		return strings.ToUpper(s), nil
	case "lower":
		return strings.ToLower(s), nil
	case "title":
		return pyTitle(s), nil
	case "capitalize":
		return pyCapitalize(s), nil
	case "format":
		return pyFormat(s, args, kwargs)
	case "find", "rfind", "index", "count":
		a, err := argsOf(name, args, kwargs, 1, 1)
		if err != nil {
			return nil, err
		}
		sub, err := strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		var i int
		switch name {
		case "count":
			if sub == "" {
				return len([]rune(s)) + 1, nil
			}
			return strings.Count(s, sub), nil
		case "rfind":
			i = strings.LastIndex(s, sub)
		default:
			i = strings.Index(s, sub)
		}
		if i >= 0 {
			i = len([]rune(s[:i]))
		} else if name == "index" {
			return nil, errors.New("ValueError: substring not found")
		}
		return i, nil
	case "join":
		a, err := argsOf(name, args, kwargs, 1, 1)
		if err != nil {
			return nil, err
		}
		items, err := iterate(a[0])
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		for i, x := range items {
			p, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("TypeError: sequence item %d: expected str instance, %s found", i, typeName(x))
			}
			parts[i] = p
		}
		return strings.Join(parts, s), nil
	case "splitlines":
		out := List{}
		for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
			out = append(out, l)
		}
		if strings.HasSuffix(s, "\n") {
			out = out[:len(out)-1]
		}
		if s == "" {
			out = List{}
		}
		return out, nil
	case "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper":
		return strIs(s, name), nil
	case "removeprefix", "removesuffix":
		a, err := argsOf(name, args, kwargs, 1, 1)
		if err != nil {
			return nil, err
		}
		p, err := strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		if name == "removeprefix" {
			return strings.TrimPrefix(s, p), nil
		}
		return strings.TrimSuffix(s, p), nil
	}
	return nil, fmt.Errorf("AttributeError: 'str' object has no attribute '%s'", name)
}

func strIs(s, name string) bool {
	if s == "" {
		return false
	}
	cased := false
	for _, r := range s {
		switch name {
		case "isdigit":
			if !unicode.IsDigit(r) {
				return false
			}
		case "isalpha":
			if !unicode.IsLetter(r) {
				return false
			}
		case "isalnum":
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsNumber(r) {
				return false
			}
		case "isspace":
			if !isSpaceRune(r) {
				return false
			}
		case "islower":
			if unicode.IsUpper(r) || unicode.IsTitle(r) {
				return false
			}
			cased = cased || unicode.IsLower(r)
		case "isupper":
			if unicode.IsLower(r) || unicode.IsTitle(r) {
				return false
			}
			cased = cased || unicode.IsUpper(r)
		}
	}
	if name == "islower" || name == "isupper" {
		return cased
	}
	return true
}

// pySplit is str.split / str.rsplit.
func pySplit(s string, sep any, maxsplit int, fromRight bool) (any, error) {
	var parts []string
	if sep == nil {
		fields := strings.FieldsFunc(s, isSpaceRune)
		if maxsplit < 0 || maxsplit >= len(fields)-1 {
			parts = fields
		} else if !fromRight {
			// Split off maxsplit leading fields; the rest keeps its inner
			// whitespace and loses only leading whitespace.
			rest := strings.TrimLeftFunc(s, isSpaceRune)
			for i := 0; i < maxsplit; i++ {
				j := strings.IndexFunc(rest, isSpaceRune)
				parts = append(parts, rest[:j])
				rest = strings.TrimLeftFunc(rest[j:], isSpaceRune)
			}
			parts = append(parts, rest)
		} else {
			rest := strings.TrimRightFunc(s, isSpaceRune)
			var tail []string
			for i := 0; i < maxsplit; i++ {
				j := strings.LastIndexFunc(rest, isSpaceRune)
				_, size := utf8.DecodeRuneInString(rest[j:])
				tail = append([]string{rest[j+size:]}, tail...)
				rest = strings.TrimRightFunc(rest[:j], isSpaceRune)
			}
			parts = append([]string{rest}, tail...)
		}
	} else {
		sp, err := strArg("split", sep)
		if err != nil {
			return nil, err
		}
		if sp == "" {
			return nil, errors.New("ValueError: empty separator")
		}
		switch {
		case maxsplit < 0:
			parts = strings.Split(s, sp)
		case !fromRight:
			parts = strings.SplitN(s, sp, maxsplit+1)
		default:
			rest := s
			var tail []string
			for i := 0; i < maxsplit; i++ {
				j := strings.LastIndex(rest, sp)
				if j < 0 {
					break
				}
				tail = append([]string{rest[j+len(sp):]}, tail...)
				rest = rest[:j]
			}
			parts = append([]string{rest}, tail...)
		}
	}
	out := make(List, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func pyReplace(s, old, repl string, n int) string {
	if old == "" {
		// Python inserts repl between every character and at both ends.
		rs := []rune(s)
		var b strings.Builder
		count := 0
		for i := 0; i <= len(rs); i++ {
			if n < 0 || count < n {
				b.WriteString(repl)
				count++
			}
			if i < len(rs) {
				b.WriteRune(rs[i])
			}
		}
		return b.String()
	}
	return strings.Replace(s, old, repl, n)
}

func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		switch {
		case unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r):
			if prevCased {
				b.WriteRune(unicode.ToLower(r))
			} else {
				b.WriteRune(unicode.ToTitle(r))
			}
			prevCased = true
		default:
			b.WriteRune(r)
			prevCased = false
		}
	}
	return b.String()
}

func pyCapitalize(s string) string {
	rs := []rune(s)
	for i, r := range rs {
		if i == 0 {
			rs[i] = unicode.ToTitle(r)
		} else {
			rs[i] = unicode.ToLower(r)
		}
	}
	return string(rs)
}

// pyFormat is str.format for the replacement fields templates use: {},
// {0}, {name}, with an optional conversion (!r, !s) and no format spec
// beyond an empty one.
func pyFormat(s string, args []any, kwargs *Dict) (any, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '{' {
			if i+1 < len(s) && s[i+1] == '{' {
				b.WriteByte('{')
				i++
				continue
			}
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, errors.New("ValueError: Single '{' encountered in format string")
			}
			field := s[i+1 : i+end]
			i += end
			conv := ""
			if k := strings.IndexByte(field, '!'); k >= 0 {
				field, conv = field[:k], field[k+1:]
			}
			if k := strings.IndexByte(field, ':'); k >= 0 {
				if field[k+1:] != "" {
					return nil, fmt.Errorf("format spec %q is not supported", field[k+1:])
				}
				field = field[:k]
			}
			var v any
			switch {
			case field == "":
				if auto >= len(args) {
					return nil, fmt.Errorf("IndexError: Replacement index %d out of range for positional args tuple", auto)
				}
				v = args[auto]
				auto++
			case field[0] >= '0' && field[0] <= '9':
				n := 0
				for _, d := range field {
					if d < '0' || d > '9' {
						return nil, fmt.Errorf("format field %q is not supported", field)
					}
					n = n*10 + int(d-'0')
				}
				if n >= len(args) {
					return nil, fmt.Errorf("IndexError: Replacement index %d out of range for positional args tuple", n)
				}
				v = args[n]
			default:
				x, ok := kwargs.Get(field)
				if !ok {
					return nil, fmt.Errorf("KeyError: %s", strRepr(field))
				}
				v = x
			}
			switch conv {
			case "r":
				b.WriteString(repr(v))
			case "", "s":
				b.WriteString(toStr(v))
			default:
				return nil, fmt.Errorf("ValueError: Unknown conversion specifier %s", conv)
			}
			continue
		}
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				i++
			}
			b.WriteByte('}')
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// percentFormat is Python's `fmt % args` for %s, %d, %r and %%.
func percentFormat(f string, arg any) (any, error) {
	args := []any{arg}
	if t, ok := arg.(Tuple); ok {
		args = t
	}
	var b strings.Builder
	k := 0
	next := func() (any, error) {
		if k >= len(args) {
			return nil, errors.New("TypeError: not enough arguments for format string")
		}
		k++
		return args[k-1], nil
	}
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case '%':
			b.WriteByte('%')
		case 's', 'r', 'd', 'i':
			v, err := next()
			if err != nil {
				return nil, err
			}
			switch f[i] {
			case 's':
				b.WriteString(toStr(v))
			case 'r':
				b.WriteString(repr(v))
			default:
				switch n := v.(type) {
				case int:
					fmt.Fprint(&b, n)
				case float64:
					fmt.Fprint(&b, int(n))
				case bool:
					b.WriteString(map[bool]string{true: "1", false: "0"}[n])
				default:
					return nil, fmt.Errorf("TypeError: %%d format: a real number is required, not %s", typeName(v))
				}
			}
		default:
			return nil, fmt.Errorf("format %%%c is not supported", f[i])
		}
	}
	if k < len(args) {
		return nil, errors.New("TypeError: not all arguments converted during string formatting")
	}
	return b.String(), nil
}
