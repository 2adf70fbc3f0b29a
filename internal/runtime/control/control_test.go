package control

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

func TestControlAPIOverLoopback(t *testing.T) {
	tab := programs.New(programs.Config{Pod: "pod-a", KV: func() programs.KVReport {
		return programs.KVReport{BlockSize: 16, TotalBlocks: 100, UsedBlocks: 7}
	}})
	tab.Route("p1", false)
	srv := httptest.NewServer(Handler(tab, "s3cret"))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	c := NewClient("s3cret", 2*time.Second)

	rep, err := c.State(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pod != "pod-a" || rep.KV.CapacityTokens() != 1600 || len(rep.Programs) != 1 || rep.Programs[0].Status != "REASONING" {
		t.Fatalf("state %+v", rep)
	}
	res, err := c.Push(ctx, addr, &programs.Placement{Version: 3, Mark: []string{"p1"}})
	if err != nil || !res.Applied || res.Version != 3 {
		t.Fatalf("push: %+v %v", res, err)
	}
	// Idempotent: the same push again changes nothing.
	res, err = c.Push(ctx, addr, &programs.Placement{Version: 3, Mark: []string{"p1"}})
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
		{"no token", "", "GET", StatePath, "", 401},
		{"wrong token", "nope", "GET", StatePath, "", 401},
		{"bad json", "s3cret", "PUT", PlacementPath, "{", 400},
		{"unknown field", "s3cret", "PUT", PlacementPath, `{"version":9,"evict":["x"]}`, 400},
		{"zero version", "s3cret", "PUT", PlacementPath, `{"place":["x"]}`, 400},
		{"wrong method", "s3cret", "POST", StatePath, "", 405},
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
	if _, err := NewClient("", time.Second).State(ctx, addr); err == nil {
		t.Error("an empty token must not open the API")
	}
}
