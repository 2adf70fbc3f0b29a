package jinja

import (
	"fmt"
	"strings"
)

// tokenKind is the class of a lexed token.
type tokenKind int

const (
	tokText tokenKind = iota
	tokBlockBegin
	tokBlockEnd
	tokVarBegin
	tokVarEnd
	tokName
	tokString
	tokInt
	tokFloat
	tokOp
	tokEOF
)

type token struct {
	kind tokenKind
	val  string
	line int
}

// SyntaxError is a template the lexer or parser refuses: it names the
// construct and where it is.
type SyntaxError struct {
	Line int
	Msg  string
}

// Error implements error: the line, then the construct refused.
func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// normalizeNewlines is what Jinja does to a source before lexing: lines
// split as Python's str.splitlines splits them, joined by "\n", so "\r\n"
// becomes "\n" and one trailing newline is dropped (keep_trailing_newline
// is false).
func normalizeNewlines(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			b.WriteByte('\n')
		case c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e):
			b.WriteByte('\n')
		case strings.HasPrefix(s[i:], "\u0085"):
			b.WriteByte('\n')
			i++
		case strings.HasPrefix(s[i:], "\u2028") || strings.HasPrefix(s[i:], "\u2029"):
			b.WriteByte('\n')
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	out := b.String()
	return strings.TrimSuffix(out, "\n")
}

// lexer turns a template into tokens with Jinja's whitespace control as
// transformers configures it: trim_blocks (the newline after a block or
// comment tag is dropped) and lstrip_blocks (spaces and tabs before a
// block or comment tag on its line are dropped), "-" and "+" modifiers.
type lexer struct {
	src  string
	pos  int
	line int
	toks []token
	// lineStarting: the previous tag's match ended with a newline, so text
	// right after it starts a line (Jinja's line_starting).
	lineStarting bool
}

func lex(src string) ([]token, error) {
	l := &lexer{src: normalizeNewlines(src), line: 1, lineStarting: true}
	if err := l.run(); err != nil {
		return nil, err
	}
	l.toks = append(l.toks, token{kind: tokEOF, line: l.line})
	return l.toks, nil
}

func (l *lexer) errf(format string, args ...any) error {
	return &SyntaxError{Line: l.line, Msg: fmt.Sprintf(format, args...)}
}

