package grammar

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// arithmeticGBNF is arithmetic over integers with nested parentheses: a
// context-free language no regular automaton matches.
const arithmeticGBNF = `# integer arithmetic
root   ::= expr
expr   ::= term (ws ("+" | "-") ws term)*
term   ::= factor (ws ("*" | "/") ws factor)*
factor ::= number
         | "(" ws expr ws ")"
number ::= "-"? [1-9] [0-9]{0,3} | "0"
ws     ::= [ ]?
`

// jsonGBNF is llama.cpp's grammars/json.gbnf, as vLLM users pass it.
const jsonGBNF = `root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
`

// evalArithmetic parses an output of arithmeticGBNF independently of the
// grammar compiler (a recursive-descent parser) and reports whether it
// is well formed.
func evalArithmetic(s string) bool {
	p := 0
	skip := func() {
		for p < len(s) && s[p] == ' ' {
			p++
		}
	}
	var expr func() bool
	factor := func() bool {
		skip()
		if p < len(s) && s[p] == '(' {
			p++
			if !expr() {
				return false
			}
			skip()
			if p >= len(s) || s[p] != ')' {
				return false
			}
			p++
			return true
		}
		start := p
		if p < len(s) && s[p] == '-' {
			p++
		}
		for p < len(s) && s[p] >= '0' && s[p] <= '9' {
			p++
		}
		_, err := strconv.Atoi(s[start:p])
		return err == nil
	}
	term := func() bool {
		if !factor() {
			return false
		}
		for {
			skip()
			if p < len(s) && (s[p] == '*' || s[p] == '/') {
				p++
				if !factor() {
					return false
				}
				continue
			}
			return true
		}
	}
	expr = func() bool {
		if !term() {
			return false
		}
		for {
			save := p
			skip()
			if p < len(s) && (s[p] == '+' || s[p] == '-') {
				p++
				if !term() {
					return false
				}
				continue
			}
			p = save
			return true
		}
	}
	return expr() && p == len(s)
}

func TestGBNFArithmetic(t *testing.T) {
	g, err := CompileGBNF(context.Background(), arithmeticGBNF)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"1", "1 + 2", "(1+(2*3))/4", "((((7))))", "-3 * (0 - 12)"} {
		if !g.Accepts([]byte(s)) {
			t.Errorf("rejects %q", s)
		}
	}
	for _, s := range []string{"", "1+", "(1", "1)", "(()", "01", "1  + 2", "12345"} {
		if g.Accepts([]byte(s)) {
			t.Errorf("accepts %q", s)
		}
	}
	deep := strings.Repeat("(", 60) + "1" + strings.Repeat(")", 60)
	if !g.Accepts([]byte(deep)) || g.Accepts([]byte(deep[1:])) {
		t.Error("nesting 60 deep not matched exactly")
	}
	v, eos := testVocab()
	rng := rand.New(rand.NewPCG(11, 12))
	for range 30 {
		out, complete := decode(t, g, v, eos, rng, 120)
		if !complete || !evalArithmetic(out) {
			t.Fatalf("output %q (complete %v) is not an arithmetic expression", out, complete)
		}
	}
}

func TestGBNFJSON(t *testing.T) {
	g, err := CompileGBNF(context.Background(), jsonGBNF)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"a": [1, 2.5, {"b": null}], "c": "x\n"}`, "{\n  \"k\": true\n}"} {
		if !g.Accepts([]byte(s)) {
			t.Errorf("rejects %q", s)
		}
	}
	for _, s := range []string{`[]`, `{"a"}`, `{"a": 01}`, `{'a': 1}`} {
		if g.Accepts([]byte(s)) {
			t.Errorf("accepts %q", s)
		}
	}
	v, eos := testVocab()
	rng := rand.New(rand.NewPCG(13, 14))
	for range 20 {
		out, complete := decode(t, g, v, eos, rng, 300)
		if !complete || !json.Valid([]byte(out)) {
			t.Fatalf("output %q (complete %v) is not JSON", out, complete)
		}
	}
}

func TestGBNFRefusals(t *testing.T) {
	for _, tc := range []struct{ src, mention string }{
		{"?start: expr\nexpr: NUMBER\n%import common.NUMBER", "Lark"},
		{`start: "a"`, "Lark"},
		{`expr ::= "a"`, "no rule named root"},
		{`root ::= x`, `rule "x" is used but not defined`},
		{"root ::= (\"a\"", "expected )"},
		{`root ::= "a`, "unexpected end"},
		{`root ::= [z-a]`, "reversed"},
		{`root ::= "a"{3,2}`, "repetition"},
		{"root ::= root \"a\" | \"b\"", "left-recursive"},
		{"root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"", "left-recursive"},
		{"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
		{`root ::= "\q"`, "unknown escape"},
		{"root ::= \"a\" ::=", "expected"},
	} {
		_, err := CompileGBNF(context.Background(), tc.src)
		var ge *GBNFError
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%q: got %v, want a GBNFError mentioning %q", tc.src, err, tc.mention)
		}
	}
}

func TestGBNFSyntax(t *testing.T) {
	for _, tc := range []struct {
		src     string
		yes, no []string
	}{
		{"root ::= \"a\"\n     | \"b\"  # continuation line\n", []string{"a", "b"}, []string{"ab"}},
		{`root ::= [^a-c\n]+ "."`, []string{"xyz.", "日本."}, []string{"abc.", "\n."}},
		{`root ::= "\x41\u00e9\U0001F600"`, []string{"Aé😀"}, nil},
		{`root ::= ("ab"){2,} "!"`, []string{"abab!", "ababab!"}, []string{"ab!"}},
		{`root ::= . . "\\"`, []string{"é!\\"}, []string{"a\\"}},
		{"root ::= list\nlist ::= item (\",\" list)?\nitem ::= [a-z]", []string{"a", "a,b,c"}, []string{"a,", ",a"}},
	} {
		g, err := CompileGBNF(context.Background(), tc.src)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		for _, s := range tc.yes {
			if !g.Accepts([]byte(s)) {
				t.Errorf("%q: rejects %q", tc.src, s)
			}
		}
		for _, s := range tc.no {
			if g.Accepts([]byte(s)) {
				t.Errorf("%q: accepts %q", tc.src, s)
			}
		}
	}
}
