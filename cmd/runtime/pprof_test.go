package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestPprof: --pprof-addr serves the profile index and a heap profile on
// its own listener, and stops with the runtime.
func TestPprof(t *testing.T) {
	addr, stop, err := startPprof("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String() + "/debug/pprof/"
	for path, want := range map[string]string{"": "goroutine", "heap?debug=1": "heap profile"} {
		r, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, body lacks %q", base+path, r.StatusCode, want)
		}
	}
	stop()
	if _, err := http.Get(base); err == nil {
		t.Error("the pprof server still answers after stop")
	}
}
