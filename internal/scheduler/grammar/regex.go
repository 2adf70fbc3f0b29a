package grammar

import (
	"context"
	"fmt"
	"regexp/syntax"
	"unicode"
)

// maxRepeat bounds {n,m} counts in patterns and schemas: each repetition is
// a copy of its sub-automaton.
const maxRepeat = 1000

// Regex compiles a regular expression (Go RE2 syntax, the subset Python's
// re and JavaScript share) that the whole output must match. ^, $, \A and
// \z are accepted at the ends (the match is always whole); word boundaries
// are refused.
func Regex(pattern string) (*Grammar, error) {
	return CompileRegex(context.Background(), pattern)
}

// CompileRegex is Regex, stopping with ctx's error when ctx ends.
func CompileRegex(ctx context.Context, pattern string) (*Grammar, error) {
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("%w: a pattern of more than %d bytes", ErrTooLarge, maxPatternBytes)
	}
	n, err := patternNode(ctx, pattern, nil)
	if err != nil {
		return nil, err
	}
	g, err := newGrammar(ctx, n)
	if err == nil && g.MinLength() >= int(inf) {
		return nil, fmt.Errorf("the pattern %w", ErrEmptyLanguage)
	}
	return g, err
}

// maxPatternBytes bounds a regular expression's text (the parser's work
// and the tree it builds grow with it).
const maxPatternBytes = 64 << 10

// regexNode converts a pattern; allow, when set, restricts every rune it
// may match (JSON strings exclude quotes, backslashes and controls).
func regexNode(pattern string, allow func(lo, hi rune) [][2]rune) (*node, error) {
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("a pattern of more than %d bytes", maxPatternBytes)
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression: %w", err)
	}
	re = re.Simplify()
	if err := anchorsAtEnds(re, true, true); err != nil {
		return nil, err
	}
	c := regexConv{allow: allow}
	n := c.conv(re)
	if c.err != nil {
		return nil, c.err
	}
	return n, nil
}

