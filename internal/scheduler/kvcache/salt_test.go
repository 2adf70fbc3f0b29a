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
		if err := m.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
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

// TestSaltedChainOffloadsAndRestores: a salted sequence's chain is found
// for offload and restore under its salt only.
func TestSaltedChainOffloadsAndRestores(t *testing.T) {
	m := newManager(t, Config{NumBlocks: 32, BlockSize: 4, EnablePrefixCache: true, HostBlocks: 16})
	prompt := span(100, 17)
	salt := SaltOf("tenant-a")
	if _, ok := m.AdmitSalted(1, salt, prompt, len(prompt)); !ok {
		t.Fatal("no room")
	}
	m.Commit(1, prompt, len(prompt))
	m.Free(1, false)
	if n := m.Offload(prompt); n != 0 {
		t.Errorf("unsalted Offload moved %d blocks of a salted chain", n)
	}
	if n := m.OffloadSalted(salt, prompt); n != 4 {
		t.Errorf("OffloadSalted moved %d blocks, want 4", n)
	}
	m.Transfers() // the copies out
	if n := m.RestoreSalted(salt, prompt); n != 4 {
		t.Errorf("RestoreSalted moved %d blocks, want 4", n)
	}
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
