package grammar

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// spliced is n as concat built it before spliceMax: every sequence
// spliced into the sequence around it, however long. Nodes and rules
// shared in n are shared in the copy.
func spliced(n *node) *node {
	nodes := map[*node]*node{}
	rules := map[*rule]*rule{}
	var conv func(n *node) *node
	convRule := func(r *rule) *rule {
		if o, ok := rules[r]; ok {
			return o
		}
		o := &rule{name: r.name}
		rules[r] = o
		o.body = conv(r.body)
		return o
	}
	conv = func(n *node) *node {
		if o, ok := nodes[n]; ok {
			return o
		}
		o := *n
		o.subs = nil
		for _, s := range n.subs {
			c := conv(s)
			if n.op == opConcat && c.op == opConcat {
				o.subs = append(o.subs, c.subs...)
			} else {
				o.subs = append(o.subs, c)
			}
		}
		if n.op == opCall {
			o.r = convRule(n.r)
		}
		nodes[n] = &o
		return &o
	}
	return conv(n)
}

// randomSchema is a random schema of the keywords that build sequences:
// objects of up to 24 properties (some required, some counted), arrays
// and tuples, strings, numbers, enums and alternatives, nested up to
// depth levels. Every part of it is used by some document.
func randomSchema(rng *rand.Rand, depth int) string {
	kinds := 6
	if depth > 0 {
		kinds = 9
	}
	switch rng.IntN(kinds) {
	case 0:
		return `{"type":"integer","minimum":` + fmt.Sprint(rng.IntN(50)-25) + `}`
	case 1:
		return `{"type":"string","maxLength":` + fmt.Sprint(1+rng.IntN(6)) + `}`
	case 2:
		return `{"type":"string","pattern":"^[a-c]{2,4}(-[0-9])?$"}`
	case 3:
		return `{"enum":["x",1,null,{"k":[true]}]}`
	case 4:
		return `{"type":"boolean"}`
	case 5:
		return `{"type":"number"}`
	case 6:
		return `{"anyOf":[` + randomSchema(rng, depth-1) + `,` + randomSchema(rng, depth-1) + `]}`
	case 7:
		if rng.IntN(2) == 0 {
			return `{"type":"array","items":` + randomSchema(rng, depth-1) + `,"maxItems":` + fmt.Sprint(1+rng.IntN(4)) + `}`
		}
		n := 1 + rng.IntN(20)
		items := make([]string, n)
		for i := range items {
			items[i] = randomSchema(rng, depth-1)
		}
		return fmt.Sprintf(`{"type":"array","prefixItems":[%s],"items":false,"minItems":%d}`, strings.Join(items, ","), rng.IntN(n+1))
	}
	n := 1 + rng.IntN(24)
	props := make([]string, n)
	var required []string
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":%s`, i, randomSchema(rng, depth-1))
		if rng.IntN(3) > 0 {
			required = append(required, fmt.Sprintf(`"p%d"`, i))
		}
	}
	// Counts that let every property appear: with the required ones at
	// least.
	extra := ""
	switch rng.IntN(5) {
	case 0:
		extra = `,"additionalProperties":{"type":"integer"}`
	case 1:
		extra = fmt.Sprintf(`,"minProperties":%d,"maxProperties":%d`, len(required), len(required)+1+rng.IntN(2))
	case 2:
		extra = fmt.Sprintf(`,"minProperties":%d`, len(required)+rng.IntN(n-len(required)+1))
	}
	return fmt.Sprintf(`{"type":"object","properties":{%s},"required":[%s]%s}`,
		strings.Join(props, ","), strings.Join(required, ","), extra)
}

// editBytes are the bytes an edit inserts.
const editBytes = `{}[],:"0a- `

// TestShortSplicingKeepsTheLanguage: expressions built with only short
// sequences spliced (schemas, GBNF grammars, patterns) accept exactly
// what they accepted when every sequence was spliced: the outputs each
// decodes are accepted by the other, and so or refused alike are edits
// of them.
func TestShortSplicingKeepsTheLanguage(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	type tc struct {
		name string
		n    *node
	}
	var cases []tc
	for i := range 40 {
		s := randomSchema(rng, 3)
		v, err := parseOrdered([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		n, _, err := valueNode(ctx, v, SchemaOptions{}, nil)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		cases = append(cases, tc{fmt.Sprintf("schema %d %s", i, s), n})
	}
	for _, src := range []string{
		`root ::= "a" ("b" ("c" ("d" [0-9]+ "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r")? "s") "t")*`,
		`root ::= x x x x x x x x x x x x x x x x x x
x ::= "<" ("k" | "v" "=" [a-z]{1,3}) ">" " "?`,
	} {
		p := &gbnfParser{ctx: ctx, src: src, rules: map[string]*rule{}, defined: map[string]bool{}}
		root, err := p.parse()
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		cases = append(cases, tc{"gbnf " + src, call(root)})
	}
	for _, pat := range []string{`(ab(cd(ef(gh(ij(kl(mn(op(qr)?)?)?)?)?)?)?)?)+z`, `a{3}(bcdefghijklmnopqrst|[0-9]{2}-[0-9]{2}){2,3}`} {
		n, err := patternNode(ctx, pat, nil)
		if err != nil {
			t.Fatalf("%s: %v", pat, err)
		}
		cases = append(cases, tc{"pattern " + pat, n})
	}
	v, eos := testVocab()
	statesNow, statesSpliced := 0, 0
	for _, c := range cases {
		now, err := newGrammar(ctx, c.n)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		before, err := newGrammar(ctx, spliced(c.n))
		if err != nil {
			t.Fatalf("%s, spliced: %v", c.name, err)
		}
		statesNow += now.NumNFAStates()
		statesSpliced += before.NumNFAStates()
		if a, b := now.MinLength(), before.MinLength(); a != b {
			t.Errorf("%s: shortest output %d bytes, %d spliced", c.name, a, b)
		}
		for _, pair := range [][2]*Grammar{{now, before}, {before, now}} {
			for range 4 {
				out, complete := decode(t, pair[0], v, eos, rng, 300)
				if !complete {
					continue // the budget ran out: not a document of either
				}
				texts := []string{out, out[:len(out)/2]}
				for range 6 {
					b := []byte(out)
					i := rng.IntN(len(b) + 1)
					switch rng.IntN(3) {
					case 0:
						if i < len(b) {
							b = append(b[:i], b[i+1:]...)
						}
					case 1:
						b = append(b[:i], append([]byte{editBytes[rng.IntN(len(editBytes))]}, b[i:]...)...)
					default:
						if j := rng.IntN(len(b) + 1); i < len(b) && j < len(b) {
							b[i], b[j] = b[j], b[i]
						}
					}
					texts = append(texts, string(b))
				}
				for k, text := range texts {
					if x, y := pair[0].Accepts([]byte(text)), pair[1].Accepts([]byte(text)); x != y || k == 0 && !x {
						t.Fatalf("%s: %q accepted %v by one construction, %v by the other", c.name, text, x, y)
					}
				}
			}
		}
	}
	t.Logf("automaton states: %d, %d with every sequence spliced", statesNow, statesSpliced)
}