// anchorsAtEnds refuses an anchor (^, $, \A, \z) that is not at the
// start or the end of every match: the output must match the whole
// pattern, so an anchor there asserts nothing and is dropped, while one
// with text before or after it ("^$0", "a^b") would match nothing in the
// pattern's own engines. start and end say whether nothing can come
// before and after re in a match.
func anchorsAtEnds(re *syntax.Regexp, start, end bool) error {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpBeginText:
		if !start {
			return fmt.Errorf("unsupported in guided regular expressions: ^ or \\A after the start of the pattern")
		}
	case syntax.OpEndLine, syntax.OpEndText:
		if !end {
			return fmt.Errorf("unsupported in guided regular expressions: $ or \\z before the end of the pattern")
		}
	case syntax.OpConcat:
		for i, sub := range re.Sub {
			s := start && allZeroWidth(re.Sub[:i])
			e := end && allZeroWidth(re.Sub[i+1:])
			if err := anchorsAtEnds(sub, s, e); err != nil {
				return err
			}
		}
	case syntax.OpAlternate, syntax.OpCapture, syntax.OpQuest:
		for _, sub := range re.Sub {
			if err := anchorsAtEnds(sub, start, end); err != nil {
				return err
			}
		}
	default:
		// A repeated anchor may follow text of an earlier repetition.
		for _, sub := range re.Sub {
			if err := anchorsAtEnds(sub, false, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// allZeroWidth reports whether every one of res matches only the empty
// string.
func allZeroWidth(res []*syntax.Regexp) bool {
	for _, re := range res {
		switch re.Op {
		case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		case syntax.OpConcat, syntax.OpAlternate, syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
			if !allZeroWidth(re.Sub) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

type regexConv struct {
	allow func(lo, hi rune) [][2]rune
	err   error
	// done are the sub-expressions converted, by pointer: Simplify spells
	// x{0,99} as 99 nested uses of one x, and converting x once (the
	// builder then shares its node) keeps a class such as \p{L}, hundreds
	// of byte ranges, from being built 99 times.
	done map[*syntax.Regexp]*node
}

func (c *regexConv) ranges(lo, hi rune) *node {
	spans := [][2]rune{{lo, hi}}
	if c.allow != nil {
		spans = c.allow(lo, hi)
	}
	var parts []*node
	for _, s := range spans {
		if n := utf8Range(s[0], s[1]); n != nil {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return alt(parts...)
}

// nothing matches no string (an empty class).
var nothing = &node{op: opAlt}

func (c *regexConv) conv(re *syntax.Regexp) *node {
	if c.err != nil {
		return empty
	}
	if n, ok := c.done[re]; ok {
		return n
	}
	n := c.conv1(re)
	if c.done == nil {
		c.done = map[*syntax.Regexp]*node{}
	}
	c.done[re] = n
	return n
}

func (c *regexConv) conv1(re *syntax.Regexp) *node {
	switch re.Op {
	case syntax.OpNoMatch:
		return nothing
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return empty
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		c.err = fmt.Errorf("unsupported in guided regular expressions: word boundaries (\\b, \\B)")
		return empty
	case syntax.OpLiteral:
		var parts []*node
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				var alts []*node
				for f := r; ; {
					if n := c.ranges(f, f); n != nil {
						alts = append(alts, n)
					}
					if f = unicode.SimpleFold(f); f == r {
						break
					}
				}
				parts = append(parts, orNothing(alts))
				continue
			}
			parts = append(parts, orNothingNode(c.ranges(r, r)))
		}
		return concat(parts...)
	case syntax.OpCharClass:
		var alts []*node
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if n := c.ranges(re.Rune[i], re.Rune[i+1]); n != nil {
				alts = append(alts, n)
			}
		}
		return orNothing(alts)
	case syntax.OpAnyCharNotNL:
		return orNothing(nonNil(c.ranges(0, '\n'-1), c.ranges('\n'+1, unicode.MaxRune)))
	case syntax.OpAnyChar:
		return orNothingNode(c.ranges(0, unicode.MaxRune))
	case syntax.OpCapture:
		return c.conv(re.Sub[0])
	case syntax.OpStar:
		return star(c.conv(re.Sub[0]))
	case syntax.OpPlus:
		return repeat(c.conv(re.Sub[0]), 1, -1)
	case syntax.OpQuest:
		return opt(c.conv(re.Sub[0]))
	case syntax.OpRepeat:
		if re.Max > maxRepeat || re.Min > maxRepeat {
			c.err = fmt.Errorf("repetition count above %d", maxRepeat)
			return empty
		}
		return repeat(c.conv(re.Sub[0]), re.Min, re.Max)
	case syntax.OpConcat:
		parts := make([]*node, len(re.Sub))
		for i, s := range re.Sub {
			parts[i] = c.conv(s)
		}
		return concat(parts...)
	case syntax.OpAlternate:
		parts := make([]*node, len(re.Sub))
		for i, s := range re.Sub {
			parts[i] = c.conv(s)
		}
		return alt(parts...)
	}
	c.err = fmt.Errorf("unsupported regular expression construct %v", re.Op)
	return empty
}

func nonNil(ns ...*node) []*node {
	var out []*node
	for _, n := range ns {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

func orNothing(alts []*node) *node {
	if len(alts) == 0 {
		return nothing
	}
	return alt(alts...)
}

func orNothingNode(n *node) *node {
	if n == nil {
		return nothing
	}
	return n
}

// Choice compiles a list of alternatives: the output is exactly one of
// them.
func Choice(options []string) (*Grammar, error) {
	return CompileChoice(context.Background(), options)
}

// CompileChoice is Choice, stopping with ctx's error when ctx ends.
func CompileChoice(ctx context.Context, options []string) (*Grammar, error) {
	if len(options) == 0 {
		return nil, fmt.Errorf("no choices")
	}
	parts := make([]*node, len(options))
	for i, o := range options {
		parts[i] = lit(o)
	}
	return newGrammar(ctx, alt(parts...))
}
