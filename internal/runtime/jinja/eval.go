package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Template is a parsed template; it is safe for concurrent use.
type Template struct {
	body []node
}

// Parse parses a template with the settings transformers gives Jinja for
// chat templates (trim_blocks, lstrip_blocks, loop controls, the
// {% generation %} tag). Errors are *SyntaxError, naming the construct and
// its line.
func Parse(source string) (*Template, error) {
	body, err := parse(source)
	if err != nil {
		return nil, err
	}
	if err := checkNames(body, false); err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Limits of one rendering: a template is code a model's author wrote, run
// on every request, so its work is bounded.
const (
	// MaxOutput is the most bytes a rendering may write, in all (text a
	// macro or set block builds counts too); a prompt is a few MiB at most.
	MaxOutput = 32 << 20
	// maxDepth is the deepest macro call nesting.
	maxDepth = 200
)

// maxSteps bounds the work of one rendering (see renderer.charge): a
// template quadratic in the messages (one that, for each message, looks at
// the ones after it) still renders thousands of messages within it, in
// a few seconds at most. A variable so that tests can lower it.
var maxSteps = 10_000_000

// Error is a failure while rendering: what went wrong and on which line.
// It wraps the error a template function returned (raise_exception's).
type Error struct {
	Line int
	Err  error
}

// Error implements error: the line, then what went wrong.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return e.Err.Error()
}

// Unwrap is the error a template function returned, so callers find
// their own (raise_exception's) with errors.As.
func (e *Error) Unwrap() error { return e.Err }

var (
	errBreak    = errors.New("break outside of a loop")
	errContinue = errors.New("continue outside of a loop")
)

// scope holds the variables one block level sets. A loop iteration sets
// a few (the loop variable, its target, some set statements), so the
// first are held inline and a map is made only past them.
type scope struct {
	names  [4]string
	values [4]any
	n      int
	more   map[string]any
	parent *scope
}

func newScope(parent *scope) *scope { return &scope{parent: parent} }

func (s *scope) get(name string) (any, bool) {
	for i := 0; i < s.n; i++ {
		if s.names[i] == name {
			return s.values[i], true
		}
	}
	v, ok := s.more[name]
	return v, ok
}

func (s *scope) set(name string, v any) {
	for i := 0; i < s.n; i++ {
		if s.names[i] == name {
			s.values[i] = v
			return
		}
	}
	if s.n < len(s.names) {
		s.names[s.n], s.values[s.n] = name, v
		s.n++
		return
	}
	if s.more == nil {
		s.more = map[string]any{}
	}
	s.more[name] = v
}

func (s *scope) lookup(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.get(name); ok {
			return v, true
		}
	}
	return nil, false
}

type renderer struct {
	steps int
	depth int
	size  int
	// memory, when set (RenderCharged), is told of the memory the output
	// will take before it is written; charged is the output bytes it has
	// been told of, refused the error with which it refused more.
	memory  func(n int64) error
	charged int64
	refused error
}

// OutputMemoryFactor is the memory a rendering takes per byte it writes:
// the builders' doubling and the strings written into them. A rendering
// that wrote 30 MB allocated 5.7 bytes a byte of it in all, 2.2 of them
// live at its end.
const OutputMemoryFactor = 6

// minChargeStep is the fewest output bytes RenderCharged charges at once;
// it charges ahead by a quarter of what it has charged past that, so a
// large rendering is charged a few dozen times, not at every write.
const minChargeStep = 16 << 10

// Render renders the template with vars as its globals (messages, tools,
// bos_token…, and Funcs such as raise_exception). Values must be of the
// types listed in value.go (FromJSON and NewDict make them).
func (t *Template) Render(vars map[string]any) (string, error) {
	return t.RenderCharged(vars, nil)
}

// RenderCharged renders as Render does, first telling charge, when set,
// of the memory its output will take (OutputMemoryFactor a byte, charged
// ahead in steps): a request's rendering is counted against the pod's
// budget where its memory is made, however small the request that made
// it. An error from charge ends the rendering and is returned as it is.
func (t *Template) RenderCharged(vars map[string]any, charge func(n int64) error) (string, error) {
	globals := newScope(nil)
	for k, v := range builtinGlobals {
		globals.set(k, v)
	}
	for k, v := range vars {
		globals.set(k, v)
	}
	r := &renderer{memory: charge}
	var b strings.Builder
	err := r.exec(t.body, newScope(globals), &b)
	switch {
	case r.refused != nil:
		return "", r.refused
	case errors.Is(err, errBreak), errors.Is(err, errContinue):
		return "", &Error{Err: err}
	case err != nil:
		return "", err
	}
	return b.String(), nil
}

