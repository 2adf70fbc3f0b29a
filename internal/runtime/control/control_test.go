package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

func TestControlAPIOverLoopback(t *testing.T) {
	tab := programs.New(programs.Config{Pod: "pod-a", KV: func() wire.KVReport {
		return wire.KVReport{BlockSize: 16, TotalBlocks: 100, UsedBlocks: 7}
	}})
	tab.Route("p1", false)
	srv := httptest.NewServer(Handler(tab, "s3cret"))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	c := controlclient.New("s3cret", 2*time.Second)

	rep, err := c.State(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pod != "pod-a" || rep.KV.CapacityTokens() != 1600 || len(rep.Programs) != 1 || rep.Programs[0].Status != "REASONING" {
		t.Fatalf("state %+v", rep)
	}
	res, err := c.Push(ctx, addr, &wire.Placement{Version: 3, Mark: []string{"p1"}})
	if err != nil || !res.Applied || res.Version != 3 {
		t.Fatalf("push: %+v %v", res, err)
	}
	// Idempotent: the same push again changes nothing.
	res, err = c.Push(ctx, addr, &wire.Placement{Version: 3, Mark: []string{"p1"}})
	if err != nil || res.Applied || res.Version != 3 {
		t.Fatalf("repeated push: %+v %v", res, err)
	}
	if rep, _ := c.State(ctx, addr); !rep.Programs[0].MarkedForPause || rep.PlacementVersion != 3 {
		t.Fatalf("after push: %+v", rep)
	}

	for _, tc := range []struct {
		name, token, method, path, body string
		want                            int
	}{
		{"no token", "", "GET", wire.StatePath, "", 401},
		{"wrong token", "nope", "GET", wire.StatePath, "", 401},
		{"bad json", "s3cret", "PUT", wire.PlacementPath, "{", 400},
		{"unknown field", "s3cret", "PUT", wire.PlacementPath, `{"version":9,"evict":["x"]}`, 400},
		{"zero version", "s3cret", "PUT", wire.PlacementPath, `{"place":["x"]}`, 400},
		{"wrong method", "s3cret", "POST", wire.StatePath, "", 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if _, err := controlclient.New("", time.Second).State(ctx, addr); err == nil {
		t.Error("an empty token must not open the API")
	}
}

// The client's errors say what failed: a pod refusing the token (so the
// caller reads it again) is told apart from a pod that is down or failing,
// also inside the joined errors of a round.
func TestClientErrorsAreTyped(t *testing.T) {
	tab := programs.New(programs.Config{Pod: "a", Addr: "10.0.0.9:8000"})
	srv := httptest.NewServer(Handler(tab, "right"))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer failing.Close()
	ctx := context.Background()

	_, stale := controlclient.New("wrong", time.Second).State(ctx, addr)
	var se *controlclient.StatusError
	if !errors.As(stale, &se) || se.Code != http.StatusUnauthorized || !controlclient.IsUnauthorized(stale) {
		t.Fatalf("wrong token: %v (%#v)", stale, se)
	}
	_, down := controlclient.New("right", time.Second).State(ctx, "127.0.0.1:1")
	_, broken := controlclient.New("right", time.Second).State(ctx, strings.TrimPrefix(failing.URL, "http://"))
	if down == nil || broken == nil || controlclient.IsUnauthorized(down) || controlclient.IsUnauthorized(broken) {
		t.Errorf("unreachable %v, failing %v: neither is a stale token", down, broken)
	}
	round := errors.Join(fmt.Errorf("pod a: %w", down), fmt.Errorf("pod b: %w", broken), fmt.Errorf("pod c: %w", stale))
	if !controlclient.IsUnauthorized(round) || !controlclient.IsUnauthorized(fmt.Errorf("round: %w", round)) || controlclient.IsUnauthorized(errors.Join(down, broken)) {
		t.Errorf("joined round errors: %v", round)
	}
}
