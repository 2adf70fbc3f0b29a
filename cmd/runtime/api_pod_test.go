package main_test

// The API tests of the runtime binary: each starts it (runtimeproc) and
// speaks HTTP to it, as a client does. They live beside cmd/runtime, not in
// the API packages, whose unit tests stay in-process.

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/util/testing/runtimeproc"
)

// pod is the runtime binary serving the built-in tiny model (random
// weights, a ChatML template with Hermes tool calls) on loopback.
type pod struct{ base string }

func startPod(t *testing.T) *pod {
	t.Helper()
	p := runtimeproc.StartPod(t, runtimeproc.PodOptions{ControlToken: "e2e", Options: runtimeproc.Options{Name: "tiny",
		Args: []string{"--executor", "cpu"}}})
	return &pod{base: "http://" + p.API}
}

// post sends body and returns the status and the response body.
func (p *pod) post(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	c := http.Client{Timeout: 60 * time.Second}
	resp, err := c.Post(p.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp.StatusCode, b
}

// postJSON sends body, requires a 200 and decodes the reply into v.
func (p *pod) postJSON(t *testing.T, path, body string, v any) {
	t.Helper()
	status, b := p.post(t, path, body)
	if status != http.StatusOK {
		t.Fatalf("POST %s %s: %d %s", path, body, status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("POST %s: %v in %s", path, err, b)
	}
}
