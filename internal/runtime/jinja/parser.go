package jinja

import (
	"fmt"
	"strconv"
)

// Statements.
type (
	node interface{}

	textNode   struct{ text string }
	outputNode struct{ expr expr }
	ifNode     struct {
		conds  []expr
		bodies [][]node
		orElse []node
	}
	forNode struct {
		target    expr
		iter      expr
		cond      expr
		body      []node
		orElse    []node
		recursive bool
		line      int
	}
	setNode struct {
		target expr
		value  expr
	}
	setBlockNode struct {
		target  expr
		body    []node
		filters []*filterExpr
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // aligned to the end of params
		body     []node
	}
	filterBlockNode struct {
		filters []*filterExpr
		body    []node
	}
	// callBlockNode is {% call(params) m(args) %}body{% endcall %}: m is
	// called with the body as its caller.
	callBlockNode struct {
		params   []string
		defaults []expr
		call     *callExpr
		body     []node
	}
	breakNode    struct{}
	continueNode struct{}
)

// Expressions.
type (
	expr interface{}

	constExpr struct{ v any }
	nameExpr  struct {
		name string
		line int
	}
	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, vals []expr }
	attrExpr  struct {
		obj  expr
		name string
		line int
	}
	itemExpr struct {
		obj, key expr
		line     int
	}
	sliceExpr struct {
		obj               expr
		start, stop, step expr
	}
	callExpr struct {
		fn     expr
		args   []expr
		kwargs []kwarg
		line   int
	}
	filterExpr struct {
		x      expr // nil in a filter block
		name   string
		args   []expr
		kwargs []kwarg
		line   int
	}
	testExpr struct {
		x       expr
		name    string
		args    []expr
		negated bool
		line    int
	}
	unaryExpr struct {
		op string
		x  expr
	}
	binExpr struct {
		op   string
		l, r expr
		line int
	}
	compareExpr struct {
		first expr
		ops   []string
		rest  []expr
		line  int
	}
	concatExpr struct{ items []expr }
	condExpr   struct{ test, yes, no expr }
)

type kwarg struct {
	name  string
	value expr
}

type parser struct {
	toks []token
	pos  int
	// depth is the nesting of blocks and expressions being parsed, bounded
	// by maxNesting so that a hostile template cannot exhaust the stack.
	depth int
}

// maxNesting bounds how deep blocks and expressions nest.
const maxNesting = 256

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxNesting {
		return p.errf("blocks or expressions nest deeper than %d", maxNesting)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func parse(src string) ([]node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body, end, err := p.subparse()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, p.errf("unexpected '%s' outside of a block", end)
	}
	return body, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

func (p *parser) errf(format string, args ...any) error {
	return &SyntaxError{Line: p.peek().line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.peek()
	return t.kind == tokName && t.val == name
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) skipName(name string) bool {
	if p.isName(name) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.skipOp(op) {
		return p.errf("expected '%s', got %s", op, describe(p.peek()))
	}
	return nil
}

func (p *parser) expectKind(k tokenKind, what string) (token, error) {
	t := p.peek()
	if t.kind != k {
		return t, p.errf("expected %s, got %s", what, describe(t))
	}
	p.pos++
	return t, nil
}

func describe(t token) string {
	switch t.kind {
	case tokEOF:
		return "end of template"
	case tokBlockEnd:
		return "end of statement block"
	case tokVarEnd:
		return "end of print statement"
	case tokText:
		return "text"
	case tokString:
		return strconv.Quote(t.val)
	}
	return "'" + t.val + "'"
}

// endTags are the tags that close or continue a block; subparse stops at
// them and returns the tag's name (the block begin already consumed).
var endTags = map[string]bool{
	"endif": true, "elif": true, "else": true, "endfor": true, "endmacro": true,
	"endset": true, "endfilter": true, "endgeneration": true, "endcall": true,
}

// subparse parses statements up to an end tag (returned) or EOF ("").
func (p *parser) subparse() ([]node, string, error) {
	var body []node
	for {
		t := p.next()
		switch t.kind {
		case tokEOF:
			return body, "", nil
		case tokText:
			body = append(body, &textNode{t.val})
		case tokVarBegin:
			e, err := p.parseTuple(true, false)
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tokVarEnd, "end of print statement"); err != nil {
				return nil, "", err
			}
			body = append(body, &outputNode{e})
		case tokBlockBegin:
			kw := p.peek()
			if kw.kind != tokName {
				return nil, "", p.errf("expected a statement name, got %s", describe(kw))
			}
			if endTags[kw.val] {
				p.pos++
				return body, kw.val, nil
			}
			n, err := p.statement()
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				body = append(body, n)
			}
		default:
			return nil, "", p.errf("unexpected %s", describe(t))
		}
	}
}