func (r *renderer) write(b *strings.Builder, s string) error {
	r.size += len(s)
	if r.size > MaxOutput {
		return &Error{Err: fmt.Errorf("output exceeds %d bytes", MaxOutput)}
	}
	if err := r.chargeOutput(); err != nil {
		return err
	}
	b.WriteString(s)
	return nil
}

// chargeOutput charges the output written so far, and a step ahead of
// it, when it has outgrown what was charged.
func (r *renderer) chargeOutput() error {
	if r.memory == nil || int64(r.size) <= r.charged {
		return nil
	}
	step := max(int64(r.size)-r.charged, r.charged/4, minChargeStep)
	if err := r.memory(step * OutputMemoryFactor); err != nil {
		r.refused = err
		return err
	}
	r.charged += step
	return nil
}

func (r *renderer) step() error { return r.charge(1) }

// charge counts n steps of work: a statement or loop iteration is one, an
// operation over a collection (a filter, `in`, ==, a call that returns a
// list) one per item, so that no template runs unbounded work between
// statements.
func (r *renderer) charge(n int) error {
	r.steps += n
	if r.steps > maxSteps {
		return &Error{Err: fmt.Errorf("template ran more than %d steps", maxSteps)}
	}
	return nil
}

// cost is the work an operation over v does: its items, or a step per KiB
// of a string.
func cost(v any) int {
	switch t := v.(type) {
	case List:
		return len(t)
	case Tuple:
		return len(t)
	case *Dict:
		return t.Len()
	case *dictView:
		return t.d.Len()
	case *generator:
		return len(t.items)
	case string:
		return len(t) >> 10
	case Markup:
		return len(t) >> 10
	}
	return 0
}

func (r *renderer) exec(body []node, s *scope, b *strings.Builder) error {
	for _, n := range body {
		if err := r.step(); err != nil {
			return err
		}
		if err := r.execNode(n, s, b); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) execNode(n node, s *scope, b *strings.Builder) error {
	switch n := n.(type) {
	case *textNode:
		return r.write(b, n.text)
	case *outputNode:
		v, err := r.eval(n.expr, s)
		if err != nil {
			return err
		}
		return r.write(b, toStr(v))
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c, s)
			if err != nil {
				return err
			}
			if truthy(v) {
				return r.exec(n.bodies[i], s, b)
			}
		}
		return r.exec(n.orElse, s, b)
	case *forNode:
		return r.execFor(n, s, b)
	case *setNode:
		v, err := r.eval(n.value, s)
		if err != nil {
			return err
		}
		return r.assign(n.target, v, s)
	case *setBlockNode:
		var inner strings.Builder
		if err := r.exec(n.body, s, &inner); err != nil {
			return err
		}
		var v any = inner.String()
		for _, f := range n.filters {
			var err error
			if v, err = r.applyFilter(f, v, s); err != nil {
				return err
			}
		}
		return r.assign(n.target, v, s)
	case *macroNode:
		s.set(n.name, &macro{node: n, closure: s})
		return nil
	case *filterBlockNode:
		var inner strings.Builder
		if err := r.exec(n.body, s, &inner); err != nil {
			return err
		}
		var v any = inner.String()
		for _, f := range n.filters {
			var err error
			if v, err = r.applyFilter(f, v, s); err != nil {
				return err
			}
		}
		return r.write(b, toStr(v))
	case *callBlockNode:
		caller := &macro{node: &macroNode{name: "caller", params: n.params, defaults: n.defaults, body: n.body}, closure: s}
		fn, err := r.eval(n.call.fn, s)
		if err != nil {
			return err
		}
		args, err := r.evalArgs(n.call.args, s)
		if err != nil {
			return err
		}
		kwargs, err := r.evalKwargs(n.call.kwargs, s)
		if err != nil {
			return err
		}
		kwargs.Set("caller", caller)
		v, err := r.call(fn, args, kwargs)
		if err != nil {
			var te *Error
			if errors.As(err, &te) {
				return err
			}
			return &Error{Line: n.call.line, Err: err}
		}
		return r.write(b, toStr(v))
	case *breakNode:
		return errBreak
	case *continueNode:
		return errContinue
	}
	return fmt.Errorf("unknown node %T", n)
}

