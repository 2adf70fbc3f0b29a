// Package stackgrammars builds GBNF grammars whose rule stacks multiply
// with their depth while their text and their NFA stay small: each rule
// calls the next from two places, so at one position a matcher meets
// 2^depth stacks. They are the probe's denial-of-service shapes
// (helpers/probe-bounds.md, finding 1), for the tests of the bounds the
// grammar package puts on that work.
package stackgrammars

import (
	"fmt"
	"strings"
)

// Nullable is root ::= r0 "x", r_i ::= r_{i+1}? r_{i+1}? for i < depth,
// r_depth ::= "a"?: every rule may be empty, so one closure walks every
// stack.
func Nullable(depth int) string {
	var b strings.Builder
	b.WriteString("root ::= r0 \"x\"\n")
	for i := range depth {
		fmt.Fprintf(&b, "r%d ::= r%d? r%d?\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"a\"?\n", depth)
	return b.String()
}

// Doubling is root ::= prefix r0, r_i ::= r_{i+1} | r_{i+1} r_{i+1} for
// i < depth, r_depth ::= "a": no rule is empty, and the position after
// prefix has 2^depth stacks. With an empty prefix the grammar's start
// position has them; with a prefix longer than every token, the start's
// mask is cheap and the stacks are met while decoding.
func Doubling(prefix string, depth int) string {
	var b strings.Builder
	if prefix == "" {
		b.WriteString("root ::= r0\n")
	} else {
		fmt.Fprintf(&b, "root ::= %q r0\n", prefix)
	}
	for i := range depth {
		fmt.Fprintf(&b, "r%d ::= r%d | r%d r%d\n", i, i+1, i+1, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"a\"\n", depth)
	return b.String()
}

// FanOut is root ::= x0 | … | x_{n-1}, x_i ::= q [a-z ]* "i", q ::=
// [a-z] | [a-z] [a-z]: n stacks at the start, each of whose rule q may
// end inside a token and return into free text of its own. A token mask
// walks the vocabulary's trie again for each: it is the shape that
// follows the most automaton transitions per closure item.
func FanOut(n int) string {
	var b strings.Builder
	b.WriteString("root ::= x0")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, " | x%d", i)
	}
	b.WriteString("\nq ::= [a-z] | [a-z] [a-z]\n")
	for i := range n {
		fmt.Fprintf(&b, "x%d ::= q [a-z ]* \"%d\"\n", i, i)
	}
	return b.String()
}