func (l *lexer) emitText(s string) {
	if s != "" {
		l.toks = append(l.toks, token{kind: tokText, val: s, line: l.line})
	}
	l.line += strings.Count(s, "\n")
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func (l *lexer) run() error {
	for l.pos < len(l.src) {
		rest := l.src[l.pos:]
		i := nextTagStart(rest)
		if i < 0 {
			l.emitText(rest)
			l.pos = len(l.src)
			return nil
		}
		text := rest[:i]
		open := rest[i : i+2]
		j := i + 2
		sign := byte(0)
		if j < len(rest) && (rest[j] == '-' || rest[j] == '+') {
			sign = rest[j]
			j++
		}
		switch {
		case sign == '-':
			text = strings.TrimRightFunc(text, isSpaceRune)
		case sign != '+' && open != "{{":
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos > 0 || l.lineStarting {
				if tail := text[lpos:]; tail != "" && strings.TrimLeft(tail, " \t\r\f\v") == "" {
					text = text[:lpos]
				}
			}
		}
		// A raw block is text up to its endraw tag.
		if open == "{%" {
			if body, n, ok := l.raw(rest[i:]); ok {
				l.emitText(text)
				l.emitText(body)
				l.pos += i + n
				continue
			}
		}
		l.emitText(text)
		l.line += strings.Count(rest[i:j], "\n")
		l.pos += j
		switch open {
		case "{#":
			if err := l.comment(); err != nil {
				return err
			}
		case "{%":
			l.toks = append(l.toks, token{kind: tokBlockBegin, line: l.line})
			if err := l.tag("%}", tokBlockEnd, true); err != nil {
				return err
			}
		case "{{":
			l.toks = append(l.toks, token{kind: tokVarBegin, line: l.line})
			if err := l.tag("}}", tokVarEnd, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func isSpaceRune(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\f', '\v', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// nextTagStart is the index of the next "{{", "{%" or "{#", or -1.
func nextTagStart(s string) int {
	off := 0
	for {
		i := strings.IndexByte(s[off:], '{')
		if i < 0 || off+i+1 >= len(s) {
			return -1
		}
		k := off + i
		switch s[k+1] {
		case '{', '%', '#':
			return k
		}
		off = k + 1
	}
}

// raw recognizes "{% raw %}…{% endraw %}" at the start of s: the body,
// with the tags' whitespace control applied, and the length consumed.
func (l *lexer) raw(s string) (string, int, bool) {
	j := 2
	if j < len(s) && (s[j] == '-' || s[j] == '+') {
		j++
	}
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	if !strings.HasPrefix(s[j:], "raw") {
		return "", 0, false
	}
	j += 3
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	stripAfter := false
	if j < len(s) && s[j] == '-' {
		stripAfter = true
		j++
	}
	if !strings.HasPrefix(s[j:], "%}") {
		return "", 0, false
	}
	j += 2
	end := strings.Index(s[j:], "endraw")
	if end < 0 {
		return "", 0, false
	}
	// Walk back from "endraw" to its "{%".
	k := j + end - 1
	for k > j && isSpace(s[k]) {
		k--
	}
	stripBefore := false
	if s[k] == '-' {
		stripBefore = true
		k--
	}
	if k < j+1 || s[k-1:k+1] != "{%" {
		return "", 0, false
	}
	body := s[j : k-1]
	e := j + end + len("endraw")
	for e < len(s) && isSpace(s[e]) {
		e++
	}
	stripTail := false
	if e < len(s) && s[e] == '-' {
		stripTail = true
		e++
	}
	if !strings.HasPrefix(s[e:], "%}") {
		return "", 0, false
	}
	e += 2
	if stripAfter {
		body = strings.TrimLeftFunc(body, isSpaceRune)
	}
	if stripBefore {
		body = strings.TrimRightFunc(body, isSpaceRune)
	}
	if stripTail {
		for e < len(s) && isSpace(s[e]) {
			e++
		}
	} else if e < len(s) && s[e] == '\n' {
		e++
	}
	return body, e, true
}

// comment skips a comment up to its "#}" (trim_blocks applies).
func (l *lexer) comment() error {
	rest := l.src[l.pos:]
	i := strings.Index(rest, "#}")
	if i < 0 {
		return l.errf("unclosed comment")
	}
	n := i + 2
	l.line += strings.Count(rest[:n], "\n")
	l.pos += n
	l.afterTag(i > 0 && rest[i-1] == '-', i > 0 && rest[i-1] == '+')
	return nil
}

// afterTag applies the end of a tag's whitespace control: "-" strips all
// whitespace after it, else trim_blocks drops one newline (not after "+"
// or a variable tag).
func (l *lexer) afterTag(dash, plus bool) {
	l.lineStarting = false
	switch {
	case dash:
		start := l.pos
		for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
			l.pos++
		}
		ws := l.src[start:l.pos]
		l.line += strings.Count(ws, "\n")
		l.lineStarting = strings.HasSuffix(ws, "\n")
	case plus:
	default:
		if l.pos < len(l.src) && l.src[l.pos] == '\n' {
			l.pos++
			l.line++
			l.lineStarting = true
		}
	}
}

var operators = []string{"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", ".", ",", ":", "|", "(", ")", "[", "]", "{", "}"}

// tag lexes the inside of a block or variable tag up to end.
func (l *lexer) tag(end string, endKind tokenKind, trim bool) error {
	depth := 0
	for {
		for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
			if l.src[l.pos] == '\n' {
				l.line++
			}
			l.pos++
		}
		if l.pos >= len(l.src) {
			return l.errf("unexpected end of template: missing %q", end)
		}
		rest := l.src[l.pos:]
		if depth == 0 {
			switch {
			case strings.HasPrefix(rest, "-"+end):
				l.pos += 1 + len(end)
				l.toks = append(l.toks, token{kind: endKind, line: l.line})
				l.afterTag(true, false)
				return nil
			case strings.HasPrefix(rest, "+"+end) && trim:
				l.pos += 1 + len(end)
				l.toks = append(l.toks, token{kind: endKind, line: l.line})
				l.afterTag(false, true)
				return nil
			case strings.HasPrefix(rest, end):
				l.pos += len(end)
				l.toks = append(l.toks, token{kind: endKind, line: l.line})
				l.afterTag(false, !trim)
				return nil
			}
		}
		c := rest[0]
		switch {
		case c == '"' || c == '\'':
			s, n, err := l.stringLit(rest)
			if err != nil {
				return err
			}
			l.toks = append(l.toks, token{kind: tokString, val: s, line: l.line})
			l.line += strings.Count(rest[:n], "\n")
			l.pos += n
		case c >= '0' && c <= '9':
			n, isFloat := numberLen(rest)
			kind := tokInt
			if isFloat {
				kind = tokFloat
			}
			l.toks = append(l.toks, token{kind: kind, val: strings.ReplaceAll(rest[:n], "_", ""), line: l.line})
			l.pos += n
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			n := 1
			for n < len(rest) && (rest[n] == '_' || rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= 'A' && rest[n] <= 'Z' || rest[n] >= '0' && rest[n] <= '9') {
				n++
			}
			l.toks = append(l.toks, token{kind: tokName, val: rest[:n], line: l.line})
			l.pos += n
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(rest, o) {
					op = o
					break
				}
			}
			if op == "" {
				return l.errf("unexpected character %q", c)
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				if depth == 0 {
					return l.errf("unexpected '%s'", op)
				}
				depth--
			}
			l.toks = append(l.toks, token{kind: tokOp, val: op, line: l.line})
			l.pos += len(op)
		}
	}
}

// numberLen is the length of the number literal at the start of s.
func numberLen(s string) (int, bool) {
	n := 0
	digits := func() {
		for n < len(s) && (s[n] >= '0' && s[n] <= '9' || s[n] == '_' && n+1 < len(s) && s[n+1] >= '0' && s[n+1] <= '9') {
			n++
		}
	}
	digits()
	isFloat := false
	if n+1 < len(s) && s[n] == '.' && s[n+1] >= '0' && s[n+1] <= '9' {
		isFloat = true
		n++
		digits()
	}
	if n < len(s) && (s[n] == 'e' || s[n] == 'E') {
		k := n + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			isFloat = true
			n = k
			digits()
		}
	}
	return n, isFloat
}

// stringLit decodes the quoted literal at the start of s as Python does
// (Jinja unescapes literals with Python's rules).
func (l *lexer) stringLit(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(s):
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '\\', '\'', '"':
				b.WriteByte(e)
			case '\n':
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'v':
				b.WriteByte('\v')
			case '0', '1', '2', '3', '4', '5', '6', '7':
				v, k := 0, 0
				for k < 3 && i+k < len(s) && s[i+k] >= '0' && s[i+k] <= '7' {
					v = v*8 + int(s[i+k]-'0')
					k++
				}
				b.WriteRune(rune(v))
				i += k - 1
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if i+n >= len(s) {
					return "", 0, l.errf("truncated \\%c escape", e)
				}
				var v rune
				for k := 1; k <= n; k++ {
					d := s[i+k]
					switch {
					case d >= '0' && d <= '9':
						v = v*16 + rune(d-'0')
					case d >= 'a' && d <= 'f':
						v = v*16 + rune(d-'a'+10)
					case d >= 'A' && d <= 'F':
						v = v*16 + rune(d-'A'+10)
					default:
						return "", 0, l.errf("bad \\%c escape", e)
					}
				}
				b.WriteRune(v)
				i += n
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, l.errf("unterminated string literal")
}
