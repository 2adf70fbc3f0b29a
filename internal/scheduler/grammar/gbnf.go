package grammar

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxGrammarBytes bounds a GBNF grammar's text.
const maxGrammarBytes = 256 << 10

// GBNFError is a grammar the GBNF compiler refuses, with the line and
// column it stopped at (1-based; 0 when the whole grammar is at fault).
type GBNFError struct {
	Line, Col int
	Reason    string
	// Err is the compile error Reason spells, if one (ErrTooComplex, a
	// context's): errors.Is sees through the GBNFError to it.
	Err error
}

func (e *GBNFError) Unwrap() error { return e.Err }

func (e *GBNFError) Error() string {
	if e.Line == 0 {
		return "GBNF grammar: " + e.Reason
	}
	return fmt.Sprintf("GBNF grammar at line %d, column %d: %s", e.Line, e.Col, e.Reason)
}

// larkRule is how a Lark (or Outlines / guidance) grammar defines a rule:
// "name: …" or "?name: …", where GBNF writes "name ::= …".
var larkRule = regexp.MustCompile(`(?m)^\s*[?!]?[a-zA-Z_][a-zA-Z0-9_]*\s*:[^:=]`)

// CompileGBNF compiles a grammar in llama.cpp's GBNF, the EBNF dialect
// vLLM's xgrammar backend and llama.cpp's server accept: rules
// "name ::= alternatives", the output matching rule root; alternatives
// separated by "|" (which may also begin a continuation line);
// sequences of "literals" (escapes \n \r \t \\ \" \xHH \uHHHH
// \UHHHHHHHH), [character classes] ([^…] negated), "." (any character),
// rule names and (groups), each optionally followed by *, +, ?, {m},
// {m,} or {m,n}; # comments to the end of a line. Newlines end a rule
// except inside parentheses and after "::=" or "|". Rules may be
// recursive, but not left-recursive. Lark grammars (name: …, %import) are
// refused, naming the dialect. The compile stops with ctx's error when
// ctx ends.
func CompileGBNF(ctx context.Context, src string) (*Grammar, error) {
	if len(src) > maxGrammarBytes {
		return nil, &GBNFError{Reason: fmt.Sprintf("more than %d bytes", maxGrammarBytes)}
	}
	if !strings.Contains(src, "::=") && (larkRule.MatchString(src) || strings.Contains(src, "%import")) {
		return nil, &GBNFError{Reason: `this looks like a Lark grammar ("name: …"); only GBNF (llama.cpp's EBNF, "name ::= …") is accepted`}
	}
	p := &gbnfParser{ctx: ctx, src: src, rules: map[string]*rule{}, defined: map[string]bool{}}
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	g, err := newGrammar(ctx, call(root))
	if err != nil {
		return nil, &GBNFError{Reason: err.Error(), Err: err}
	}
	if g.MinLength() >= int(inf) {
		return nil, &GBNFError{Reason: "rule root " + ErrEmptyLanguage.Error(), Err: ErrEmptyLanguage}
	}
	return g, nil
}

type gbnfParser struct {
	ctx     context.Context
	src     string
	pos     int
	rules   map[string]*rule
	order   []string
	defined map[string]bool
	firstAt map[string]int
}

func (p *gbnfParser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	col := p.pos - strings.LastIndexByte(p.src[:p.pos], '\n')
	return &GBNFError{Line: line, Col: col, Reason: fmt.Sprintf(format, args...)}
}

func (p *gbnfParser) rule(name string) *rule {
	r := p.rules[name]
	if r == nil {
		r = &rule{name: name}
		p.rules[name] = r
		p.order = append(p.order, name)
		if p.firstAt == nil {
			p.firstAt = map[string]int{}
		}
		p.firstAt[name] = p.pos
	}
	return r
}

func (p *gbnfParser) parse() (*rule, error) {
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			break
		}
		if err := p.ctx.Err(); err != nil {
			return nil, err
		}
		name := p.name()
		if name == "" {
			return nil, p.errorf("expected a rule name")
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return nil, p.errorf("expected ::= after rule name %q", name)
		}
		p.pos += 3
		if p.defined[name] {
			return nil, p.errorf("rule %q is defined twice", name)
		}
		r := p.rule(name)
		p.defined[name] = true
		p.space(true)
		body, err := p.alternates(false)
		if err != nil {
			return nil, err
		}
		r.body = body
		p.space(false)
		if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
			return nil, p.errorf("expected the end of the line after rule %q", name)
		}
	}
	for _, name := range p.order {
		if !p.defined[name] {
			p.pos = p.firstAt[name]
			return nil, p.errorf("rule %q is used but not defined", name)
		}
	}
	root := p.rules["root"]
	if root == nil || !p.defined["root"] {
		return nil, &GBNFError{Reason: "no rule named root (the output matches root)"}
	}
	return root, nil
}

// space skips blanks and comments, and newlines when nested.
func (p *gbnfParser) space(nested bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case (c == '\n' || c == '\r') && nested:
			p.pos++
		default:
			return
		}
	}
}

// continuation reports whether the next line goes on with "|" (after a
// newline at the top level of a rule), and moves there.
func (p *gbnfParser) continuation() bool {
	save := p.pos
	p.space(true)
	if p.pos < len(p.src) && p.src[p.pos] == '|' {
		return true
	}
	p.pos = save
	return false
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *gbnfParser) alternates(nested bool) (*node, error) {
	var alts []*node
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.space(nested)
		if p.pos < len(p.src) && p.src[p.pos] == '|' || !nested && p.continuation() {
			p.pos++
			p.space(true)
			continue
		}
		return alt(alts...), nil
	}
}

