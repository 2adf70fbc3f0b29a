package control

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

const testToken = "s3cret"

func putPlacement(t testing.TB, h http.Handler, body string) (int, map[string]string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPut, wire.PlacementPath, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]string
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

// TestPlacementValidation: every field of a placement is checked and a bad
// one refuses the whole placement with 400 naming it; nothing of it is
// applied.
func TestPlacementValidation(t *testing.T) {
	long := strings.Repeat("p", programs.MaxIDLen+1)
	for _, tc := range []struct {
		name, body, field string
	}{
		{"unparsable route address", `{"version":2,"routes":{"p1":"not an address"}}`, `routes["p1"]`},
		{"route without port", `{"version":2,"routes":{"p1":"10.0.0.1"}}`, `routes["p1"]`},
		{"route port out of range", `{"version":2,"routes":{"p1":"10.0.0.1:70000"}}`, `routes["p1"]`},
		{"route without host", `{"version":2,"routes":{"p1":":8000"}}`, `routes["p1"]`},
		{"route host with a path", `{"version":2,"routes":{"p1":"evil/x:80"}}`, `routes["p1"]`},
		{"empty program id in routes", `{"version":2,"routes":{"":"10.0.0.1:8000"}}`, "routes"},
		{"empty program id in place", `{"version":2,"place":["ok",""]}`, "place[1]"},
		{"empty program id in pause", `{"version":2,"pause":[""]}`, "pause[0]"},
		{"empty program id in mark", `{"version":2,"mark":[""]}`, "mark[0]"},
		{"empty program id in unmark", `{"version":2,"unmark":[""]}`, "unmark[0]"},
		{"empty program id in release", `{"version":2,"release":[""]}`, "release[0]"},
		{"empty program id in unroute", `{"version":2,"unroute":[""]}`, "unroute[0]"},
		{"control character in id", `{"version":2,"place":["a\u0000b"]}`, "place[0]"},
		{"overlong id", `{"version":2,"place":["` + long + `"]}`, "place[0]"},
		{"bad room address", `{"version":2,"room":{"nowhere":5}}`, "room"},
		{"maxPauseSeconds 1e10", `{"version":2,"maxPauseSeconds":10000000000}`, "maxPauseSeconds"},
		{"maxPauseSeconds 2^63-1", `{"version":2,"maxPauseSeconds":9223372036854775807}`, "maxPauseSeconds"},
		{"negative maxPauseSeconds", `{"version":2,"maxPauseSeconds":-5}`, "maxPauseSeconds"},
		{"buffer too large", `{"version":2,"bufferTokensPerProgram":1099511627776}`, "bufferTokensPerProgram"},
		{"negative buffer", `{"version":2,"bufferTokensPerProgram":-1}`, "bufferTokensPerProgram"},
		{"acting weight above 1", `{"version":2,"capacity":{"actingTokenWeight":1.5,"deviceOvercommit":2}}`, "capacity.actingTokenWeight"},
		{"negative acting weight", `{"version":2,"capacity":{"actingTokenWeight":-0.1,"deviceOvercommit":2}}`, "capacity.actingTokenWeight"},
		{"overcommit below 1", `{"version":2,"capacity":{"actingTokenWeight":1,"deviceOvercommit":0.5}}`, "capacity.deviceOvercommit"},
		{"overcommit above 8", `{"version":2,"capacity":{"actingTokenWeight":1,"deviceOvercommit":9}}`, "capacity.deviceOvercommit"},
		{"zero version", `{"place":["x"]}`, "version"},
		{"version 2^53+1", `{"version":9007199254740993}`, "version"},
		{"version 2^63-1", `{"version":9223372036854775807}`, "version"},
		{"unknown mode", `{"version":2,"mode":"Greedy"}`, "mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := programs.New(programs.Config{Pod: "a", Addr: "10.0.0.9:8000"})
			h := Handler(tab, testToken)
			status, out := putPlacement(t, h, tc.body)
			if status != http.StatusBadRequest || out["field"] != tc.field {
				t.Errorf("status %d field %q (%s); want 400 naming %q", status, out["field"], out["error"], tc.field)
			}
			if tab.Version() != 0 || len(tab.Report().Programs) != 0 {
				t.Errorf("a refused placement was applied: version %d, report %+v", tab.Version(), tab.Report())
			}
		})
	}
}

