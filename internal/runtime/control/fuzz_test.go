package control

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// FuzzControlAPI sends arbitrary requests (method, path, Authorization
// value, body) to the control API: without the token (of the Bearer scheme,
// in any case) each one is a 401
// that closes the connection and changes nothing; with it the answer is
// one of the API's statuses, never a 5xx.
func FuzzControlAPI(f *testing.F) {
	for _, s := range []struct{ method, path, auth, body string }{
		{"GET", wire.StatePath, "Bearer " + testToken, ""},
		{"PUT", wire.PlacementPath, "Bearer " + testToken, `{"version":1,"place":["a"]}`},
		{"PUT", wire.PlacementPath, "Bearer wrong", `{"version":1,"place":["a"]}`},
		{"PUT", wire.PlacementPath, "", `{"version":1,"release":["a"]}`},
		{"PUT", wire.PlacementPath, "bearer " + testToken, `{"version":1}`},
		{"PUT", wire.PlacementPath, "BEARER  " + testToken, `{"version":1}`},
		{"PUT", wire.PlacementPath, "Bearer" + testToken, `{"version":1}`},
		{"POST", wire.StatePath, "Bearer " + testToken, ""},
		{"GET", "/v1/unknown", "Bearer " + testToken, ""},
		{"PUT", wire.PlacementPath, "Bearer " + testToken + " ", `{"version":1}`},
		{"PUT", wire.PlacementPath, "Bearer " + testToken, `{"version":2,"place":["0123456789abcdef0123456789abcdef/p"]}`},
		{"GET", "//v1/state", "Bearer " + testToken, ""},
	} {
		f.Add(s.method, s.path, s.auth, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, auth, body string) {
		if _, err := url.ParseRequestURI(path); err != nil || !validMethod(method) || !strings.HasPrefix(path, "/") ||
			strings.ContainsAny(path, " \t") || strings.ContainsAny(auth, "\r\n\x00") {
			return // not an HTTP request a server would parse
		}
		tab := programs.New(programs.Config{Pod: "a", Addr: "127.0.0.1:9"})
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		Handler(tab, testToken).ServeHTTP(w, req)
		// The scheme is case-insensitive and one or more spaces follow it
		// (RFC 7235); the token is compared exactly.
		scheme, creds, _ := strings.Cut(auth, " ")
		if !strings.EqualFold(scheme, "bearer") || strings.TrimLeft(creds, " ") != testToken {
			if w.Code != http.StatusUnauthorized || w.Header().Get("Connection") != "close" || tab.Version() != 0 {
				t.Fatalf("%s %s with Authorization %q: %d (Connection %q), version %d; want 401, close, nothing applied",
					method, path, auth, w.Code, w.Header().Get("Connection"), tab.Version())
			}
			return
		}
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge,
			// The mux sends unclean paths (//v1/state) to their clean form.
			http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			t.Fatalf("%s %s %q: status %d %s", method, path, body, w.Code, w.Body)
		}
	})
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if !('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}
