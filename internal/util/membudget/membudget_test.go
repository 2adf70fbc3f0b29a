package membudget

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestClaimsShareTheBudget(t *testing.T) {
	b := New(100)
	c1, c2 := b.Claim(), b.Claim()
	if err := c1.Grow(60); err != nil {
		t.Fatal(err)
	}
	// Fails at once, without waiting, and takes nothing.
	if err := c2.Grow(50); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Grow past the budget: %v, want ErrExhausted", err)
	}
	if got := b.InUse(); got != 60 {
		t.Fatalf("InUse after a failed Grow = %d, want 60", got)
	}
	if got := b.Refused(); got != 1 {
		t.Fatalf("Refused = %d, want 1", got)
	}
	if err := c2.Grow(40); err != nil {
		t.Fatalf("Grow to exactly the budget: %v", err)
	}
	c1.Release()
	c1.Release() // twice gives back nothing more
	if got := b.InUse(); got != 40 {
		t.Fatalf("InUse after Release = %d, want 40", got)
	}
	if err := c2.Grow(60); err != nil {
		t.Fatalf("Grow into the released part: %v", err)
	}
	if got := b.Peak(); got != 100 {
		t.Fatalf("Peak = %d, want 100", got)
	}
	c2.Release()
	if err := c2.Grow(1); err == nil {
		t.Fatal("a released claim grew")
	}
	if got := b.InUse(); got != 0 {
		t.Fatalf("InUse at the end = %d", got)
	}
}

// Two requests that each hold half and want more both fail instead of
// waiting on each other.
func TestNoDeadlockBetweenHalfHolders(t *testing.T) {
	b := New(100)
	c1, c2 := b.Claim(), b.Claim()
	_ = c1.Grow(50)
	_ = c2.Grow(50)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []*Claim{c1, c2} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.Grow(10) }()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrExhausted) {
			t.Errorf("claim %d: %v, want ErrExhausted", i, err)
		}
	}
}

func TestChargeThroughContext(t *testing.T) {
	if err := Charge(context.Background(), 1<<40); err != nil {
		t.Fatalf("Charge without a claim: %v", err)
	}
	b := New(10)
	c := b.Claim()
	ctx, cancel := context.WithCancel(WithClaim(context.Background(), c))
	if err := Charge(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if err := Charge(ctx, 8); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("Charge past the whole budget: %v", err)
	}
	// A request cancelled releases its claim (the server releases when
	// the handler returns, whatever ended it).
	cancel()
	c.Release()
	if b.InUse() != 0 {
		t.Fatalf("InUse after release = %d", b.InUse())
	}
}

func TestShrinkTo(t *testing.T) {
	b := New(100)
	c := b.Claim()
	_ = c.Grow(80)
	c.ShrinkTo(30)
	if c.Held() != 30 || b.InUse() != 30 {
		t.Fatalf("after ShrinkTo(30): held %d, in use %d", c.Held(), b.InUse())
	}
	c.ShrinkTo(50) // never grows
	if c.Held() != 30 {
		t.Fatalf("ShrinkTo above the held grew the claim to %d", c.Held())
	}
	c.Release()
	c.ShrinkTo(0)
	if b.InUse() != 0 {
		t.Fatalf("in use after Release and ShrinkTo: %d", b.InUse())
	}
}

func TestUnlimited(t *testing.T) {
	b := New(0)
	c := b.Claim()
	if err := c.Grow(1 << 50); err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 1<<50 {
		t.Fatal("an unlimited budget still counts its use")
	}
}

// Return gives back part of what the context's claim holds, never more
// than it holds, and nothing once it is released.
func TestReturnGivesBackPart(t *testing.T) {
	b := New(100)
	c := b.Claim()
	ctx := WithClaim(context.Background(), c)
	if err := Charge(ctx, 70); err != nil {
		t.Fatal(err)
	}
	Return(ctx, 30)
	if c.Held() != 40 || b.InUse() != 40 {
		t.Fatalf("after returning 30 of 70: held %d, in use %d, want 40", c.Held(), b.InUse())
	}
	Return(ctx, 1000)
	if c.Held() != 0 || b.InUse() != 0 {
		t.Fatalf("after returning more than held: held %d, in use %d, want 0", c.Held(), b.InUse())
	}
	Return(context.Background(), 5) // no claim: nothing
	c.Release()
	Return(ctx, 5)
	if b.InUse() != 0 {
		t.Fatalf("in use %d after release", b.InUse())
	}
}

// A claim that would hold more than the whole budget fails with
// ErrOverBudget, not ErrExhausted: waiting cannot make it fit.
func TestGrowPastTheWholeBudget(t *testing.T) {
	b := New(100)
	c := b.Claim()
	if err := c.Grow(101); !errors.Is(err, ErrOverBudget) || errors.Is(err, ErrExhausted) {
		t.Fatalf("Grow(101) of a 100-byte budget: %v, want ErrOverBudget", err)
	}
	if err := c.Grow(60); err != nil {
		t.Fatal(err)
	}
	if err := c.Grow(41); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("Grow(41) while holding 60 of 100: %v, want ErrOverBudget", err)
	}
	other := b.Claim()
	if err := other.Grow(41); !errors.Is(err, ErrExhausted) {
		t.Fatalf("another claim's Grow(41) while 60 of 100 are held: %v, want ErrExhausted", err)
	}
	if b.InUse() != 60 || b.Refused() != 3 {
		t.Fatalf("in use %d, refused %d; want 60 and 3", b.InUse(), b.Refused())
	}
	c.Release()
}