// TestPlacementVersionBound: 2^53 is the highest version a pod applies; at
// it, later pushes are ignored as old, never wrapped into new ones.
func TestPlacementVersionBound(t *testing.T) {
	tab := programs.New(programs.Config{Pod: "a"})
	h := Handler(tab, testToken)
	if status, out := putPlacement(t, h, fmt.Sprintf(`{"version":%d}`, wire.MaxPlacementVersion)); status != http.StatusOK {
		t.Fatalf("version 2^53: %d %v", status, out)
	}
	if status, out := putPlacement(t, h, fmt.Sprintf(`{"version":%d}`, wire.MaxPlacementVersion+1)); status != http.StatusBadRequest || out["field"] != "version" {
		t.Fatalf("version 2^53+1: %d %v, want 400 naming version", status, out)
	}
	if tab.Version() != wire.MaxPlacementVersion {
		t.Fatalf("version %d after a refused push", tab.Version())
	}
}

// TestPlacementProgramBounds: a placement names at most
// MaxPlacementPrograms programs, and placements create at most
// programs.MaxPlacedEntries entries in the table; beyond either, the
// placement is refused whole with a 400 naming place and the limit.
func TestPlacementProgramBounds(t *testing.T) {
	ids := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s%d"`, prefix, i)
		}
		return b.String()
	}
	tab := programs.New(programs.Config{Pod: "a", Addr: "10.0.0.9:8000"})
	h := Handler(tab, testToken)
	body := `{"version":1,"pause":["x"],"place":[` + ids("p", MaxPlacementPrograms) + `]}`
	if status, out := putPlacement(t, h, body); status != http.StatusBadRequest || out["field"] != "place" ||
		!strings.Contains(out["error"], strconv.Itoa(MaxPlacementPrograms)) {
		t.Fatalf("%d programs named: %d %v, want 400 naming place and the limit", MaxPlacementPrograms+1, status, out)
	}
	if tab.Version() != 0 || len(tab.Report().Programs) != 0 {
		t.Fatalf("a refused placement was applied: version %d, %d programs", tab.Version(), len(tab.Report().Programs))
	}

	// The table: MaxPlacedEntries created by placements, then one more.
	if status, out := putPlacement(t, h, `{"version":1,"place":[`+ids("p", programs.MaxPlacedEntries)+`]}`); status != http.StatusOK {
		t.Fatalf("%d programs placed: %d %v", programs.MaxPlacedEntries, status, out)
	}
	status, out := putPlacement(t, h, `{"version":2,"place":["p0","one-more"]}`)
	if status != http.StatusBadRequest || out["field"] != "place" || !strings.Contains(out["error"], strconv.Itoa(programs.MaxPlacedEntries)) {
		t.Fatalf("one program past the table's bound: %d %v, want 400 naming place and the limit", status, out)
	}
	if tab.Version() != 1 || len(tab.Report().Programs) != programs.MaxPlacedEntries {
		t.Fatalf("after a refused placement: version %d, %d programs", tab.Version(), len(tab.Report().Programs))
	}
	// Programs the table has already are no new entries.
	if status, out := putPlacement(t, h, `{"version":3,"place":["p0","p1"]}`); status != http.StatusOK {
		t.Fatalf("placing programs the table has: %d %v", status, out)
	}
}