// block parses a body that must end with one of ends.
func (p *parser) block(start string, ends ...string) ([]node, string, error) {
	if err := p.enter(); err != nil {
		return nil, "", err
	}
	defer p.leave()
	line := p.peek().line
	body, end, err := p.subparse()
	if err != nil {
		return nil, "", err
	}
	for _, e := range ends {
		if end == e {
			return body, end, nil
		}
	}
	if end == "" {
		return nil, "", &SyntaxError{Line: line, Msg: fmt.Sprintf("'%s' block is never closed (expected '%s')", start, ends[len(ends)-1])}
	}
	return nil, "", p.errf("unexpected '%s' in '%s' block (expected '%s')", end, start, ends[len(ends)-1])
}

func (p *parser) blockEnd() error {
	_, err := p.expectKind(tokBlockEnd, "end of statement block")
	return err
}

func (p *parser) statement() (node, error) {
	kw := p.next()
	switch kw.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor(kw.line)
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "filter":
		return p.parseFilterBlock()
	case "call":
		return p.parseCallBlock()
	case "generation":
		// transformers' tag marking an assistant's generated text: it
		// renders its body.
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		body, _, err := p.block("generation", "endgeneration")
		if err != nil {
			return nil, err
		}
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		return &filterBlockNode{body: body}, nil
	case "break", "continue":
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		if kw.val == "break" {
			return &breakNode{}, nil
		}
		return &continueNode{}, nil
	}
	return nil, &SyntaxError{Line: kw.line, Msg: fmt.Sprintf("unknown statement '%s'", kw.val)}
}

func (p *parser) parseIf() (node, error) {
	n := &ifNode{}
	for {
		cond, err := p.parseTuple(false, false)
		if err != nil {
			return nil, err
		}
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		body, end, err := p.block("if", "elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.blockEnd(); err != nil {
				return nil, err
			}
			if n.orElse, _, err = p.block("if", "endif"); err != nil {
				return nil, err
			}
		}
		return n, p.blockEnd()
	}
}

