package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoadAPIKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys, err := LoadAPIKeys(write("keys", "# team a\nk1\n\n  k2  \r\n#k3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"k1", "k2"}, keys); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := LoadAPIKeys(write("empty", "# nothing\n\n")); err == nil {
		t.Error("a file without keys: want an error")
	}
	if _, err := LoadAPIKeys(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: want an error")
	}
}

func TestKeySetAllows(t *testing.T) {
	ks := newKeySet([]string{"alpha", "beta"})
	for auth, want := range map[string]bool{
		"Bearer alpha": true, "bearer beta": true, "Bearer  beta ": true,
		"Bearer gamma": false, "Bearer": false, "": false, "alpha": false, "Basic alpha": false, "Bearer alph": false,
	} {
		if got := ks.allows(auth); got != want {
			t.Errorf("allows(%q) = %t, want %t", auth, got, want)
		}
	}
}