func (r *renderer) assign(target expr, v any, s *scope) error {
	switch t := target.(type) {
	case *nameExpr:
		s.set(t.name, v)
		return nil
	case *attrExpr:
		obj, err := r.eval(t.obj, s)
		if err != nil {
			return err
		}
		ns, ok := obj.(*namespace)
		if !ok {
			return &Error{Line: t.line, Err: errors.New("TemplateRuntimeError: cannot assign attribute on non-namespace object")}
		}
		ns.attrs.Set(t.name, v)
		return nil
	case *tupleExpr:
		items, err := iterate(v)
		if err != nil {
			return &Error{Err: fmt.Errorf("cannot unpack: %w", err)}
		}
		if len(items) != len(t.items) {
			return &Error{Err: fmt.Errorf("ValueError: cannot unpack %d values into %d names", len(items), len(t.items))}
		}
		for i, x := range t.items {
			if err := r.assign(x, items[i], s); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("cannot assign to %T", target)
}

func (r *renderer) execFor(n *forNode, s *scope, b *strings.Builder) error {
	iv, err := r.eval(n.iter, s)
	if err != nil {
		return err
	}
	return r.loop(n, iv, s, b, 1)
}

// loop runs a for loop over iv; a recursive loop's loop(items) runs it
// again, one level deeper, where it is called.
func (r *renderer) loop(n *forNode, iv any, s *scope, b *strings.Builder, depth int) error {
	items, err := iterate(iv)
	if err != nil {
		return &Error{Line: n.line, Err: err}
	}
	if n.cond != nil {
		kept := make([]any, 0, len(items))
		for _, it := range items {
			if err := r.step(); err != nil {
				return err
			}
			is := newScope(s)
			if err := r.assign(n.target, it, is); err != nil {
				return err
			}
			c, err := r.eval(n.cond, is)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.exec(n.orElse, s, b)
	}
	// depth counts recursive loop(...) calls: a nested for loop has a loop
	// of its own at depth 1, as in Jinja.
	loop := &loopInfo{items: items, depth: depth}
	if n.recursive {
		loop.recurse = func(v any) (string, error) {
			if r.depth >= maxDepth {
				return "", fmt.Errorf("recursive loop nests deeper than %d", maxDepth)
			}
			r.depth++
			defer func() { r.depth-- }()
			var inner strings.Builder
			err := r.loop(n, v, s, &inner, depth+1)
			return inner.String(), err
		}
	}
	for i, it := range items {
		if err := r.step(); err != nil {
			return err
		}
		loop.index = i
		is := newScope(s)
		is.set("loop", loop)
		if err := r.assign(n.target, it, is); err != nil {
			return err
		}
		err := r.exec(n.body, is, b)
		switch {
		case errors.Is(err, errBreak):
			return nil
		case errors.Is(err, errContinue):
		case err != nil:
			return err
		}
	}
	return nil
}

// macro is a {% macro %}: called, it renders its body with its arguments
// in a scope whose parent is where it was defined.
type macro struct {
	node    *macroNode
	closure *scope
}

func (r *renderer) callMacro(m *macro, args []any, kwargs *Dict) (any, error) {
	if r.depth >= maxDepth {
		return nil, fmt.Errorf("macro calls nest deeper than %d", maxDepth)
	}
	n := m.node
	if len(args) > len(n.params) {
		return nil, fmt.Errorf("TypeError: macro '%s' takes not more than %d argument(s)", n.name, len(n.params))
	}
	s := newScope(m.closure)
	for i, p := range n.params {
		if i < len(args) {
			s.set(p, args[i])
		}
	}
	for _, k := range kwargs.Keys() {
		name, _ := k.(string)
		if name == "caller" {
			// A {% call %} block's body, which the macro renders with
			// caller().
			c, _ := kwargs.Get(k)
			s.set("caller", c)
			continue
		}
		found := false
		for i, p := range n.params {
			if p == name {
				if i < len(args) {
					return nil, fmt.Errorf("TypeError: macro '%s' got multiple values for argument '%s'", n.name, name)
				}
				v, _ := kwargs.Get(k)
				s.set(p, v)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("TypeError: macro '%s' takes no keyword argument '%s'", n.name, name)
		}
	}
	firstDefault := len(n.params) - len(n.defaults)
	for i, p := range n.params {
		if _, ok := s.get(p); ok {
			continue
		}
		if i >= firstDefault {
			v, err := r.eval(n.defaults[i-firstDefault], s)
			if err != nil {
				return nil, err
			}
			s.set(p, v)
		} else {
			s.set(p, Undefined{Hint: fmt.Sprintf("parameter '%s' was not provided", p)})
		}
	}
	r.depth++
	defer func() { r.depth-- }()
	var b strings.Builder
	if err := r.exec(n.body, s, &b); err != nil {
		return nil, err
	}
	return b.String(), nil
}

// undefinedError is the error of using an Undefined other than printing,
// testing or iterating it.
func undefinedError(u Undefined) error {
	if strings.Contains(u.Hint, "unsafe") {
		return errors.New("SecurityError: " + u.Hint)
	}
	return errors.New("UndefinedError: " + u.Hint)
}

// evalAll evaluates items in order (a list's or a tuple's).
func (r *renderer) evalAll(items []expr, s *scope) ([]any, error) {
	out := make([]any, len(items))
	for i, x := range items {
		v, err := r.eval(x, s)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r *renderer) eval(e expr, s *scope) (any, error) {
	switch e := e.(type) {
	case *constExpr:
		return e.v, nil
	case *nameExpr:
		if v, ok := s.lookup(e.name); ok {
			return v, nil
		}
		return Undefined{Hint: fmt.Sprintf("'%s' is undefined", e.name)}, nil
	case *listExpr:
		out, err := r.evalAll(e.items, s)
		if err != nil {
			return nil, err
		}
		return List(out), nil
	case *tupleExpr:
		out, err := r.evalAll(e.items, s)
		if err != nil {
			return nil, err
		}
		return Tuple(out), nil
	case *dictExpr:
		d := NewDict()
		for i := range e.keys {
			k, err := r.eval(e.keys[i], s)
			if err != nil {
				return nil, err
			}
			v, err := r.eval(e.vals[i], s)
			if err != nil {
				return nil, err
			}
			if _, ok := hashKey(k); !ok {
				return nil, &Error{Err: fmt.Errorf("TypeError: unhashable type: '%s'", typeName(k))}
			}
			d.Set(k, v)
		}
		return d, nil
	case *attrExpr:
		obj, err := r.eval(e.obj, s)
		if err != nil {
			return nil, err
		}
		v, err := getAttr(obj, e.name)
		if err != nil {
			return nil, &Error{Line: e.line, Err: err}
		}
		return v, nil
	case *itemExpr:
		obj, err := r.eval(e.obj, s)
		if err != nil {
			return nil, err
		}
		key, err := r.eval(e.key, s)
		if err != nil {
			return nil, err
		}
		v, err := getItem(obj, key)
		if err != nil {
			return nil, &Error{Line: e.line, Err: err}
		}
		return v, nil
	case *sliceExpr:
		return r.evalSlice(e, s)
	case *callExpr:
		return r.evalCall(e, s)
	case *filterExpr:
		v, err := r.eval(e.x, s)
		if err != nil {
			return nil, err
		}
		return r.applyFilter(e, v, s)
	case *testExpr:
		v, err := r.eval(e.x, s)
		if err != nil {
			return nil, err
		}
		args, err := r.evalArgs(e.args, s)
		if err != nil {
			return nil, err
		}
		ok, err := r.runTest(e.name, v, args, s)
		if err != nil {
			return nil, &Error{Line: e.line, Err: err}
		}
		return ok != e.negated, nil
	case *unaryExpr:
		v, err := r.eval(e.x, s)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch t := v.(type) {
			case int:
				return -t, nil
			case float64:
				return -t, nil
			case bool:
				if t {
					return -1, nil
				}
				return 0, nil
			}
			return nil, &Error{Err: fmt.Errorf("TypeError: bad operand type for unary -: '%s'", typeName(v))}
		case "+":
			if _, ok := number(v); !ok {
				return nil, &Error{Err: fmt.Errorf("TypeError: bad operand type for unary +: '%s'", typeName(v))}
			}
			if b, ok := v.(bool); ok {
				if b {
					return 1, nil
				}
				return 0, nil
			}
			return v, nil
		}
	case *binExpr:
		l, err := r.eval(e.l, s)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "and":
			if !truthy(l) {
				return l, nil
			}
			return r.eval(e.r, s)
		case "or":
			if truthy(l) {
				return l, nil
			}
			return r.eval(e.r, s)
		}
		rv, err := r.eval(e.r, s)
		if err != nil {
			return nil, err
		}
		v, err := arith(e.op, l, rv)
		if err != nil {
			return nil, &Error{Line: e.line, Err: err}
		}
		return v, nil
	case *compareExpr:
		l, err := r.eval(e.first, s)
		if err != nil {
			return nil, err
		}
		for i, op := range e.ops {
			rv, err := r.eval(e.rest[i], s)
			if err != nil {
				return nil, err
			}
			if err := r.charge(cost(l) + cost(rv)); err != nil {
				return nil, err
			}
			ok, err := compareOp(op, l, rv)
			if err != nil {
				return nil, &Error{Line: e.line, Err: err}
			}
			if !ok {
				return false, nil
			}
			l = rv
		}
		return true, nil
	case *concatExpr:
		var b strings.Builder
		for _, x := range e.items {
			v, err := r.eval(x, s)
			if err != nil {
				return nil, err
			}
			b.WriteString(toStr(v))
		}
		return b.String(), nil
	case *condExpr:
		t, err := r.eval(e.test, s)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return r.eval(e.yes, s)
		}
		if e.no == nil {
			return Undefined{Hint: "the inline if-expression evaluated to false and no else section was defined"}, nil
		}
		return r.eval(e.no, s)
	}
	return nil, fmt.Errorf("unknown expression %T", e)
}

func (r *renderer) evalArgs(es []expr, s *scope) ([]any, error) {
	out := make([]any, len(es))
	for i, x := range es {
		v, err := r.eval(x, s)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r *renderer) evalKwargs(ks []kwarg, s *scope) (*Dict, error) {
	d := NewDict()
	for _, k := range ks {
		v, err := r.eval(k.value, s)
		if err != nil {
			return nil, err
		}
		d.Set(k.name, v)
	}
	return d, nil
}

func (r *renderer) evalCall(e *callExpr, s *scope) (any, error) {
	fn, err := r.eval(e.fn, s)
	if err != nil {
		return nil, err
	}
	args, err := r.evalArgs(e.args, s)
	if err != nil {
		return nil, err
	}
	kwargs, err := r.evalKwargs(e.kwargs, s)
	if err != nil {
		return nil, err
	}
	v, err := r.call(fn, args, kwargs)
	if err != nil {
		var te *Error
		if errors.As(err, &te) {
			return nil, err
		}
		return nil, &Error{Line: e.line, Err: err}
	}
	if err := r.charge(cost(v)); err != nil {
		return nil, err
	}
	return v, nil
}

func (r *renderer) call(fn any, args []any, kwargs *Dict) (any, error) {
	switch f := fn.(type) {
	case *macro:
		return r.callMacro(f, args, kwargs)
	case Func:
		return f(args, kwargs)
	case func(args []any, kwargs *Dict) (any, error):
		return f(args, kwargs)
	case *boundMethod:
		return r.callMethod(f, args, kwargs)
	case *loopInfo:
		if f.recurse == nil {
			return nil, errors.New("TypeError: Tried to call non recursive loop. Maybe you forgot the 'recursive' modifier.")
		}
		if len(args) != 1 || kwargs.Len() > 0 {
			return nil, errors.New("TypeError: loop() takes exactly one argument")
		}
		return f.recurse(args[0])
	case Undefined:
		return nil, undefinedError(f)
	}
	return nil, fmt.Errorf("TypeError: '%s' object is not callable", typeName(fn))
}

func (r *renderer) evalSlice(e *sliceExpr, s *scope) (any, error) {
	obj, err := r.eval(e.obj, s)
	if err != nil {
		return nil, err
	}
	obj = plain(obj)
	bound := func(x expr) (any, error) {
		if x == nil {
			return nil, nil
		}
		return r.eval(x, s)
	}
	start, err := bound(e.start)
	if err != nil {
		return nil, err
	}
	stop, err := bound(e.stop)
	if err != nil {
		return nil, err
	}
	step, err := bound(e.step)
	if err != nil {
		return nil, err
	}
	var seq []any
	_, isStr := obj.(string)
	var runes []rune
	switch t := obj.(type) {
	case string:
		runes = []rune(t)
		seq = make([]any, len(runes))
	case List:
		seq = t
	case Tuple:
		seq = t
	case Undefined:
		return nil, undefinedError(t)
	default:
		return nil, fmt.Errorf("TypeError: '%s' object is not subscriptable", typeName(obj))
	}
	idx, err := sliceIndexes(len(seq), start, stop, step)
	if err != nil {
		return nil, err
	}
	if isStr {
		var b strings.Builder
		for _, i := range idx {
			b.WriteRune(runes[i])
		}
		return b.String(), nil
	}
	out := make([]any, len(idx))
	for k, i := range idx {
		out[k] = seq[i]
	}
	if _, ok := obj.(Tuple); ok {
		return Tuple(out), nil
	}
	return List(out), nil
}

// sliceIndexes are the indexes seq[start:stop:step] selects, as Python
// computes them.
func sliceIndexes(n int, start, stop, step any) ([]int, error) {
	asInt := func(v any, name string) (int, bool, error) {
		switch t := v.(type) {
		case nil:
			return 0, false, nil
		case int:
			return t, true, nil
		case bool:
			if t {
				return 1, true, nil
			}
			return 0, true, nil
		}
		return 0, false, fmt.Errorf("TypeError: slice %s must be an integer or None", name)
	}
	st, hasStep, err := asInt(step, "step")
	if err != nil {
		return nil, err
	}
	if !hasStep {
		st = 1
	}
	if st == 0 {
		return nil, errors.New("ValueError: slice step cannot be zero")
	}
	lo, hasLo, err := asInt(start, "start")
	if err != nil {
		return nil, err
	}
	hi, hasHi, err := asInt(stop, "stop")
	if err != nil {
		return nil, err
	}
	clamp := func(i, lower, upper int) int {
		if i < 0 {
			i += n
			if i < lower {
				i = lower
			}
		} else if i > upper {
			i = upper
		}
		return i
	}
	var idx []int
	if st > 0 {
		if !hasLo {
			lo = 0
		} else {
			lo = clamp(lo, 0, n)
		}
		if !hasHi {
			hi = n
		} else {
			hi = clamp(hi, 0, n)
		}
		for i := lo; i < hi; i += st {
			idx = append(idx, i)
		}
	} else {
		if !hasLo {
			lo = n - 1
		} else {
			lo = clamp(lo, -1, n-1)
		}
		if !hasHi {
			hi = -1
		} else {
			hi = clamp(hi, -1, n-1)
		}
		for i := lo; i > hi; i += st {
			idx = append(idx, i)
		}
	}
	return idx, nil
}

// arith is Python's binary operators on template values.
func arith(op string, l, r any) (any, error) {
	if u, ok := l.(Undefined); ok {
		return nil, undefinedError(u)
	}
	if u, ok := r.(Undefined); ok {
		return nil, undefinedError(u)
	}
	_, lMarkup := l.(Markup)
	_, rMarkup := r.(Markup)
	if op == "+" && (lMarkup || rMarkup) {
		ls, lok := plain(l).(string)
		rs, rok := plain(r).(string)
		if lok && rok {
			if !lMarkup {
				ls = htmlEscape(ls)
			}
			if !rMarkup {
				rs = htmlEscape(rs)
			}
			return Markup(ls + rs), nil
		}
	}
	l, r = plain(l), plain(r)
	li, lInt := asInt(l)
	ri, rInt := asInt(r)
	lf, lNum := number(l)
	rf, rNum := number(r)
	if lNum && rNum {
		switch op {
		case "+":
			if lInt && rInt {
				return li + ri, nil
			}
			return lf + rf, nil
		case "-":
			if lInt && rInt {
				return li - ri, nil
			}
			return lf - rf, nil
		case "*":
			if lInt && rInt {
				return li * ri, nil
			}
			return lf * rf, nil
		case "/":
			if rf == 0 {
				return nil, errors.New("ZeroDivisionError: division by zero")
			}
			return lf / rf, nil
		case "//":
			if rf == 0 {
				return nil, errors.New("ZeroDivisionError: integer division or modulo by zero")
			}
			if lInt && rInt {
				q := li / ri
				if (li%ri != 0) && ((li < 0) != (ri < 0)) {
					q--
				}
				return q, nil
			}
			return math.Floor(lf / rf), nil
		case "%":
			if rf == 0 {
				return nil, errors.New("ZeroDivisionError: integer division or modulo by zero")
			}
			if lInt && rInt {
				m := li % ri
				if m != 0 && ((m < 0) != (ri < 0)) {
					m += ri
				}
				return m, nil
			}
			m := math.Mod(lf, rf)
			if m != 0 && ((m < 0) != (rf < 0)) {
				m += rf
			}
			return m, nil
		case "**":
			if lInt && rInt && ri >= 0 {
				out := 1
				for i := 0; i < ri; i++ {
					out *= li
				}
				return out, nil
			}
			return math.Pow(lf, rf), nil
		}
	}
	switch op {
	case "+":
		switch x := l.(type) {
		case string:
			if y, ok := r.(string); ok {
				return x + y, nil
			}
			return nil, fmt.Errorf("TypeError: can only concatenate str (not \"%s\") to str", typeName(r))
		case List:
			if y, ok := r.(List); ok {
				return append(append(List{}, x...), y...), nil
			}
			return nil, fmt.Errorf("TypeError: can only concatenate list (not \"%s\") to list", typeName(r))
		case Tuple:
			if y, ok := r.(Tuple); ok {
				return append(append(Tuple{}, x...), y...), nil
			}
		}
	case "*":
		// Repetition is bounded as the output is; n * s is s * n.
		if _, ok := r.(string); ok && lInt {
			l, ri, rInt = r, li, true
		}
		if s, ok := l.(string); ok && rInt {
			if ri > 0 && len(s) > 0 && ri > MaxOutput/len(s) {
				return nil, fmt.Errorf("MemoryError: repeated string exceeds %d bytes", MaxOutput)
			}
			return strings.Repeat(s, max(ri, 0)), nil
		}
		if xs, ok := l.(List); ok && rInt {
			if ri > 0 && len(xs) > 0 && ri > maxSteps/len(xs) {
				return nil, fmt.Errorf("MemoryError: repeated list exceeds %d items", maxSteps)
			}
			var out List
			for i := 0; i < ri; i++ {
				out = append(out, xs...)
			}
			return out, nil
		}
	case "%":
		if s, ok := l.(string); ok {
			return percentFormat(s, r)
		}
	}
	return nil, fmt.Errorf("TypeError: unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
}

func asInt(v any) (int, bool) {
	switch t := v.(type) {
	case int:
		return t, true
	case bool:
		if t {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func compareOp(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in":
		return contains(r, l)
	case "notin":
		ok, err := contains(r, l)
		return !ok, err
	}
	if u, ok := l.(Undefined); ok {
		return false, undefinedError(u)
	}
	if u, ok := r.(Undefined); ok {
		return false, undefinedError(u)
	}
	c, err := compare(l, r)
	if err != nil {
		return false, errors.New(strings.Replace(err.Error(), "'<'", "'"+op+"'", 1))
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	case ">=":
		return c >= 0, nil
	}
	return false, fmt.Errorf("unknown operator %s", op)
}

// contains is Python's `item in container`.
func contains(container, item any) (bool, error) {
	container, item = plain(container), plain(item)
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, fmt.Errorf("TypeError: 'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case List, Tuple:
		for _, x := range seqOf(c) {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		_, ok := c.Get(item)
		return ok, nil
	case Undefined:
		return false, nil
	case *generator, *dictView:
		items, _ := iterate(c)
		for _, x := range items {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case *namespace:
		return false, errors.New("TypeError: argument of type 'Namespace' is not iterable")
	}
	return false, fmt.Errorf("TypeError: argument of type '%s' is not iterable", typeName(container))
}
