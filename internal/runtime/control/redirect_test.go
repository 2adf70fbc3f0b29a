package control

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// The control client and the KV fetch never follow a redirect: a pod (or
// a peer serving KV) answering 302 to another server on the same host must
// not make this pod send the pool's token there. The redirect is an error,
// also for a Client whose http.Client would follow it.
func TestClientsRefuseRedirects(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{})
	}))
	defer thief.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+"/steal", http.StatusFound)
	}))
	defer redirector.Close()
	addr := strings.TrimPrefix(redirector.URL, "http://")
	ctx := context.Background()

	// A pod with the usual engine, which would take the blocks.
	b := newKVPod(t, kvTestModel(), "b")
	for name, c := range map[string]*controlclient.Client{
		"controlclient.New":      controlclient.New(testToken, 2*time.Second),
		"a following HTTPClient": {HTTP: &http.Client{Timeout: 2 * time.Second}, Token: testToken},
		"no HTTPClient":          {Token: testToken},
	} {
		t.Run(name, func(t *testing.T) {
			var se *controlclient.StatusError
			if _, err := c.State(ctx, addr); !errors.As(err, &se) || se.Code != http.StatusFound {
				t.Errorf("state through a redirect: %v, want a 302 StatusError", err)
			}
			if _, err := c.Push(ctx, addr, &wire.Placement{Version: 1}); !errors.As(err, &se) || se.Code != http.StatusFound {
				t.Errorf("push through a redirect: %v, want a 302 StatusError", err)
			}
			if n, err := b.kv.Fetch(ctx, c, addr, "p"); !errors.As(err, &se) || se.Code != http.StatusFound || n != 0 {
				t.Errorf("KV fetch through a redirect: %d blocks, %v, want a 302 StatusError", n, err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Fatalf("the redirect target got %d requests: %q", len(leaked), leaked)
	}
}