func (p *gbnfParser) sequence(nested bool) (*node, error) {
	var parts []*node
	for {
		p.space(nested)
		if p.pos >= len(p.src) {
			break
		}
		var el *node
		switch c := p.src[p.pos]; {
		case c == '"':
			p.pos++
			s, err := p.literal()
			if err != nil {
				return nil, err
			}
			el = lit(s)
		case c == '[':
			p.pos++
			n, err := p.class()
			if err != nil {
				return nil, err
			}
			el = n
		case c == '.':
			p.pos++
			el = utf8Range(0, 0x10ffff)
		case c == '(':
			p.pos++
			p.space(true)
			n, err := p.alternates(true)
			if err != nil {
				return nil, err
			}
			p.space(true)
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errorf("expected )")
			}
			p.pos++
			el = n
		case isNameByte(c):
			save := p.pos
			name := p.name()
			// A name followed by ::= starts the next rule.
			p.space(false)
			if strings.HasPrefix(p.src[p.pos:], "::=") {
				p.pos = save
				return nil, p.errorf("expected the end of the line before rule %q", name)
			}
			p.pos = save + len(name)
			el = call(p.rule(name))
		default:
			return concat(parts...), nil
		}
		q, err := p.quantify(el)
		if err != nil {
			return nil, err
		}
		parts = append(parts, q)
	}
	return concat(parts...), nil
}

func (p *gbnfParser) quantify(el *node) (*node, error) {
	if p.pos >= len(p.src) {
		return el, nil
	}
	switch p.src[p.pos] {
	case '*':
		p.pos++
		return star(el), nil
	case '+':
		p.pos++
		return repeat(el, 1, -1), nil
	case '?':
		p.pos++
		return opt(el), nil
	case '{':
		p.pos++
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return nil, p.errorf("expected }")
		}
		body := strings.ReplaceAll(p.src[p.pos:p.pos+end], " ", "")
		lo, hi, found := strings.Cut(body, ",")
		m, err := strconv.Atoi(lo)
		if err != nil || m < 0 || m > maxRepeat {
			return nil, p.errorf("repetition {%s}: counts are 0 to %d", body, maxRepeat)
		}
		n := m
		switch {
		case !found:
		case hi == "":
			n = -1
		default:
			if n, err = strconv.Atoi(hi); err != nil || n < m || n > maxRepeat {
				return nil, p.errorf("repetition {%s}: counts are 0 to %d, the second not below the first", body, maxRepeat)
			}
		}
		p.pos += end + 1
		return repeat(el, m, n), nil
	}
	return el, nil
}

// char reads one character of a literal or class, unescaping.
func (p *gbnfParser) char() (rune, error) {
	if p.pos >= len(p.src) {
		return 0, p.errorf("unexpected end of grammar")
	}
	c := p.src[p.pos]
	if c == '\n' || c == '\r' {
		return 0, p.errorf("unexpected end of line")
	}
	if c != '\\' {
		r, size := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += size
		return r, nil
	}
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errorf("unexpected end of grammar after \\")
	}
	e := p.src[p.pos]
	p.pos++
	switch e {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^', '\'':
		return rune(e), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		if p.pos+n > len(p.src) {
			return 0, p.errorf("\\%c needs %d hex digits", e, n)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, p.errorf("\\%c needs %d hex digits", e, n)
		}
		p.pos += n
		return rune(v), nil
	}
	return 0, p.errorf("unknown escape \\%c", e)
}

func (p *gbnfParser) literal() (string, error) {
	var b strings.Builder
	for {
		if p.pos < len(p.src) && p.src[p.pos] == '"' {
			p.pos++
			return b.String(), nil
		}
		r, err := p.char()
		if err != nil {
			return "", err
		}
		b.WriteRune(r)
	}
}

// class reads a character class after its "[".
func (p *gbnfParser) class() (*node, error) {
	negate := false
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		negate = true
		p.pos++
	}
	var spans [][2]rune
	for {
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			break
		}
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errorf("character range %q-%q is reversed", lo, hi)
			}
		}
		spans = append(spans, [2]rune{lo, hi})
	}
	if negate {
		spans = complementSpans(spans)
	}
	var parts []*node
	for _, s := range spans {
		if n := utf8Range(s[0], s[1]); n != nil {
			parts = append(parts, n)
		}
	}
	return orNothing(parts), nil
}

// complementSpans is the runes in none of spans.
func complementSpans(spans [][2]rune) [][2]rune {
	var out [][2]rune
	next := rune(0)
	for {
		// The lowest span start at or after next that covers next, or the
		// next gap.
		covered := false
		for _, s := range spans {
			if s[0] <= next && next <= s[1] {
				next = s[1] + 1
				covered = true
			}
		}
		if next > utf8.MaxRune {
			return out
		}
		if covered {
			continue
		}
		end := rune(utf8.MaxRune)
		for _, s := range spans {
			if s[0] > next && s[0]-1 < end {
				end = s[0] - 1
			}
		}
		out = append(out, [2]rune{next, end})
		if end >= utf8.MaxRune {
			return out
		}
		next = end + 1
	}
}
