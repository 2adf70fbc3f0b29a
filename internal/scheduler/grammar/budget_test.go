package grammar

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/membudget"
)

// bigChoice is a choice among distinct strings whose automaton passes
// MaxNFAStates.
func bigChoice() []string {
	var opts []string
	for i := range 40000 {
		opts = append(opts, strings.Repeat(string(rune('a'+i%26)), 3)+itoa(i)+"-option")
	}
	return opts
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}

// TestBytesPerNFAState checks BytesPerNFAState against what a compile
// that reaches MaxNFAStates allocates (its nodes included), over the
// states it built: all it allocated bounds the heap it can hold.
func TestBytesPerNFAState(t *testing.T) {
	opts := bigChoice()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b := newBuilder(context.Background())
	n := alt(func() []*node {
		ps := make([]*node, len(opts))
		for i, o := range opts {
			ps[i] = lit(o)
		}
		return ps
	}()...)
	b.compile(n, -1)
	runtime.ReadMemStats(&after)
	states := len(b.states)
	if states < MaxNFAStates/2 {
		t.Fatalf("the choice built %d states, want near %d", states, MaxNFAStates)
	}
	per := float64(after.TotalAlloc-before.TotalAlloc) / float64(states)
	t.Logf("%d states, %.0f bytes allocated a state (BytesPerNFAState %d)", states, per, BytesPerNFAState)
	if per > BytesPerNFAState {
		t.Errorf("a state costs %.0f bytes allocated, more than BytesPerNFAState = %d", per, BytesPerNFAState)
	}
	runtime.KeepAlive(b)
}

// A compile draws its states on the request's claim and fails with the
// budget's error when it cannot give them (ErrOverBudget: the compile
// alone needs more than all of it).
func TestCompileChargesItsClaim(t *testing.T) {
	opts := bigChoice()[:2000]
	budget := membudget.New(1 << 40)
	c := budget.Claim()
	g, err := CompileChoice(membudget.WithClaim(context.Background(), c), opts)
	if err != nil || g == nil {
		t.Fatal(err)
	}
	if c.Held() < 1024*BytesPerNFAState {
		t.Fatalf("the compile charged %d bytes, want at least one block of states", c.Held())
	}
	small := membudget.New(int64(c.Held()) / 2)
	_, err = CompileChoice(membudget.WithClaim(context.Background(), small.Claim()), opts)
	if !errors.Is(err, membudget.ErrOverBudget) {
		t.Fatalf("compile past the budget: %v, want ErrOverBudget", err)
	}
}

// A sub-expression Simplify repeats (x{0,99} is 99 nested uses of one x)
// is converted once: a Unicode class of hundreds of byte ranges repeated
// 99 times allocated 40 MB when each use was converted anew (491 KiB now).
func TestRepeatedClassConvertedOnce(t *testing.T) {
	pattern := `(\p{L}|\p{N}){0,99}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := regexNode(pattern, nil)
	runtime.ReadMemStats(&after)
	if err != nil || n == nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%s: %d KiB allocated", pattern, alloc>>10)
	if alloc > 2<<20 {
		t.Errorf("%s allocated %d KiB converting, want under 2 MiB (the class converted once)", pattern, alloc>>10)
	}
}

// A schema's conversion draws the states it counts before it builds their
// nodes, and the compile fails with the budget's error (ErrOverBudget
// here) when the claim cannot grow.
func TestSchemaCompileChargesItsClaim(t *testing.T) {
	schema := []byte(bigSchema(3))
	c := membudget.New(1 << 40).Claim()
	if _, _, err := CompileJSONSchema(membudget.WithClaim(context.Background(), c), schema, SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	held := c.Held()
	small := membudget.New(held / 4).Claim()
	_, _, err := CompileJSONSchema(membudget.WithClaim(context.Background(), small), schema, SchemaOptions{})
	if !errors.Is(err, membudget.ErrOverBudget) {
		t.Fatalf("a schema past the budget: %v, want ErrOverBudget", err)
	}
	t.Logf("the schema drew %d KiB; refused at a quarter", held>>10)
}