func TestPlacementTrailingData(t *testing.T) {
	for _, body := range []string{
		`{"version":2}{"version":3}`,
		`{"version":2} x`,
		`{"version":2}]`,
	} {
		tab := programs.New(programs.Config{Pod: "a"})
		if status, out := putPlacement(t, Handler(tab, testToken), body); status != http.StatusBadRequest {
			t.Errorf("%s: status %d (%v), want 400", body, status, out)
		}
		if tab.Version() != 0 {
			t.Errorf("%s: applied", body)
		}
	}
	tab := programs.New(programs.Config{Pod: "a"})
	if status, out := putPlacement(t, Handler(tab, testToken), "{\"version\":2}\n  \n"); status != http.StatusOK || tab.Version() != 2 {
		t.Errorf("trailing white space must be accepted: %d %v", status, out)
	}
}

// TestPlacementAcceptsValid: the forms a controller sends are accepted:
// IPv4, IPv6 and DNS routes, "" for a paused program, the policy's bounds.
func TestPlacementAcceptsValid(t *testing.T) {
	tab := programs.New(programs.Config{Pod: "a", Addr: "10.0.0.9:8000"})
	body := `{"version":2,"place":["p0"],"routes":{"p1":"10.0.0.1:8000","p2":"[fd00::1]:8000","p3":"pod-b.pool.ns.svc:8000","p4":""},` +
		`"room":{"10.0.0.1:8000":100,"10.0.0.9:8000":-20},"maxPauseSeconds":86400,"bufferTokensPerProgram":1048576,` +
		`"capacity":{"actingTokenWeight":0,"actingOnHost":true,"deviceOvercommit":8}}`
	if status, out := putPlacement(t, Handler(tab, testToken), body); status != http.StatusOK {
		t.Fatalf("status %d: %v", status, out)
	}
	if addr, ok := tab.RouteOf("p2"); !ok || addr != "[fd00::1]:8000" {
		t.Errorf("route of p2: %q %v", addr, ok)
	}
}

// TestApplyCapsMaxPause: the table caps a pause limit itself, for callers
// that bypass the control API: 2^63-1 seconds must not become a negative
// duration that force-resumes held requests at once.
func TestApplyCapsMaxPause(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clk := &fixedClock{now: now}
	tab := programs.New(programs.Config{Pod: "a", Clock: clk})
	tab.Apply(&wire.Placement{Version: 1, MaxPauseSeconds: 1<<63 - 1, Routes: map[string]string{"p": ""}})
	rt := tab.Route("p", false)
	if rt.Kind != programs.Hold {
		t.Fatalf("route %v, want hold", rt.Kind)
	}
	clk.now = now.Add(2 * time.Second)
	tab.Tick()
	select {
	case <-rt.Wait:
		t.Fatal("a held request was force-resumed after 2 s: the pause limit overflowed")
	default:
	}
}

type fixedClock struct{ now time.Time }

func (c *fixedClock) Now() time.Time { return c.now }

// FuzzPlacement: whatever body arrives, the control API answers 200, 400 or
// 413, and a placement it accepts leaves only forwardable routes and a
// positive pause limit behind.
func FuzzPlacement(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"place":["a"],"routes":{"b":"127.0.0.1:8000","c":""},"room":{"127.0.0.1:8000":5}}`,
		`{"version":2,"routes":{"p1":"::::"}}`,
		`{"version":3,"maxPauseSeconds":9223372036854775807}`,
		`{"version":4,"place":[""]}`,
		`{"version":5}trailing`,
		`{"version":6,"fullRoutes":true,"routes":{"x":"[::1]:1"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		tab := programs.New(programs.Config{Pod: "a", Addr: "127.0.0.1:9"})
		status, _ := putPlacement(t, Handler(tab, testToken), body)
		switch status {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q", status, body)
		}
		if status != http.StatusOK {
			if tab.Version() != 0 {
				t.Fatalf("refused placement %q was applied", body)
			}
			return
		}
		var p wire.Placement
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatalf("accepted %q, which does not decode: %v", body, err)
		}
		if err := ValidatePlacement(&p); err != nil {
			t.Fatalf("accepted %q, which does not validate: %v", body, err)
		}
		for id := range p.Routes {
			if addr, ok := tab.RouteOf(id); ok {
				if err := checkAddr(addr); err != nil {
					t.Fatalf("stored route %q for %q: %v", addr, id, err)
				}
			}
		}
	})
}
