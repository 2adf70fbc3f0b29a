package grammar

import (
	"context"
	"errors"
	"testing"
)

// TestEmptyLanguageRefusedAtCompile: a regex or GBNF grammar that
// accepts no text, the empty one included, is refused when compiled
// (ErrEmptyLanguage), whether its start allows no byte or its prefixes
// lead nowhere; one whose only text is the empty one compiles.
func TestEmptyLanguageRefusedAtCompile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind, src string
		empty     bool
	}{
		{"gbnf", `root ::= [^\x00-\U0010FFFF]`, true},
		{"gbnf", `root ::= "a" [^\x00-\U0010FFFF]`, true},
		{"gbnf", `root ::= "a" root`, true}, // never ends
		{"gbnf", "root ::= x | \"b\" x\nx ::= [^\\x00-\\U0010FFFF]+", true},
		{"gbnf", `root ::= ""`, false},
		{"gbnf", `root ::= "a"?`, false},
		{"regex", `[^\x00-\x{10FFFF}]`, true},
		{"regex", `ab[^\x00-\x{10FFFF}]*c[^\x00-\x{10FFFF}]`, true},
		{"regex", ``, false},
		{"regex", `(a[^\x00-\x{10FFFF}])?`, false},
	} {
		var err error
		if tc.kind == "gbnf" {
			_, err = CompileGBNF(ctx, tc.src)
		} else {
			_, err = CompileRegex(ctx, tc.src)
		}
		if got := errors.Is(err, ErrEmptyLanguage); got != tc.empty || (!tc.empty && err != nil) {
			t.Errorf("%s %q: %v; want empty=%v", tc.kind, tc.src, err, tc.empty)
		}
	}
}