func (p *parser) parseFor(line int) (node, error) {
	target, err := p.parseAssignTarget()
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		return nil, p.errf("expected 'in' in for loop, got %s", describe(p.peek()))
	}
	iter, err := p.parseTuple(false, true)
	if err != nil {
		return nil, err
	}
	n := &forNode{target: target, iter: iter, line: line}
	if p.skipName("if") {
		if n.cond, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	n.recursive = p.skipName("recursive")
	if err := p.blockEnd(); err != nil {
		return nil, err
	}
	body, end, err := p.block("for", "else", "endfor")
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		if n.orElse, _, err = p.block("for", "endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.blockEnd()
}

// parseAssignTarget is a name, a name.attr (namespace) or a tuple of names.
func (p *parser) parseAssignTarget() (expr, error) {
	one := func() (expr, error) {
		t, err := p.expectKind(tokName, "a variable name")
		if err != nil {
			return nil, err
		}
		if p.skipOp(".") {
			a, err := p.expectKind(tokName, "an attribute name")
			if err != nil {
				return nil, err
			}
			return &attrExpr{obj: &nameExpr{name: t.val, line: t.line}, name: a.val, line: t.line}, nil
		}
		return &nameExpr{name: t.val, line: t.line}, nil
	}
	paren := p.skipOp("(")
	first, err := one()
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") {
		if paren {
			return first, p.expectOp(")")
		}
		return first, nil
	}
	items := []expr{first}
	for p.skipOp(",") {
		if !p.isName("in") && !p.isOp("=") && !p.isOp(")") {
			e, err := one()
			if err != nil {
				return nil, err
			}
			items = append(items, e)
		}
	}
	if paren {
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	return &tupleExpr{items}, nil
}

func (p *parser) parseSet() (node, error) {
	target, err := p.parseAssignTarget()
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		v, err := p.parseTuple(true, false)
		if err != nil {
			return nil, err
		}
		return &setNode{target: target, value: v}, p.blockEnd()
	}
	n := &setBlockNode{target: target}
	for p.skipOp("|") {
		f, err := p.parseFilter(nil)
		if err != nil {
			return nil, err
		}
		n.filters = append(n.filters, f)
	}
	if err := p.blockEnd(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.block("set", "endset"); err != nil {
		return nil, err
	}
	return n, p.blockEnd()
}

func (p *parser) parseMacro() (node, error) {
	name, err := p.expectKind(tokName, "a macro name")
	if err != nil {
		return nil, err
	}
	n := &macroNode{name: name.val}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	if n.params, n.defaults, err = p.parseSignature(); err != nil {
		return nil, err
	}
	if err := p.blockEnd(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.block("macro", "endmacro"); err != nil {
		return nil, err
	}
	// "{% endmacro name %}" is allowed.
	if p.peek().kind == tokName {
		p.pos++
	}
	return n, p.blockEnd()
}

func (p *parser) parseCallBlock() (node, error) {
	n := &callBlockNode{}
	if p.skipOp("(") {
		var err error
		if n.params, n.defaults, err = p.parseSignature(); err != nil {
			return nil, err
		}
	}
	e, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	c, ok := e.(*callExpr)
	if !ok {
		return nil, p.errf("expected a call after 'call'")
	}
	n.call = c
	if err := p.blockEnd(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.block("call", "endcall"); err != nil {
		return nil, err
	}
	return n, p.blockEnd()
}

// parseSignature parses a parameter list after its "(": names, with
// defaults from the first that has one on.
func (p *parser) parseSignature() ([]string, []expr, error) {
	var params []string
	var defaults []expr
	for !p.skipOp(")") {
		if len(params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.skipOp(")") {
				break
			}
		}
		arg, err := p.expectKind(tokName, "a parameter name")
		if err != nil {
			return nil, nil, err
		}
		params = append(params, arg.val)
		if p.skipOp("=") {
			d, err := p.parseExpression(true)
			if err != nil {
				return nil, nil, err
			}
			defaults = append(defaults, d)
		} else if len(defaults) > 0 {
			return nil, nil, p.errf("non-default argument %s follows default argument", arg.val)
		}
	}
	return params, defaults, nil
}

func (p *parser) parseFilterBlock() (node, error) {
	n := &filterBlockNode{}
	for {
		f, err := p.parseFilter(nil)
		if err != nil {
			return nil, err
		}
		n.filters = append(n.filters, f)
		if !p.skipOp("|") {
			break
		}
	}
	if err := p.blockEnd(); err != nil {
		return nil, err
	}
	var err error
	if n.body, _, err = p.block("filter", "endfilter"); err != nil {
		return nil, err
	}
	return n, p.blockEnd()
}

// Expressions, with Jinja's grammar and precedence.

// parseTuple parses an expression or an unparenthesized tuple of them.
// noCondExpr is set where "if" continues the statement (a for loop's
// iterable).
func (p *parser) parseTuple(allowTrailing bool, noCondExpr bool) (expr, error) {
	first, err := p.parseExpression(!noCondExpr)
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") {
		return first, nil
	}
	items := []expr{first}
	for p.skipOp(",") {
		if p.tupleEnds() {
			break
		}
		e, err := p.parseExpression(!noCondExpr)
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &tupleExpr{items}, nil
}

func (p *parser) tupleEnds() bool {
	t := p.peek()
	switch t.kind {
	case tokVarEnd, tokBlockEnd, tokEOF:
		return true
	case tokOp:
		return t.val == ")" || t.val == "]" || t.val == "}"
	case tokName:
		return t.val == "if" || t.val == "recursive" || t.val == "in"
	}
	return false
}

func (p *parser) parseExpression(condExpr bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if condExpr {
		return p.parseCondExpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondExpr() (expr, error) {
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var no expr
		if p.skipName("else") {
			if no, err = p.parseCondExpr(); err != nil {
				return nil, err
			}
		}
		e = &condExpr{test: test, yes: e, no: no}
	}
	return e, nil
}

func (p *parser) parseOr() (expr, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.skipName("or") {
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "or", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (expr, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.skipName("and") {
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "and", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseNot() (expr, error) {
	if p.skipName("not") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op: "not", x: x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	line := p.peek().line
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{first: first, line: line}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tokOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.pos++
		case t.kind == tokName && t.val == "in":
			op = "in"
			p.pos++
		case t.kind == tokName && t.val == "not" && p.toks[p.pos+1].kind == tokName && p.toks[p.pos+1].val == "in":
			op = "notin"
			p.pos += 2
		default:
			if len(c.ops) == 0 {
				return first, nil
			}
			return c, nil
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
}

func (p *parser) parseMath1() (expr, error) {
	l, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		t := p.next()
		r, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: t.val, l: l, r: r, line: t.line}
	}
	return l, nil
}

func (p *parser) parseConcat() (expr, error) {
	first, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	if !p.isOp("~") {
		return first, nil
	}
	items := []expr{first}
	for p.skipOp("~") {
		e, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &concatExpr{items}, nil
}

func (p *parser) parseMath2() (expr, error) {
	l, err := p.parsePow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		t := p.next()
		r, err := p.parsePow()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: t.val, l: l, r: r, line: t.line}
	}
	return l, nil
}

func (p *parser) parsePow() (expr, error) {
	l, err := p.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for p.isOp("**") {
		t := p.next()
		r, err := p.parseUnary(true)
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "**", l: l, r: r, line: t.line}
	}
	return l, nil
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	var e expr
	var err error
	switch {
	case p.isOp("-") || p.isOp("+"):
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		op := p.next().val
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &unaryExpr{op: op, x: x}
	default:
		if e, err = p.parsePrimary(); err != nil {
			return nil, err
		}
		if e, err = p.parsePostfix(e); err != nil {
			return nil, err
		}
	}
	if withFilter {
		return p.parseFilterExpr(e)
	}
	return e, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tokName:
		switch t.val {
		case "true", "True":
			return &constExpr{true}, nil
		case "false", "False":
			return &constExpr{false}, nil
		case "none", "None":
			return &constExpr{nil}, nil
		}
		return &nameExpr{name: t.val, line: t.line}, nil
	case tokString:
		s := t.val
		// Adjacent literals concatenate, as in Python.
		for p.peek().kind == tokString {
			s += p.next().val
		}
		return &constExpr{s}, nil
	case tokInt:
		i, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			return nil, &SyntaxError{Line: t.line, Msg: "integer literal out of range: " + t.val}
		}
		return &constExpr{int(i)}, nil
	case tokFloat:
		f, err := strconv.ParseFloat(t.val, 64)
		if err != nil {
			return nil, &SyntaxError{Line: t.line, Msg: "bad float literal: " + t.val}
		}
		return &constExpr{f}, nil
	case tokOp:
		switch t.val {
		case "(":
			if p.skipOp(")") {
				return &tupleExpr{}, nil
			}
			e, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				items := []expr{e}
				for p.skipOp(",") {
					if p.isOp(")") {
						break
					}
					x, err := p.parseExpression(true)
					if err != nil {
						return nil, err
					}
					items = append(items, x)
				}
				e = &tupleExpr{items}
			}
			return e, p.expectOp(")")
		case "[":
			l := &listExpr{}
			for !p.skipOp("]") {
				if len(l.items) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.skipOp("]") {
						break
					}
				}
				x, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
			}
			return l, nil
		case "{":
			d := &dictExpr{}
			for !p.skipOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.skipOp("}") {
						break
					}
				}
				k, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			return d, nil
		}
	}
	p.pos--
	return nil, p.errf("unexpected %s", describe(t))
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	for {
		t := p.peek()
		switch {
		case t.kind == tokOp && t.val == ".":
			p.pos++
			a := p.next()
			switch a.kind {
			case tokName:
				e = &attrExpr{obj: e, name: a.val, line: a.line}
			case tokInt:
				i, _ := strconv.Atoi(a.val)
				e = &itemExpr{obj: e, key: &constExpr{i}, line: a.line}
			default:
				p.pos--
				return nil, p.errf("expected an attribute name after '.', got %s", describe(a))
			}
		case t.kind == tokOp && t.val == "[":
			p.pos++
			s, err := p.parseSubscript(e, t.line)
			if err != nil {
				return nil, err
			}
			e = s
		case t.kind == tokOp && t.val == "(":
			p.pos++
			c, err := p.parseCall(e, t.line)
			if err != nil {
				return nil, err
			}
			e = c
		default:
			return e, nil
		}
	}
}

