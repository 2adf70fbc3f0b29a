package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/programs"
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

func TestKeySetMatch(t *testing.T) {
	ks := newKeySet([]string{"alpha", "beta"}, []byte("pool"))
	alpha, beta := programs.OwnerOf("alpha", []byte("pool")), programs.OwnerOf("beta", []byte("pool"))
	for _, tc := range []struct {
		auth, apiKey string
		want         programs.Owner
		ok           bool
	}{
		{"Bearer alpha", "", alpha, true},
		{"bearer beta", "", beta, true},
		{"Bearer  beta ", "", beta, true},
		{"", "alpha", alpha, true},
		{"", " beta ", beta, true},
		// Authorization wins when both are sent.
		{"Bearer alpha", "beta", alpha, true},
		{"Bearer gamma", "alpha", "", false},
		{"Bearer gamma", "", "", false},
		{"Bearer", "", "", false},
		{"", "", "", false},
		{"alpha", "", "", false},
		{"Basic alpha", "", "", false},
		// Another scheme carries no key of ours: x-api-key still counts.
		{"Basic Zm9v", "alpha", alpha, true},
		{"Basic Zm9v", "gamma", "", false},
		{"Digest x", "beta", beta, true},
		// A Bearer header without a token is a wrong key, not no header.
		{"Bearer ", "alpha", "", false},
		{"Bearer alph", "", "", false},
		{"", "gamma", "", false},
	} {
		h := http.Header{}
		if tc.auth != "" {
			h.Set("Authorization", tc.auth)
		}
		if tc.apiKey != "" {
			h.Set("x-api-key", tc.apiKey)
		}
		got, ok := ks.match(h)
		if got != tc.want || ok != tc.ok {
			t.Errorf("match(Authorization %q, x-api-key %q) = %q, %t; want %q, %t", tc.auth, tc.apiKey, got, ok, tc.want, tc.ok)
		}
	}
}
