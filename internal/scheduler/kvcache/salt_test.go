package kvcache

import "testing"

// TestSaltsDoNotShareThePrefixCache: a prompt cached under one salt is a
// hit for the same salt only; unsalted sequences share among themselves.
func TestSaltsDoNotShareThePrefixCache(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 32, BlockSize: 4, EnablePrefixCache: true})
	prompt := span(100, 17) // four full blocks, then the last token
	a, b := SaltOf("tenant-a"), SaltOf("tenant-b")
	if a == 0 || a == b || SaltOf("") != 0 {
		t.Fatalf("salts %d, %d, %d", a, b, SaltOf(""))
	}
	next := SeqID(0)
	admit := func(salt Salt) int {
		t.Helper()
		next++
		cached, ok := m.AdmitSalted(next, salt, prompt, len(prompt))
		if !ok {
			t.Fatal("no room")
		}
		m.Commit(next, prompt, len(prompt))
		m.Free(next, false)
		m.CheckInvariants()
		return cached
	}
	for _, step := range []struct {
		name string
		salt Salt
		want int
	}{
		{"first under a", a, 0},
		{"again under a", a, 16},
		{"under b", b, 0},
		{"unsalted", 0, 0},
		{"unsalted again", 0, 16},
		{"under b again", b, 16},
	} {
		if got := admit(step.salt); got != step.want {
			t.Errorf("%s: %d cached tokens, want %d", step.name, got, step.want)
		}
	}
	if got := m.CachedPrefix(prompt); got != 16 {
		t.Errorf("CachedPrefix (unsalted) = %d, want 16", got)
	}
}