func (p *parser) parseSubscript(obj expr, line int) (expr, error) {
	var parts [3]expr
	n := 0
	isSlice := false
	for {
		if p.isOp(":") {
			p.pos++
			isSlice = true
			n++
			if n > 2 {
				return nil, p.errf("too many ':' in subscript")
			}
			continue
		}
		if p.skipOp("]") {
			break
		}
		if parts[n] != nil {
			return nil, p.errf("expected ']' or ':', got %s", describe(p.peek()))
		}
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[n] = e
		if !isSlice && p.isOp(",") {
			// d[a, b]: a tuple key.
			items := []expr{e}
			for p.skipOp(",") {
				if p.isOp("]") {
					break
				}
				x, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				items = append(items, x)
			}
			parts[n] = &tupleExpr{items}
		}
	}
	if !isSlice {
		if parts[0] == nil {
			// a[] is a[()], as Jinja parses it.
			parts[0] = &tupleExpr{}
		}
		return &itemExpr{obj: obj, key: parts[0], line: line}, nil
	}
	return &sliceExpr{obj: obj, start: parts[0], stop: parts[1], step: parts[2]}, nil
}

func (p *parser) parseCallArgs() ([]expr, []kwarg, error) {
	var args []expr
	var kwargs []kwarg
	for !p.skipOp(")") {
		if len(args)+len(kwargs) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.skipOp(")") {
				break
			}
		}
		t := p.peek()
		if t.kind == tokName && p.toks[p.pos+1].kind == tokOp && p.toks[p.pos+1].val == "=" {
			p.pos += 2
			v, err := p.parseExpression(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{t.val, v})
			continue
		}
		if len(kwargs) > 0 {
			return nil, nil, p.errf("positional argument after keyword argument")
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, v)
	}
	return args, kwargs, nil
}

func (p *parser) parseCall(fn expr, line int) (expr, error) {
	args, kwargs, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{fn: fn, args: args, kwargs: kwargs, line: line}, nil
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.pos++
			f, err := p.parseFilter(e)
			if err != nil {
				return nil, err
			}
			e = f
		case p.isName("is"):
			p.pos++
			t, err := p.parseTest(e)
			if err != nil {
				return nil, err
			}
			e = t
		case p.isOp("("):
			t := p.next()
			c, err := p.parseCall(e, t.line)
			if err != nil {
				return nil, err
			}
			e = c
		default:
			return e, nil
		}
	}
}

func (p *parser) parseFilter(x expr) (*filterExpr, error) {
	t, err := p.expectKind(tokName, "a filter name")
	if err != nil {
		return nil, err
	}
	name := t.val
	for p.isOp(".") {
		p.pos++
		a, err := p.expectKind(tokName, "a filter name")
		if err != nil {
			return nil, err
		}
		name += "." + a.val
	}
	f := &filterExpr{x: x, name: name, line: t.line}
	if p.skipOp("(") {
		if f.args, f.kwargs, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (p *parser) parseTest(x expr) (expr, error) {
	negated := p.skipName("not")
	t, err := p.expectKind(tokName, "a test name")
	if err != nil {
		return nil, err
	}
	te := &testExpr{x: x, name: t.val, negated: negated, line: t.line}
	switch n := p.peek(); {
	case n.kind == tokOp && n.val == "(":
		p.pos++
		args, kwargs, err := p.parseCallArgs()
		if err != nil {
			return nil, err
		}
		if len(kwargs) > 0 {
			return nil, p.errf("test %s takes no keyword arguments", t.val)
		}
		te.args = args
	case n.kind == tokString || n.kind == tokInt || n.kind == tokFloat ||
		n.kind == tokOp && (n.val == "[" || n.val == "{") ||
		n.kind == tokName && n.val != "else" && n.val != "or" && n.val != "and" && n.val != "if" && n.val != "is" && n.val != "in" && n.val != "not":
		// "x is divisibleby 3": one argument without parentheses.
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		te.args = []expr{a}
	}
	return te, nil
}
